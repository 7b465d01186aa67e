// Drives the web console in Debian's chromium (headless, through playwright-core) against
// a running callsmith: the scenario designer's path from login to a published scenario,
// the lists, the account picker of the superuser (MODE=design), a browser call of the
// draft answered by the fake microphone (MODE=call; MODE=call-once: the first call only), or
// a two-question bot built with the palette and the forms only, called with test variables
// and replayed (MODE=build). Chromium runs as a stock browser does: no loopback ICE
// candidates, its interface addresses offered once the microphone is granted. The result
// carries the offer's candidates and, per call, the candidate pair the browser selected.
// tests/tests/console.rs starts the engine and runs this script; what it needs comes in
// the environment:
//   BASE_URL, USER_EMAIL, USER_PASSWORD, SU_TOKEN, TENANT_SID, ACCOUNT_SID, NUMBER,
//   OUT_DIR (screenshots), CALLSMITH_CHROMIUM, CALLSMITH_PLAYWRIGHT_DIR, FAKE_AUDIO (wav).
// It prints one line `RESULT {...}` with the ids it made, and exits non-zero on a failed step.

import {createRequire} from 'node:module';
import path from 'node:path';
import fs from 'node:fs';
import os from 'node:os';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const require = createRequire(import.meta.url);
const {chromium} = require(path.join(env('CALLSMITH_PLAYWRIGHT_DIR'), 'playwright-core'));

const BASE = env('BASE_URL');
const OUT = env('OUT_DIR');
// `design`: the designer's path without a call; `call`: a browser call of the draft.
const MODE = process.env.MODE || 'design';
const STEP_MS = 20000;
const result = {};
const log = (...a) => console.log(`[console.mjs +${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const t0 = Date.now();

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'callsmith-chromium-'));
const args = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
  '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
  '--autoplay-policy=no-user-gesture-required',
];
if (process.env.FAKE_AUDIO) args.push(`--use-file-for-fake-audio-capture=${process.env.FAKE_AUDIO}`);
// launchPersistentContext gives chromium a fresh --user-data-dir of our own.
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env('CALLSMITH_CHROMIUM'),
  headless: true,
  args,
  viewport: {width: 1400, height: 1000},
  timeout: 60000,
});
context.setDefaultTimeout(STEP_MS);
// Every peer connection the page makes, kept for reading its selected candidate pair.
await context.addInitScript(() => {
  const Native = window.RTCPeerConnection;
  window.__peerConnections = [];
  window.RTCPeerConnection = function (...a) {
    const pc = new Native(...a);
    window.__peerConnections.push(pc);
    return pc;
  };
  window.RTCPeerConnection.prototype = Native.prototype;
});
const page = context.pages()[0] || await context.newPage();
const consoleLines = [];
page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));

// The offer the console sends, for the report: its ICE candidates.
page.on('request', (r) => {
  if (!r.url().endsWith('/v1/communication/-/browser-call')) return;
  try {
    const sdp = JSON.parse(r.postData() || '{}').sdp || '';
    result.offer_candidates = sdp.split(/\r?\n/).filter((l) => l.startsWith('a=candidate'));
    log('offer candidates', JSON.stringify(result.offer_candidates));
  } catch (_) {
    // not JSON: the API answers that itself
  }
});

/** Waits for `locator`, failing at once with the banner's text when the console shows an error. */
async function waitOrError(locator, timeout, step) {
  const banner = page.locator('#banner.error');
  // The loser of the race times out later; its rejection is caught and ignored.
  const which = await Promise.race([
    locator.waitFor({timeout}).then(() => 'ok', () => 'timeout'),
    banner.waitFor({timeout}).then(() => 'error', () => 'timeout'),
  ]);
  if (which === 'error') throw new Error(`${step}: the console shows an error: ${await banner.innerText()}`);
  if (which === 'timeout') throw new Error(`${step}: nothing within ${timeout} ms`);
}

async function shot(name) {
  const file = path.join(OUT, `${name}.png`);
  await page.screenshot({path: file, fullPage: true});
  log('screenshot', file);
}

/** The banner must not show an error (the page's own failure report). */
async function noErrorBanner(step) {
  const banner = page.locator('#banner.error');
  if (await banner.isVisible()) throw new Error(`${step}: the console shows an error: ${await banner.innerText()}`);
}

async function editDraft(transform) {
  const area = page.locator('#draft-json');
  const text = await area.inputValue();
  const changed = transform(text);
  check(changed !== text, 'the edit changes the draft');
  await area.fill(changed);
  return text;
}

try {
  // --- log in as a user ---------------------------------------------------------------
  await page.goto(`${BASE}/`);
  await page.locator('#login-form').waitFor();
  await page.fill('#login-email', env('USER_EMAIL'));
  await page.fill('#login-password', env('USER_PASSWORD'));
  await page.click('#login-submit');
  await page.locator('#create-scenario-form').waitFor();
  check((await page.locator('#who-name').innerText()) === env('USER_EMAIL'), 'the header names the user');
  log('logged in');

  // --- create the quickstart scenario ------------------------------------------------
  await page.fill('#new-scenario-name', 'Quickstart from the browser');
  await page.selectOption('#new-scenario-template', 'quickstart');
  await page.click('#create-scenario');
  await page.waitForURL(/#\/scenario\/scn_/);
  result.scenario = decodeURIComponent(page.url().split('#/scenario/')[1]);
  await page.locator('#verdict', {hasText: 'The draft is valid.'}).waitFor();
  const bricks = ['start', 'hello', 'ask', 'say_yes', 'say_no', 'g_yes', 'g_no', 'g_unclear', 'g_silent', 'bye'];
  for (const b of bricks) await page.locator(`svg.graph .node[data-brick="${b}"]`).waitFor();
  check(await page.locator('svg.graph .node').count() === bricks.length, 'one graph node per brick');
  check(await page.locator('svg.graph .edge[data-from="ask"][data-type="yes"][data-to="say_yes"]').count() === 1, 'the yes edge of the question');
  check((await page.locator('svg.graph .node[data-brick="ask"] .node-kind').textContent()).includes('question'), 'a node shows its kind');
  await noErrorBanner('create');
  await shot('01-scenario');
  log('created', result.scenario);

  if (MODE === 'call' || MODE === 'call-once') await browserCall();
  else if (MODE === 'build') await builder();
  else await designer();
  console.log(`RESULT ${JSON.stringify(result)}`);
} catch (e) {
  console.error(`FAILED: ${e.stack || e}`);
  console.error(`browser console:\n${consoleLines.join('\n')}`);
  try {
    await shot('failure');
  } catch (_) {
    // the page may be gone
  }
  process.exitCode = 1;
} finally {
  await context.close();
  fs.rmSync(profile, {recursive: true, force: true});
}

/**
 * The candidate pair the page's latest peer connection selected, as the browser reports
 * it: `{local, remote}`, each `address:port type`; null when none is selected yet.
 */
async function selectedPair() {
  return page.evaluate(async () => {
    const pc = window.__peerConnections[window.__peerConnections.length - 1];
    if (!pc) return null;
    const stats = await pc.getStats();
    let transport = null;
    stats.forEach((s) => {
      if (s.type === 'transport' && s.selectedCandidatePairId) transport = s;
    });
    const pair = transport && stats.get(transport.selectedCandidatePairId);
    if (!pair) return null;
    const show = (c) => c && `${c.address}:${c.port} ${c.candidateType}`;
    return {local: show(stats.get(pair.localCandidateId)), remote: show(stats.get(pair.remoteCandidateId))};
  });
}

/** Waits up to 10 s for the browser's selected candidate pair of the call in progress. */
async function waitSelectedPair() {
  for (let i = 0; i < 50; i++) {
    const pair = await selectedPair();
    if (pair) return pair;
    await page.waitForTimeout(200);
  }
  throw new Error('the browser selected no candidate pair within 10 s');
}

/**
 * What the browser hears of the bot for `ms`: the power of the call's received audio in the
 * telephone band (300–3400 Hz) and in 4.5–7.5 kHz, which only a wideband path carries, each
 * summed over the spectra WebAudio gives every 20 ms (dB relative to full scale).
 */
async function receivedBands(ms) {
  return page.evaluate(async (ms) => {
    const pc = window.__peerConnections[window.__peerConnections.length - 1];
    const track = pc.getReceivers().map((r) => r.track).find((t) => t && t.kind === 'audio');
    const ctx = new AudioContext({sampleRate: 48000});
    await ctx.resume();
    const analyser = ctx.createAnalyser();
    analyser.fftSize = 2048;
    analyser.smoothingTimeConstant = 0;
    ctx.createMediaStreamSource(new MediaStream([track])).connect(analyser);
    const bins = new Float32Array(analyser.frequencyBinCount);
    const hz = ctx.sampleRate / analyser.fftSize;
    let low = 0, high = 0;
    for (let t = 0; t < ms; t += 20) {
      await new Promise((r) => setTimeout(r, 20));
      analyser.getFloatFrequencyData(bins);
      bins.forEach((db, i) => {
        const f = i * hz, p = Math.pow(10, db / 10);
        if (f >= 300 && f <= 3400) low += p;
        if (f >= 4500 && f <= 7500) high += p;
      });
    }
    await ctx.close();
    return {low_db: 10 * Math.log10(low), high_db: 10 * Math.log10(high)};
  }, ms);
}

/** A call of the draft: the fake microphone says "yes"; the live view follows the branch. */
async function browserCall() {
  await page.click('#call-draft');
  await waitOrError(page.locator('#live-status', {hasText: 'in call'}), 30000, 'call');
  result.communication = await page.locator('#live').getAttribute('data-communication');
  result.selected_pair = await waitSelectedPair();
  log('in call', result.communication, 'over', JSON.stringify(result.selected_pair));
  // The bot's greeting and question, as the browser receives them.
  result.received_bands = await receivedBands(2500);
  log('received bands', JSON.stringify(result.received_bands));
  await page.locator('#live-bricks li[data-brick="ask"]').waitFor({timeout: 30000});
  await page.locator('svg.graph .node-active[data-brick="ask"]').waitFor();
  await waitOrError(page.locator('#live-transcript li.final').first(), 60000, 'transcript');
  result.transcript = await page.locator('#live-transcript li.final').first().innerText();
  log('heard', result.transcript);
  await page.locator('#live-bricks li[data-brick="say_yes"]').waitFor({timeout: 30000});
  await page.locator('#live-bricks li[data-brick="g_yes"]').waitFor({timeout: 30000});
  check(await page.locator('#live-bricks li[data-brick="say_no"]').count() === 0, 'the no branch was not taken');
  check((await page.locator('#live-prompts').innerText()).includes('Would you like a call back?'), 'the question in the prompts');
  await page.locator('#live-ended-link').waitFor({timeout: 60000});
  result.ended = await page.locator('#live-status').innerText();
  check(result.ended.includes('callback_wanted'), `the live view ends with the goal: ${result.ended}`);
  check(await page.locator('#live-turns tbody tr[data-brick="ask"]').count() === 1, 'the question\'s turn with its latency');
  await noErrorBanner('call');
  await shot('10-call');
  await page.click('#live-ended-link');
  await page.locator('#communication-facts').waitFor();
  check((await page.locator('#communication-facts tr[data-field="goals"]').innerText()).includes('callback_wanted'), 'the goal on the page');
  await page.locator('#trace-timeline li[data-event="goal_reached"]').waitFor();
  await noErrorBanner('communication page');
  await shot('11-communication');
  log('draft call done');
  if (MODE === 'call-once') return;

  // The published version, called the same way.
  await page.goto(`${BASE}/#/scenario/${encodeURIComponent(result.scenario)}`);
  await page.click('#publish');
  await page.locator('#call-version', {hasText: 'Call version 1'}).waitFor();
  await page.click('#call-version');
  await waitOrError(page.locator('#live-status', {hasText: 'in call'}), 30000, 'version call');
  result.version_communication = await page.locator('#live').getAttribute('data-communication');
  await page.locator('#live-ended-link').waitFor({timeout: 90000});
  const ended = await page.locator('#live-status').innerText();
  check(ended.includes('callback_wanted'), `the version call ends with the goal: ${ended}`);
  await shot('12-version-call');
  log('version call done');

  // Hanging up from the console: the engine ends the call and the live view reports it.
  await page.click('#call-draft');
  await waitOrError(page.locator('#live-status', {hasText: 'in call'}), 30000, 'call to hang up');
  result.hung_up_communication = await page.locator('#live').getAttribute('data-communication');
  await page.locator('#live-bricks li').first().waitFor({timeout: 30000});
  await page.click('#hang-up');
  await page.locator('#live-ended-link').waitFor({timeout: 30000});
  check(await page.locator('#hang-up').isHidden(), 'no hang-up button after the end');
  check(await page.locator('#call-draft').isEnabled(), 'a new call can be placed');
  await noErrorBanner('hang up');
  log('hung up', await page.locator('#live-status').innerText());
}

/** The designer's path after creating the quickstart: lists, validation, publish, versions. */
async function designer() {
  // --- the list shows it; open it from there -----------------------------------------
  await page.click('#nav a[href="#/scenarios"]');
  const row = page.locator(`#scenario-list tr[data-scenario="${result.scenario}"]`);
  await row.waitFor();
  check((await row.innerText()).includes('Quickstart from the browser'), 'the list names the scenario');
  check((await row.innerText()).includes('draft only'), 'not published yet');
  await shot('02-scenario-list');
  await row.locator('a').click();
  await page.locator('svg.graph .node[data-brick="ask"]').waitFor();

  // --- break the draft: the SCN error appears beside the brick, fix it ------------------
  const original = await editDraft((t) => t.replace('"next": "g_yes"', '"next": "g_nowhere"'));
  await page.click('#validate');
  const brickErr = page.locator('[data-brick-error="say_yes"]', {hasText: 'SCN105'});
  await brickErr.waitFor();
  check((await brickErr.innerText()).includes('g_nowhere'), 'the entry names the missing brick');
  await page.locator('svg.graph .node-error[data-brick="say_yes"]').waitFor();
  check(await page.locator('.gutter .gutter-error').count() >= 1, 'the editor marks the brick line');
  check((await page.locator('#verdict').innerText()).includes('validation problem'), 'the verdict counts the problems');
  // Publishing the broken draft is refused with the same entries.
  await page.click('#publish');
  await page.locator('#banner.error', {hasText: 'validation error'}).waitFor();
  check((await page.locator('[data-brick-error="say_yes"]').innerText()).includes('SCN105'), 'the entry stays beside the brick');
  // So is a browser call of it, before any media flows.
  await page.click('#banner button');
  await page.click('#call-draft');
  await page.locator('#banner.error', {hasText: 'scenario_invalid'}).waitFor();
  await page.locator('#live-status', {hasText: 'call failed'}).waitFor();
  check((await page.locator('[data-brick-error="say_yes"]').innerText()).includes('SCN105'), 'the call\'s entries beside the brick');
  check(await page.locator('#call-draft').isEnabled(), 'the call can be placed again');
  await shot('03-validation-error');
  log('validation error shown');

  await page.locator('#draft-json').fill(original);
  await page.click('#publish');
  await page.locator('#banner.note', {hasText: 'Published as version 1'}).waitFor();
  await page.locator('#verdict', {hasText: 'The draft is valid.'}).waitFor();
  check(await page.locator('svg.graph .node-error').count() === 0, 'no node is marked after the fix');
  await page.locator('#versions tr[data-version="1"]').waitFor();
  check((await page.locator('#call-version').innerText()) === 'Call version 1', 'the version can be called');
  check(await page.locator('#compare .pane').count() === 2, 'two records side by side');
  await page.selectOption('#compare-left', {label: 'version 1'});
  await page.selectOption('#compare-right', {label: 'working draft'});
  check((await page.locator('#compare').innerText()).includes('identical'), 'version 1 is the draft');
  await shot('04-published');
  log('published');

  // --- the live view against the event-stream contract (canned answers) ---------------
  // A communication under way is shown live: its events, read from GET …/live, fill the
  // panel and move the highlight over the graph of the scenario record it runs.
  const events = [
    ['brick', {brick_id: 'start', kind: 'start_call', at_ms: 0}],
    ['brick', {brick_id: 'hello', kind: 'audio_tts', at_ms: 5}],
    ['prompt', {brick_id: 'hello', text: 'Hello, this is the callsmith quickstart.', played_ms: 2100, interrupted: false, at_ms: 2200}],
    ['brick', {brick_id: 'ask', kind: 'question', at_ms: 2205}],
    ['transcript', {text: 'ye', final: false, at_ms: 5000}],
    ['transcript', {text: 'Yes.', final: true, at_ms: 5400}],
    ['variable', {name: 'answer', old: null, new: 'yes', at_ms: 5410}],
    ['turn', {index: 1, started_ms: 2300, ended_ms: 5400, speech_started_ms: 4700, first_partial_ms: 5000, final_ms: 5400,
      final_latency_ms: 420, transcript: 'Yes.', dtmf: null, heard: 'speech', interim: [[5000, 'ye']], brick_id: 'ask'}],
    ['turn', {index: 1, started_ms: 2300, ended_ms: 5400, speech_started_ms: 4700, first_partial_ms: 5000, final_ms: 5400,
      final_latency_ms: 420, transcript: 'Yes.', dtmf: null, heard: 'speech', interim: [[5000, 'ye']], reply_first_rtp_ms: 6200,
      turn_latency_us: 800000, turn_engine_us: 12000, brick_id: 'ask'}],
    ['trace', {at_ms: 5410, event: {at_ms: 5410, event: 'answer_matched', brick_id: 'ask', answer_id: 'yes'}}],
    ['brick', {brick_id: 'say_yes', kind: 'audio_tts', at_ms: 5420}],
  ];
  const sse = ': keepalive\n\n' + events.map(([n, d]) => `event: ${n}\ndata: ${JSON.stringify(d)}\n\n`).join('')
    + 'event: ended\r\ndata: {"communication_status":"completed","goals":["callback_wanted"],\r\ndata: "call_status":"answered"}\r\n\r\n';
  const mock = {id: 'com_mock', account_sid: env('ACCOUNT_SID'), agent_sid: null, scenario_sid: result.scenario, version: null,
    draft_version: 0, recipient: 'browser', from_number: '', direction: 'outbound', communication_status: 'in_progress',
    call_status: null, sip_code: null, duration: 0, goals: [], goal: null, variables: {}, data: {}, timezone: 'UTC', is_test: true,
    consent_granted: false, has_recording: false, has_history: false, end_reason: null, error: null, scheduled_at: null,
    due_at: new Date().toISOString(), started_at: null, answered_at: null, ended_at: null, created_at: new Date().toISOString(),
    updated_at: new Date().toISOString()};
  await page.route(/\/v1\/communication\/com_mock$/, (r) => r.fulfill({json: mock}));
  await page.route(/\/v1\/communication\/com_mock\/live$/, (r) => r.fulfill({contentType: 'text/event-stream', body: sse}));
  await page.goto(`${BASE}/#/communication/com_mock`);
  await page.locator('#live-ended-link').waitFor();
  check((await page.locator('#live-status').innerText()).includes('ended: completed (answered)'), 'the ended event (CRLF, two data lines)');
  check((await page.locator('#live-transcript li.final').innerText()).includes('Yes.'), 'the final transcript');
  check(await page.locator('#live-transcript li.interim').isHidden(), 'the interim transcript gave way to the final one');
  check((await page.locator('#live-variables tr[data-variable="answer"]').innerText()).includes('yes'), 'the variable');
  check((await page.locator('#live-prompts').innerText()).includes('callsmith quickstart'), 'the prompt');
  check(await page.locator('#live-turns tbody tr').count() === 1, 'one row per turn');
  check((await page.locator('#live-turns').innerText()).includes('recognition 420 ms, reply 800 ms, engine 12 ms'), 'the turn latency');
  check((await page.locator('#live-goals').innerText()).includes('callback_wanted'), 'the goals at the end');
  check((await page.locator('#live-trace').innerText()).includes('answer_matched'), 'other trace events');
  check(await page.locator('#live-bricks li').count() === 4, 'every brick event');
  await page.locator('svg.graph .node-active[data-brick="say_yes"]').waitFor();
  check(await page.locator('svg.graph .node-visited[data-brick="ask"]').count() === 1, 'the bricks run before');
  await noErrorBanner('live view');
  await shot('05-live-view');
  await page.unroute(/\/v1\/communication\/com_mock$/);
  await page.unroute(/\/v1\/communication\/com_mock\/live$/);
  log('live view shown');

  // The stream parser with the body cut at awkward places: inside a line, between CR and
  // LF, inside a multi-byte character.
  const parsed = await page.evaluate(async () => {
    const {readEvents} = await import('/console/js/call.js');
    const bytes = new TextEncoder().encode(': hi\r\nevent: transcript\r\ndata: {"text":"grüß dich","final":true}\r\n\r\nevent: ended\ndata: {"status":"completed"}\n\n');
    const cuts = [3, 17, 24, 45, 50, 67, 68, 80];
    const body = new ReadableStream({start(c) {
      let at = 0;
      for (const cut of [...cuts, bytes.length]) {
        c.enqueue(bytes.slice(at, cut));
        at = cut;
      }
      c.close();
    }});
    const seen = [];
    await readEvents(new Response(body), (name, data) => seen.push([name, data]));
    return seen;
  });
  check(JSON.stringify(parsed) === JSON.stringify([['transcript', {text: 'grüß dich', final: true}], ['ended', {status: 'completed'}]]),
    `the event-stream parser across chunks: ${JSON.stringify(parsed)}`);

  // --- a finished communication: history timeline and the recording (canned answers) ---
  const done = {...mock, id: 'com_done', communication_status: 'completed', call_status: 'answered', duration: 7,
    goals: ['callback_wanted'], goal: 'callback_wanted', has_history: true, has_recording: true, end_reason: 'end_call'};
  const history = {communication_id: 'com_done', direction: 'outbound', recipient: 'browser', from_number: '', call_id: 'x',
    answered_at: done.created_at, ended_at: done.created_at, duration_ms: 7000, end: {reason: 'end_call', brick_id: 'bye', signal: ''},
    forced_end: null, hangup: null, goals: ['callback_wanted'], variables: {answer: 'yes'}, steps: 6, errors: [], transfers: [], media: null,
    trace: [{at_ms: 0, event: 'brick_entered', brick_id: 'start', kind: 'start_call'},
      {at_ms: 5400, event: 'output_taken', brick_id: 'ask', output: 'yes', next: 'say_yes'},
      {at_ms: 6900, event: 'goal_reached', brick_id: 'g_yes', goal: 'callback_wanted'}],
    prompts: [{at_ms: 10, prompt: {text: 'Would you like a call back?'}, interruptible: false, outcome: 'completed', played_ms: 2100, elapsed_ms: 2150, error: null}],
    turns: [{index: 1, started_ms: 2300, ended_ms: 5400, heard: 'speech', transcript: 'Yes.', final_latency_ms: 420, turn_latency_us: 800000, interim: []}]};
  // One second of silence as a 16-bit stereo WAV at 8 kHz, like a call recording.
  const samples = 8000 * 2;
  const wavBytes = Buffer.alloc(44 + samples * 2);
  wavBytes.write('RIFF', 0); wavBytes.writeUInt32LE(36 + samples * 2, 4); wavBytes.write('WAVEfmt ', 8);
  wavBytes.writeUInt32LE(16, 16); wavBytes.writeUInt16LE(1, 20); wavBytes.writeUInt16LE(2, 22); wavBytes.writeUInt32LE(8000, 24);
  wavBytes.writeUInt32LE(32000, 28); wavBytes.writeUInt16LE(4, 32); wavBytes.writeUInt16LE(16, 34); wavBytes.write('data', 36);
  wavBytes.writeUInt32LE(samples * 2, 40);
  let recordingAuth = null;
  await page.route(/\/v1\/communication\/com_done$/, (r) => r.fulfill({json: done}));
  await page.route(/\/v1\/communication\/com_done\/history$/, (r) => r.fulfill({json: history}));
  await page.route(/\/v1\/communication\/com_done\/recording$/, (r) => {
    recordingAuth = r.request().headers().authorization || null;
    return r.fulfill({contentType: 'audio/wav', body: wavBytes});
  });
  await page.goto(`${BASE}/#/communication/com_done`);
  await page.locator('#trace-timeline li[data-event="goal_reached"]').waitFor();
  check(await page.locator('#trace-timeline li').count() === 3, 'one timeline row per trace event');
  check((await page.locator('#trace-timeline li[data-event="output_taken"]').innerText()).includes('ask → yes → say_yes'), 'the output taken');
  check((await page.locator('#history-turns').innerText()).includes('Yes.'), 'the turn transcript');
  check((await page.locator('#communication-facts tr[data-field="goals"]').innerText()).includes('callback_wanted'), 'the goals');
  await page.locator('#recording-audio').waitFor();
  check((await page.locator('#recording-audio').getAttribute('src')).startsWith('blob:'), 'the recording plays from a blob URL');
  check(recordingAuth && recordingAuth.startsWith('Bearer cs_se_'), 'the recording was fetched with the session token');
  const duration = await page.locator('#recording-audio').evaluate((a) => new Promise((resolve) => {
    if (a.readyState >= 1) resolve(a.duration);
    else a.addEventListener('loadedmetadata', () => resolve(a.duration), {once: true});
  }));
  check(Math.abs(duration - 1) < 0.1, `the recording loads in the audio element (${duration} s)`);
  await noErrorBanner('communication page');
  await shot('06-communication');
  await page.unrouteAll();
  log('communication page shown');

  // --- the lists ------------------------------------------------------------------------
  for (const [href, table] of [['#/agents', '#list-agents'], ['#/numbers', '#list-numbers'],
    ['#/communications', '#list-communications'], ['#/results', '#list-results']]) {
    await page.click(`#nav a[href="${href}"]`);
    await page.locator(`${table} thead`).waitFor();
    await noErrorBanner(href);
  }
  // --- records made from the console: a number, an agent on it, an audio file ---------
  await page.click('#nav a[href="#/numbers"]');
  await page.fill('#new-number-identifier', '+4930555999');
  await page.fill('#new-number-name', 'second line');
  await page.click('#create-number');
  await page.locator('#list-numbers td', {hasText: '+4930555999'}).waitFor();
  await page.click('#nav a[href="#/agents"]');
  await page.selectOption('#new-agent-scenario', result.scenario);
  await page.selectOption('#new-agent-number', {label: '+4930555999 · second line'});
  await page.check('#new-agent-recording');
  await page.click('#create-agent');
  const agentRow = page.locator('#list-agents tbody tr', {hasText: 'second line'});
  await agentRow.waitFor();
  // Names beside ids: the agent's scenario and number by name.
  check((await agentRow.innerText()).includes('Quickstart from the browser'), 'the agent row names its scenario');
  result.agent = await agentRow.getAttribute('data-id');
  await page.click('#nav a[href="#/audio"]');
  await page.setInputFiles('#new-audio-file', {name: 'jingle.wav', mimeType: 'audio/wav', buffer: wavBytes});
  await page.click('#upload-audio');
  const audioRow = page.locator('#list-audio tbody tr', {hasText: 'jingle.wav'});
  await audioRow.waitFor();
  result.audio = await audioRow.getAttribute('data-id');
  await noErrorBanner('records made in the console');
  await page.click('#nav a[href="#/communications"]');
  await page.locator('#list-communications thead').waitFor();
  await page.click('#nav a[href="#/numbers"]');
  await page.locator('#list-numbers td', {hasText: env('NUMBER')}).waitFor();
  await page.fill('form[data-list="numbers"] input[name="filter_query"]', 'no such number');
  await page.click('form[data-list="numbers"] button[type="submit"]');
  await page.locator('#list-numbers td.empty').waitFor();
  await shot('07-numbers');

  // --- log out; the superuser's token and the account picker ---------------------------
  await page.click('#logout');
  await page.locator('#login-form').waitFor();
  await page.fill('#login-token', env('SU_TOKEN'));
  await page.click('#token-submit');
  await page.selectOption('#pick-tenant', env('TENANT_SID'));
  await page.locator(`#pick-account a[data-account="${env('ACCOUNT_SID')}"]`).click();
  await page.locator(`#scenario-list tr[data-scenario="${result.scenario}"]`).waitFor();
  await shot('08-superuser');
  // A fresh installation: the superuser makes a tenant and an account from the console.
  await page.click('#who-account');
  await page.fill('#new-tenant-name', 'made in the console');
  await page.click('#create-tenant');
  // The picker is drawn again for the new tenant: fill the account form once it is.
  await page.waitForFunction(() => {
    const t = document.querySelector('#pick-tenant');
    return t && t.selectedOptions[0] && t.selectedOptions[0].textContent.includes('made in the console');
  });
  await page.locator('#new-account-name').waitFor();
  await page.fill('#new-account-name', 'console account');
  await page.fill('#new-account-email', 'console@example.test');
  await page.fill('#new-account-timezone', 'Europe/Berlin');
  await page.click('#create-account');
  await page.locator('#scenario-list td.empty').waitFor();
  result.made_account = (await page.evaluate(() => JSON.parse(sessionStorage.getItem('callsmith.console')))).account;
  check((await page.locator('#who-account').innerText()) === 'console account', 'the header names the new account');
  await noErrorBanner('new tenant and account');
  // A wrong token is refused with the API's message.
  await page.click('#logout');
  await page.fill('#login-token', 'cs_su_not_a_real_token_0123456789abcdef');
  await page.click('#token-submit');
  await page.locator('#banner.error', {hasText: 'unauthenticated'}).waitFor();
  log('superuser and wrong token done');
}

/** Fills a field of the brick form and waits until the builder has taken it. */
async function field(path, value) {
  const el = page.locator(`#brick-form [data-path="${path}"]`);
  await el.fill(value);
}

/** Chooses where the output `type` of the brick in the form leads. */
async function output(type, target) {
  await page.selectOption(`#brick-form [data-output-select="${type}"]`, target);
}

/** Selects brick `id` by clicking its node on the graph. */
async function pick(id) {
  await page.locator(`svg.graph .node[data-brick="${id}"] rect`).click();
  await page.locator(`#brick-form[data-brick="${id}"]`).waitFor();
}

/** The checks of the builder are done (saved and validated) for what was done so far. */
async function checked() {
  await page.locator('#check-state', {hasText: 'saved and checked'}).waitFor();
}

/**
 * A newcomer's bot, built with the palette and the forms only (no JSON typed): a greeting
 * question with a test variable, a second question, a goal; validated, published, called
 * with the variable and recorded, and the recording replayed on the communication page.
 */
async function builder() {
  await page.click('#nav a[href="#/scenarios"]');
  await page.fill('#new-scenario-name', 'Two questions');
  await page.selectOption('#new-scenario-template', 'empty');
  await page.click('#create-scenario');
  await page.waitForURL(/#\/scenario\/scn_/);
  result.built = decodeURIComponent(page.url().split('#/scenario/')[1]);
  await page.locator('svg.graph .node[data-brick="bye"]').waitFor();
  // The palette has every brick kind.
  const kinds = await page.locator('#palette [data-kind]').evaluateAll((els) => els.map((e) => e.dataset.kind));
  result.palette = kinds;

  // The voice of the whole scenario, in the start brick's form.
  await pick('start');
  await field('properties.tts_general.engine', 'espeak-ng');

  // The first question, from the palette: a new brick is connected after the selected one
  // when that has an open output; start's is taken (→ bye), so it is connected by a form.
  await page.click('#palette-question');
  await page.locator('#brick-form[data-brick="ask"]').waitFor();
  await field('properties.statement.audio.tts.text', 'Hello {{first_name}}, do you have a minute?');
  await page.click('#brick-form [data-add="properties.answer.answers"]');
  // The SCN entry of the empty answer id is shown beside that field.
  const idError = page.locator('#brick-form [data-error-for="properties.answer.answers[0].answer_id"] .scn');
  await idError.waitFor({timeout: 15000});
  result.inline_error = await idError.innerText();
  await shot('20-inline-error');
  await field('properties.answer.answers[0].answer_id', 'yes');
  await field('properties.answer.answers[0].speech_input.tokens', 'yes, sure');
  await page.click('#brick-form [data-add="properties.answer.answers"]');
  await field('properties.answer.answers[1].answer_id', 'no');
  await field('properties.answer.answers[1].speech_input.tokens', 'no');
  await checked();
  check(await idError.count() === 0, 'the entry is gone once the answer has an id');
  // The answers are outputs: yes leads to a new second question, made from the output's list.
  await output('yes', 'new:question');
  await page.locator('#brick-form[data-brick="ask_2"]').waitFor();
  await field('properties.statement.audio.tts.text', 'Which day suits you, {{first_name}}?');
  await page.click('#brick-form [data-add="properties.answer.answers"]');
  await field('properties.answer.answers[0].answer_id', 'monday');
  await field('properties.answer.answers[0].speech_input.tokens', 'monday');
  // A goal from the palette with the second question selected: connected to its open answer.
  await page.click('#palette-goal');
  await page.locator('#brick-form[data-brick="goal"]').waitFor();
  check(await page.locator('svg.graph .edge[data-from="ask_2"][data-type="monday"][data-to="goal"]').count() === 1, 'the goal follows the answer');
  await field('properties.goal', 'day_chosen');
  await output('next', 'bye');
  // The second question's other outputs, and the first's: by form and on the graph.
  await pick('ask_2');
  await output('invalid', 'bye');
  await output('empty', 'bye');
  await pick('ask');
  await output('no', 'bye');
  await page.click('#brick-form [data-output-pick="invalid"]');
  await page.locator('#connect-hint').waitFor();
  await page.locator('svg.graph .node[data-brick="bye"] rect').click();
  await page.locator('svg.graph .edge[data-from="ask"][data-type="invalid"][data-to="bye"]').waitFor();
  await output('empty', 'bye');
  // The entry leads to the first question.
  await pick('start');
  await output('next', 'ask');
  await checked();

  // What the builder made is the JSON view, and the nodes show what the bricks say.
  const json = JSON.parse(await page.locator('#draft-json').inputValue());
  const ask = json.constructor.bricks.question.v1.find((b) => b.id === 'ask');
  check(ask.properties.statement.audio.tts.text === 'Hello {{first_name}}, do you have a minute?', 'the JSON view holds the prompt');
  check((await page.locator('svg.graph .node[data-brick="ask"] .node-text').allTextContents()).join(' ').includes('Hello {{first_name}}'), 'the node shows the prompt');
  // The JSON view edits the builder too: a goal renamed in the text is in the form.
  const text = await page.locator('#draft-json').inputValue();
  await page.locator('#draft-json').fill(text.replace('"day_chosen"', '"monday_chosen"'));
  await pick('goal');
  await page.waitForFunction(() => document.querySelector('#brick-form [data-path="properties.goal"]')?.value === 'monday_chosen');
  // The graph pans and zooms: zooming in and fitting again shows every brick.
  await page.click('#zoom-in');
  await page.click('#zoom-fit');
  const box = await page.locator('#graph').boundingBox();
  for (const id of ['start', 'ask', 'ask_2', 'goal', 'bye']) {
    const b = await page.locator(`svg.graph .node[data-brick="${id}"] rect`).boundingBox();
    check(b && b.x >= box.x - 1 && b.y >= box.y - 1 && b.x + b.width <= box.x + box.width + 1 && b.y + b.height <= box.y + box.height + 1,
      `${id} is in view`);
  }
  await page.click('#validate');
  await page.locator('#verdict', {hasText: 'The draft is valid.'}).waitFor();
  await page.click('#publish');
  await page.locator('#banner.note', {hasText: 'Published as version 1'}).waitFor();
  await noErrorBanner('build');
  await shot('21-built');
  log('built and published', result.built);

  // A call with the test variable, recorded: the bot greets by name.
  await page.click('#call-options summary');
  await page.click('#suggest-test-vars');
  const row = page.locator('#test-vars .var-row[data-var="first_name"]');
  await row.waitFor();
  await row.locator('.var-value').fill('Ada');
  await page.check('#call-record');
  await page.click('#call-version');
  await waitOrError(page.locator('#live-status', {hasText: 'in call'}), 30000, 'call with variables');
  result.variables_call = await page.locator('#live').getAttribute('data-communication');
  const greeting = page.locator('#live-transcript li.bot', {hasText: 'Hello Ada, do you have a minute?'});
  await greeting.waitFor({timeout: 30000});
  result.greeting = await greeting.innerText();
  await shot('22-call-with-variables');
  await page.click('#hang-up');
  await page.locator('#live-ended-link').waitFor({timeout: 30000});
  // The recording is there once the call's end is stored: the page is opened again until then.
  for (let i = 0; ; i++) {
    if (i === 0) await page.goto(`${BASE}/#/communication/${encodeURIComponent(result.variables_call)}`);
    else await page.reload();
    await page.locator('#communication-facts').waitFor();
    try {
      await page.locator('#recording-audio').waitFor({timeout: 3000});
      break;
    } catch (e) {
      if (i === 8) throw e;
    }
  }
  result.recording_seconds = await page.locator('#recording-audio').evaluate((a) => new Promise((resolve) => {
    if (a.readyState >= 1) resolve(a.duration);
    else a.addEventListener('loadedmetadata', () => resolve(a.duration), {once: true});
  }));
  check(result.recording_seconds > 1, `the recording plays (${result.recording_seconds} s)`);
  await noErrorBanner('recording');
  await shot('23-recording');
  log('called with variables and replayed', result.variables_call);
}
