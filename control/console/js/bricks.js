// The brick model as the builder sees it: every brick kind of docs/bricks.md with its
// fixed output types, the properties its form edits, a new brick's defaults and a short
// summary for its graph node. Pure data and functions (no DOM), so `node --test` runs it.
// `control/src/api/console.rs` checks that KINDS names every kind of the Rust model with
// the output types validation allows (`fixed_output_types`).

/**
 * A form field: `key` is a dotted path below the object the field belongs to.
 * @typedef {object} Field
 * @property {string} key
 * @property {string} label
 * @property {'text'|'textarea'|'number'|'bool'|'select'|'words'|'object'|'list'} type
 *   `words`: an array of strings edited as comma-separated text; `object`: a group of
 *   `fields` at `key`; `list`: an array of objects, each edited with `fields`.
 * @property {string[]} [options] the choices of a select ('' is "default")
 * @property {Field[]} [fields] the sub-fields of an object or of a list item
 * @property {() => object} [item] a new list item
 * @property {string} [hint]
 * @property {boolean} [advanced] shown folded
 */

/**
 * One brick kind.
 * @typedef {object} Kind
 * @property {string} label
 * @property {'entry'|'speak'|'listen'|'logic'|'data'|'end'} group
 * @property {string} help
 * @property {string[]} outputs the fixed output types (answers and conditions add theirs)
 * @property {Field[]} fields
 * @property {() => object} props the properties of a new brick
 */

/** @param {string} key @param {string} label @param {Partial<Field>} [more] @returns {Field} */
const text = (key, label, more = {}) => ({key, label, type: 'text', ...more});
/** @param {string} key @param {string} label @param {Partial<Field>} [more] @returns {Field} */
const area = (key, label, more = {}) => ({key, label, type: 'textarea', ...more});
/** @param {string} key @param {string} label @param {Partial<Field>} [more] @returns {Field} */
const num = (key, label, more = {}) => ({key, label, type: 'number', ...more});
/** @param {string} key @param {string} label @param {Partial<Field>} [more] @returns {Field} */
const bool = (key, label, more = {}) => ({key, label, type: 'bool', ...more});
/** @param {string} key @param {string} label @param {string[]} options @param {Partial<Field>} [more] @returns {Field} */
const select = (key, label, options, more = {}) => ({key, label, type: 'select', options, ...more});
/** @param {string} key @param {string} label @param {Field[]} fields @param {Partial<Field>} [more] @returns {Field} */
const group = (key, label, fields, more = {}) => ({key, label, type: 'object', fields, ...more});
/** @param {string} key @param {string} label @param {Field[]} fields @param {() => object} item @param {Partial<Field>} [more] @returns {Field} */
const list = (key, label, fields, item, more = {}) => ({key, label, type: 'list', fields, item, ...more});

const TTS = [text('language', 'language', {hint: 'e.g. en-US; empty: the scenario default'}), text('voice', 'voice'),
  text('engine', 'engine'), num('speed', 'speed', {hint: '0 or empty: the engine default'}), text('model', 'model')];
/** @param {string} key @param {string} label @param {Partial<Field>} [more] */
const tts = (key, label, more = {}) => group(key, label, TTS, {advanced: true, ...more});
/** A prompt `{mode, tts{text}, file{url}}`. @param {string} key @param {string} label @param {Partial<Field>} [more] */
const prompt = (key, label, more = {}) => group(key, label, [select('mode', 'mode', ['tts', 'file']),
  area('tts.text', 'text to speak', {hint: '{{variables}} are filled in'}), text('file.url', 'audio file (aud_… or URL)', {hint: 'mode file'})], more);
const NAME_VALUE = [text('name', 'name'), text('value', 'value')];
const MAPPING = [text('name', 'variable'), select('source', 'source', ['body', 'header']), text('path', 'path', {hint: 'JSONPath ($.a.b) or header name'}),
  text('set_if_not_found', 'if not found')];
const FALLBACK = [prompt('audio', 'prompt (empty: none)'), bool('is_repeat_statement', 'then repeat the statement'),
  bool('is_interruptible', 'interruptible')];
const OPERATORS = ['equal', 'not_equal', 'greater', 'less', 'greater_or_equal', 'less_or_equal', 'contains', 'not_contains', 'regex', 'empty', 'not_empty'];

/** Every brick kind, in the order of the palette. @type {Record<string, Kind>} */
export const KINDS = {
  start_call: {
    label: 'Start (outbound)', group: 'entry', outputs: ['next'],
    help: 'Where an outbound call starts; its voice and recognition are the whole scenario\'s defaults.',
    fields: [tts('tts_general', 'voice (scenario default)', {advanced: false}),
      group('stt_general', 'recognition (scenario default)', [text('language', 'language'), text('engine', 'engine'), text('model', 'model'),
        text('primary_language', 'primary language'), {key: 'fallback_languages', label: 'fallback languages', type: 'words'}], {advanced: true})],
    props: () => ({tts_general: {engine: '', voice: '', language: 'en-US', speed: 1, model: ''}}),
  },
  outbound_call: {
    label: 'Outbound call', group: 'entry', outputs: ['next', 'human', 'voicemail'],
    help: 'Entry of an outbound call; with answering-machine detection it branches to human or voicemail.',
    fields: [bool('is_voicemail', 'detect answering machines')],
    props: () => ({is_voicemail: false}),
  },
  inbound_call: {
    label: 'Inbound call', group: 'entry', outputs: ['next'],
    help: 'Where an inbound call starts.', fields: [], props: () => ({}),
  },
  start_tree: {
    label: 'Sub-tree start', group: 'entry', outputs: ['next'],
    help: 'Begins a sub-tree; point an output at it to enter it.', fields: [], props: () => ({}),
  },
  audio_tts: {
    label: 'Say', group: 'speak', outputs: ['next'],
    help: 'Speaks a text; language, voice, engine and model override the scenario defaults.',
    fields: [area('text', 'text to speak', {hint: '{{variables}} are filled in'}), text('language', 'language', {advanced: true}),
      text('voice', 'voice', {advanced: true}), text('engine', 'engine', {advanced: true}), text('model', 'model', {advanced: true})],
    props: () => ({text: ''}),
  },
  audio: {
    label: 'Prompts', group: 'speak', outputs: ['next'],
    help: 'Plays a list of prompts, all in order or one at random.',
    fields: [select('play_mode', 'play', ['sequential', 'random']),
      list('audios', 'prompts', [select('mode', 'mode', ['tts', 'file']), area('tts_properties.text', 'text to speak'),
        text('file_properties.url', 'audio file (aud_… or URL)', {hint: 'mode file'})], () => ({mode: 'tts', tts_properties: {text: ''}})),
      tts('tts_general', 'voice')],
    props: () => ({play_mode: 'sequential', audios: [{mode: 'tts', tts_properties: {text: ''}}]}),
  },
  audio_file: {
    label: 'Play file', group: 'speak', outputs: ['next'],
    help: 'Plays an audio file of the account (aud_… id) or a public URL.',
    fields: [text('url', 'audio file (aud_… or URL)', {hint: 'upload files on the Audio page'})],
    props: () => ({url: ''}),
  },
  question: {
    label: 'Question', group: 'listen', outputs: ['next', 'invalid', 'empty'],
    help: 'Asks, listens, and takes the output of the answer that matches; invalid and empty when the fallbacks are used up.',
    fields: [prompt('statement.audio', 'question'), bool('statement.is_interruptible', 'the caller may interrupt'),
      select('input_mode', 'answered by', ['', 'speech', 'dtmf', 'speech_and_dtmf'], {hint: 'empty: speech, plus keys when an answer has keys'}),
      list('answer.answers', 'answers (each is an output)', [text('answer_id', 'answer id (output type)'), text('description', 'description'),
        {key: 'speech_input.tokens', label: 'phrases (comma-separated)', type: 'words'}, select('speech_input.mode', 'match', ['contains', 'exact']),
        text('dtmf_input.value', 'keys'), text('speech_input.intent.id', 'intent id', {advanced: true})],
      () => ({answer_id: '', speech_input: {tokens: [], mode: 'contains'}})),
      list('fallback_invalid.fallbacks', 'when no answer matches', FALLBACK, () => ({is_repeat_statement: true}), {advanced: true}),
      list('fallback_empty.fallbacks', 'when the caller says nothing', FALLBACK, () => ({is_repeat_statement: true}), {advanced: true}),
      group('stt_properties', 'listening', [num('no_input_timeout', 'silence before "no answer" (s)'), num('speech_timeout', 'end of turn after (s)'),
        text('language', 'language'), text('engine', 'engine'), text('model', 'model')], {advanced: true}),
      group('dtmf_properties', 'keys', [num('max_symbols', 'most keys'), num('min_symbols', 'fewest keys'), num('dtmf_timeout', 'pause between keys (s)'),
        num('no_input_timeout', 'no input timeout (s)'), text('finish_on_key', 'finish key')], {advanced: true}),
      tts('tts_properties', 'voice'), text('type', 'type (kept, not interpreted)', {advanced: true})],
    props: () => ({statement: {audio: {mode: 'tts', tts: {text: ''}}, is_interruptible: false}, input_mode: 'speech',
      stt_properties: {no_input_timeout: 8}, answer: {answers: []}}),
  },
  goal: {
    label: 'Goal', group: 'logic', outputs: ['next'],
    help: 'Records an outcome of the call in its goals.',
    fields: [text('goal', 'goal')], props: () => ({goal: ''}),
  },
  condition_group: {
    label: 'Condition', group: 'logic', outputs: ['next', 'else'],
    help: 'Takes the output of the first true condition, else `else`.',
    fields: [list('condition.conditions', 'conditions (each is an output)', [text('condition_id', 'condition id (output type)'),
      select('condition_operator', 'combine', ['and', 'or']),
      list('elements', 'comparisons', [text('variable', 'variable'), select('element_operator', 'operator', OPERATORS), text('value', 'value')],
        () => ({variable: '', element_operator: 'equal', value: ''}))],
    () => ({condition_id: '', condition_operator: 'and', elements: [{variable: '', element_operator: 'equal', value: ''}]}))],
    props: () => ({condition: {conditions: []}}),
  },
  assignment: {
    label: 'Set variables', group: 'data', outputs: ['next'],
    help: 'Sets each variable to its rendered value, in order.',
    fields: [list('variables', 'variables', NAME_VALUE, () => ({name: '', value: ''}))],
    props: () => ({variables: [{name: '', value: ''}]}),
  },
  increment: {
    label: 'Count up', group: 'data', outputs: ['next'],
    help: 'Adds 1 to each variable.',
    fields: [list('variables', 'variables', [text('variable', 'variable')], () => ({variable: ''}))],
    props: () => ({variables: [{variable: ''}]}),
  },
  data_mapping: {
    label: 'Map JSON', group: 'data', outputs: ['next'],
    help: 'Parses a rendered JSON text and writes JSONPath results to variables.',
    fields: [area('input', 'JSON input', {hint: 'e.g. {{webhook.body}}'}), list('variables', 'mappings', MAPPING,
      () => ({name: '', source: 'body', path: '$.', set_if_not_found: ''}))],
    props: () => ({input: '', variables: []}),
  },
  webhook: {
    label: 'Webhook', group: 'data', outputs: ['next', 'processed', 'fail'],
    help: 'Calls an HTTP endpoint and maps its answer to variables.',
    fields: [select('request.method', 'method', ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']), text('request.url', 'URL'),
      select('request.body.type', 'body type', ['', 'json', 'text', 'form']), area('request.body.data', 'body'),
      list('request.header.headers', 'headers', NAME_VALUE, () => ({name: '', value: ''}), {advanced: true}),
      select('request.authentication.type', 'authentication', ['', 'none', 'basic', 'bearer'], {advanced: true}),
      text('request.authentication.basic.username', 'basic: user', {advanced: true}),
      text('request.authentication.basic.password', 'basic: password', {advanced: true}),
      text('request.authentication.bearer.token', 'bearer token', {advanced: true}),
      num('request.timeout', 'timeout (s)', {advanced: true}), bool('request.attach_call_metadata', 'send call headers', {advanced: true}),
      bool('options.async', 'do not wait for the answer', {advanced: true}),
      list('response_mapping.variables', 'answer → variables', MAPPING, () => ({name: '', source: 'body', path: '$.', set_if_not_found: ''}))],
    props: () => ({request: {method: 'POST', url: 'https://', body: {type: 'json', data: ''}}, response_mapping: {variables: []}}),
  },
  sms: {
    label: 'SMS', group: 'data', outputs: ['next', 'success', 'failure'],
    help: 'Sends a text message (to empty: the call\'s recipient).',
    fields: [text('to', 'to', {hint: 'empty: the recipient'}), area('text', 'text')], props: () => ({to: '', text: ''}),
  },
  call_transfer: {
    label: 'Transfer', group: 'end', outputs: ['next', 'success', 'failure', 'timeout'],
    help: 'Transfers the caller (blind) or bridges a second leg (bridged).',
    fields: [text('number', 'number'), select('transfer_mode', 'mode', ['blind', 'bridged']), num('timeout', 'timeout (s)'),
      text('from', 'caller id (bridged)', {advanced: true}), prompt('message_to_client', 'message to the caller', {advanced: true}),
      prompt('message_to_manager', 'message to the target', {advanced: true}),
      list('sip_header.sip_headers', 'SIP headers', NAME_VALUE, () => ({name: '', value: ''}), {advanced: true}), tts('tts_properties', 'voice')],
    props: () => ({number: '', transfer_mode: 'blind', timeout: 30}),
  },
  end_call: {
    label: 'Hang up', group: 'end', outputs: [],
    help: 'Hangs up with a signal (why the scenario ended).',
    fields: [text('signal', 'signal')], props: () => ({signal: ''}),
  },
  end: {
    label: 'End', group: 'end', outputs: [],
    help: 'Hangs up.', fields: [], props: () => ({}),
  },
};

/** The palette's groups, in order. */
export const GROUPS = [['entry', 'Entry'], ['speak', 'Speak'], ['listen', 'Listen'], ['logic', 'Logic'], ['data', 'Data'], ['end', 'Transfer and end']];

/** Kinds that begin a tree, in the order validation visits them. */
export const ROOT_KINDS = ['start_call', 'outbound_call', 'inbound_call', 'start_tree'];

/** @param {unknown} v @returns {v is Record<string, any>} */
export const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The value at a dotted path (`a.b.c`) of `obj`, undefined when a step is missing.
 * @param {any} obj @param {string} path
 */
export function getPath(obj, path) {
  let v = obj;
  for (const k of path.split('.')) {
    if (!isObj(v)) return undefined;
    v = v[k];
  }
  return v;
}

/**
 * Sets the value at a dotted path, creating the objects on the way (replacing non-objects);
 * `undefined` removes the key.
 * @param {Record<string, any>} obj @param {string} path @param {any} value
 */
export function setPath(obj, path, value) {
  const keys = path.split('.');
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (!isObj(o[k])) o[k] = {};
    o = o[k];
  }
  const last = /** @type {string} */ (keys[keys.length - 1]);
  if (value === undefined) delete o[last];
  else o[last] = value;
}

/**
 * The output types a brick may have: its kind's fixed ones, then each answer_id (question)
 * or condition_id (condition_group). Unknown kinds have none.
 * @param {string} kind @param {any} props
 * @returns {string[]}
 */
export function outputTypes(kind, props) {
  const k = KINDS[kind];
  if (!k) return [];
  /** @param {unknown} list @param {string} key */
  const ids = (list, key) => (Array.isArray(list) ? list : []).map((e) => (isObj(e) && typeof e[key] === 'string' ? e[key] : '')).filter(Boolean);
  const branches = kind === 'question' ? ids(getPath(props, 'answer.answers'), 'answer_id')
    : kind === 'condition_group' ? ids(getPath(props, 'condition.conditions'), 'condition_id') : [];
  // The branches first: they are what the brick is about; `next` is the catch-all.
  return [...new Set([...branches, ...k.outputs])];
}

/**
 * A new brick of `kind` with id `id`: its default properties and one unconnected output
 * per fixed output type except the catch-all `next` of branching kinds.
 * @param {string} kind @param {string} id
 */
export function newBrick(kind, id) {
  const k = KINDS[kind];
  if (!k) throw new Error(`unknown brick kind ${kind}`);
  const outputs = k.outputs.length === 1 ? [{type: k.outputs[0], description: '', next: ''}]
    : k.outputs.filter((t) => t !== 'next').map((type) => ({type, description: '', next: ''}));
  return {id, description: '', properties: k.props(), outputs};
}

/** The text a brick speaks, for its node: the prompt or the first prompt of a list. @param {string} kind @param {any} props */
export function spokenText(kind, props) {
  if (!isObj(props)) return '';
  switch (kind) {
    case 'audio_tts':
    case 'sms':
      return typeof props.text === 'string' ? props.text : '';
    case 'question': {
      const a = getPath(props, 'statement.audio');
      return isObj(a) && a.mode === 'file' ? `♪ ${getPath(a, 'file.url') || ''}` : String(getPath(props, 'statement.audio.tts.text') || '');
    }
    case 'audio': {
      const first = Array.isArray(props.audios) ? props.audios.find(isObj) : null;
      if (!first) return '';
      return first.mode === 'file' ? `♪ ${getPath(first, 'file_properties.url') || ''}` : String(getPath(first, 'tts_properties.text') || '');
    }
    case 'audio_file':
      return props.url ? `♪ ${props.url}` : '';
    default:
      return '';
  }
}

/**
 * One line of the key properties of a brick for its node (besides the spoken text).
 * @param {string} kind @param {any} props
 */
export function keyFacts(kind, props) {
  if (!isObj(props)) return '';
  /** @param {unknown} list @param {string} key */
  const ids = (list, key) => (Array.isArray(list) ? list : []).filter(isObj).map((e) => e[key]).filter(Boolean).join(' · ');
  switch (kind) {
    case 'goal':
      return `goal: ${props.goal || ''}`;
    case 'end_call':
      return props.signal ? `signal: ${props.signal}` : '';
    case 'question':
      return ids(getPath(props, 'answer.answers'), 'answer_id');
    case 'condition_group':
      return ids(getPath(props, 'condition.conditions'), 'condition_id');
    case 'assignment':
      return ids(props.variables, 'name');
    case 'increment':
      return ids(props.variables, 'variable');
    case 'webhook':
      return `${getPath(props, 'request.method') || ''} ${getPath(props, 'request.url') || ''}`.trim();
    case 'call_transfer':
      return `${props.transfer_mode || 'blind'} → ${props.number || ''}`;
    case 'start_call':
      return [getPath(props, 'tts_general.language'), getPath(props, 'tts_general.voice')].filter(Boolean).join(' ');
    case 'outbound_call':
      return props.is_voicemail ? 'answering-machine detection' : '';
    case 'sms':
      return props.to ? `to ${props.to}` : 'to the recipient';
    default:
      return '';
  }
}
