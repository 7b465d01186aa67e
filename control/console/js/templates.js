// Scenario templates offered when a scenario is created (constructor JSON as
// POST /v1/scenario takes it; docs/bricks.md describes every brick).

const brick = (id, properties, outputs = []) => ({id, description: '', properties, outputs});
const to = (type, next) => ({type, description: '', next});
const goal = (id, name) => brick(id, {goal: name}, [to('next', 'bye')]);
const say = (id, text, next) => brick(id, {text, language: '', voice: '', engine: '', model: ''}, [to('next', next)]);

/**
 * The quickstart: greets, asks whether the caller wants a call back (answered by speech),
 * and branches: "yes" and "no" each get their own prompt and goal; anything else or
 * silence records a goal of its own. It names no synthesizer or recognition engine, so
 * the installation's defaults apply (`tts.default_engine`, `dialer.default_stt_engine`:
 * Piper and Whisper while the local speech node runs).
 */
export function quickstart() {
  return {
    bricks: {
      start_call: {v1: [brick('start', {
        tts_general: {engine: '', voice: '', language: 'en-US', speed: 1, model: ''},
        stt_general: {language: 'en-US', engine: '', model: '', primary_language: '', fallback_languages: []},
      }, [to('next', 'hello')])]},
      audio_tts: {v1: [
        say('hello', 'Hello, this is the callsmith quickstart.', 'ask'),
        say('say_yes', 'Great, we will call you back soon.', 'g_yes'),
        say('say_no', 'All right, no call back then.', 'g_no'),
      ]},
      question: {v1: [brick('ask', {
        statement: {audio: {mode: 'tts', tts: {text: 'Would you like a call back? Please say yes or no.'}}, is_interruptible: false},
        type: 'standard',
        input_mode: 'speech',
        stt_properties: {no_input_timeout: 10, speech_timeout: 1},
        answer: {answers: [
          {answer_id: 'yes', description: 'the caller wants a call back', speech_input: {tokens: ['yes', 'yeah', 'sure'], mode: 'contains'}},
          {answer_id: 'no', description: 'the caller declines', speech_input: {tokens: ['no', 'nope'], mode: 'contains'}},
        ]},
      }, [to('yes', 'say_yes'), to('no', 'say_no'), to('invalid', 'g_unclear'), to('empty', 'g_silent')])]},
      goal: {v1: [goal('g_yes', 'callback_wanted'), goal('g_no', 'callback_declined'),
        goal('g_unclear', 'unclear'), goal('g_silent', 'silent')]},
      end_call: {v1: [brick('bye', {signal: ''})]},
    },
  };
}

/** An empty draft: a start_call leading straight to an end_call. */
export function empty() {
  return {
    bricks: {
      start_call: {v1: [brick('start', {tts_general: {engine: '', voice: '', language: 'en-US', speed: 1, model: ''}}, [to('next', 'bye')])]},
      end_call: {v1: [brick('bye', {signal: ''})]},
    },
  };
}

export const TEMPLATES = {quickstart: ['Quickstart: greet, ask yes/no, branch', quickstart], empty: ['Empty', empty]};
