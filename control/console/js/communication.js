// A communication: its status and goals, the saved history (trace as a timeline, prompts,
// turns) and the recording, fetched with the bearer header and played from a blob URL.

import {get, request, query} from './api.js';
import {drawGraph} from './graph.js';
import {watchCommunication} from './call.js';
import {h, clear, when, ms, text, showError} from './dom.js';

const FINAL = ['completed', 'failed', 'canceled', 'interrupted'];

function facts(c) {
  const rows = [
    ['status', c.communication_status], ['call status', c.call_status || ''], ['SIP code', c.sip_code ?? ''],
    ['direction', c.direction], ['recipient', c.recipient], ['from', c.from_number],
    ['scenario', h('a', {href: `#/scenario/${encodeURIComponent(c.scenario_sid)}`}, c.scenario_sid)],
    ['ran', c.version ? `version ${c.version}` : c.draft_version ? `frozen draft ${c.draft_version}` : ''],
    ['agent', c.agent_sid || '(scenario test call)'], ['test', c.is_test ? 'yes' : 'no'],
    ['goals', (c.goals || []).join(', ')], ['duration', `${c.duration} s`], ['end reason', c.end_reason || ''],
    ['error', c.error || ''], ['created', when(c.created_at)], ['answered', when(c.answered_at)], ['ended', when(c.ended_at)],
  ];
  return h('table', {class: 'kv', id: 'communication-facts'}, h('tbody', {},
    rows.map(([k, v]) => h('tr', {'data-field': k}, h('th', {}, k), h('td', {}, v)))));
}

function summary(ev) {
  const {at_ms: _a, event: _e, ...rest} = ev;
  switch (ev.event) {
    case 'brick_entered': return `${rest.brick_id || ''} (${rest.kind || ''})`;
    case 'output_taken': return `${rest.brick_id} → ${rest.output} → ${rest.next ?? '(end)'}`;
    case 'variable_changed': return `${rest.name} = ${text(rest.new)}`;
    case 'goal_reached': return `${rest.goal} (${rest.brick_id})`;
    case 'prompt_played': {
      const p = rest.prompt || {};
      const outcome = rest.outcome && typeof rest.outcome === 'object' ? rest.outcome.result : rest.outcome;
      return `${rest.brick_id}: ${p.text ?? p.url ?? JSON.stringify(p)} (${outcome ?? ''})`;
    }
    case 'input_heard': {
      const heard = rest.heard || {};
      return `${rest.brick_id}: ${heard.input ?? ''} ${heard.transcript ?? heard.digits ?? ''}`.trim();
    }
    case 'answer_matched': return `${rest.brick_id}: ${rest.answer_id}`;
    case 'call_ended': return rest.reason && typeof rest.reason === 'object' ? JSON.stringify(rest.reason) : text(rest.reason);
    default: return JSON.stringify(rest);
  }
}

function timeline(trace) {
  const end = Math.max(1, ...trace.map((e) => e.at_ms || 0));
  return h('ol', {class: 'timeline', id: 'trace-timeline'}, trace.map((e) => {
    // The tick's place on the bar is the event's share of the call (CSSOM, allowed by the CSP).
    const tick = h('span', {class: 'tick'});
    tick.style.left = `${(((e.at_ms || 0) / end) * 100).toFixed(1)}%`;
    return h('li', {class: `ev ev-${e.event}`, 'data-event': e.event},
      h('span', {class: 'at'}, ms(e.at_ms)), h('span', {class: 'bar'}, tick),
      h('b', {}, e.event), ' ', h('span', {class: 'detail'}, summary(e)));
  }));
}

function history(hist) {
  const prompts = h('table', {class: 'list', id: 'history-prompts'},
    h('thead', {}, h('tr', {}, ['at', 'prompt', 'outcome', 'played'].map((c) => h('th', {}, c)))),
    h('tbody', {}, (hist.prompts || []).map((p) => h('tr', {}, h('td', {}, ms(p.at_ms)),
      h('td', {}, p.prompt && (p.prompt.text || p.prompt.url) ? p.prompt.text || p.prompt.url : text(p.prompt)),
      h('td', {}, p.outcome + (p.error ? `: ${p.error}` : '')), h('td', {}, ms(p.played_ms))))));
  const turns = h('table', {class: 'list', id: 'history-turns'},
    h('thead', {}, h('tr', {}, ['turn', 'heard', 'transcript', 'recognition latency', 'turn latency', 'response'].map((c) => h('th', {}, c)))),
    h('tbody', {}, (hist.turns || []).map((t) => h('tr', {}, h('td', {}, t.index), h('td', {}, t.heard),
      h('td', {}, t.transcript ?? t.dtmf ?? ''), h('td', {}, t.final_latency_ms != null ? `${t.final_latency_ms} ms` : ''),
      h('td', {}, t.turn_latency_us != null ? `${(t.turn_latency_us / 1000).toFixed(0)} ms` : ''),
      h('td', {}, t.response_ms != null ? `${t.response_ms} ms` : '')))));
  return [
    h('h2', {}, 'Trace'), timeline(hist.trace || []),
    h('h2', {}, 'Prompts'), prompts,
    h('h2', {}, 'Turns'), turns,
    (hist.errors || []).length ? [h('h2', {}, 'Errors'), h('ul', {}, hist.errors.map((e) => h('li', {}, e)))] : null,
    h('h2', {}, 'Variables'), h('table', {class: 'kv'}, h('tbody', {}, Object.entries(hist.variables || {}).map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v))))),
  ];
}

/**
 * The live view of a communication under way, with the graph of the scenario record it
 * runs (drawn first, so the first events already move its highlight). Returns the stop
 * function.
 */
async function watch(main, c) {
  const graphBox = h('div', {class: 'graph-box', id: 'graph'});
  const live = h('div', {class: 'live', id: 'live'});
  main.insertBefore(h('section', {class: 'card', id: 'live-section'}, h('h2', {}, 'Live'), live, graphBox), main.children[2]);
  let graph = null;
  const record = c.version ? {version: c.version, draft: false} : {version: c.draft_version, draft: true};
  try {
    const v = await get(`/v1/scenario-version/by-scenario${query({scenario_sid: c.scenario_sid, ...record})}`);
    graph = drawGraph(graphBox, v.snapshot);
  } catch (e) {
    graphBox.textContent = `No graph: ${e.message}`;
  }
  const w = watchCommunication(c.id, live, graph);
  return () => w.stop();
}

export async function renderCommunication(main, id) {
  const path = `/v1/communication/${encodeURIComponent(id)}`;
  const c = await get(path);
  const histBox = h('section', {class: 'card', id: 'history'});
  const recBox = h('section', {class: 'card', id: 'recording'}, h('h2', {}, 'Recording'));
  main.append(h('h1', {}, 'Communication ', h('code', {}, c.id)), h('section', {class: 'card'}, facts(c)), recBox, histBox);
  if (!FINAL.includes(c.communication_status)) {
    histBox.append(h('p', {}, 'The call is not over yet; its history is saved when it ends.'));
    recBox.append(h('p', {}, 'A recording, when the agent records calls or a test call asked for one, is available after the call.'));
    // Live feeds exist for test calls only (browser calls and test dispatches).
    if (c.is_test) return watch(main, c);
    return undefined;
  }
  if (c.has_history) {
    try {
      const hist = await get(`${path}/history`);
      clear(histBox).append(...history(hist).flat().filter(Boolean));
    } catch (e) {
      showError(e, 'history');
    }
  } else if (FINAL.includes(c.communication_status)) {
    histBox.append(h('p', {}, 'No history was saved for this communication.'));
  }
  if (c.has_recording) {
    const button = h('button', {type: 'button', id: 'load-recording'}, 'Load the recording');
    recBox.append(button);
    const load = async () => {
      button.disabled = true;
      try {
        const resp = await request('GET', `${path}/recording`);
        const url = URL.createObjectURL(await resp.blob());
        button.replaceWith(h('audio', {controls: true, src: url, id: 'recording-audio'}),
          h('p', {class: 'hint'}, 'Stereo: the caller on the left, the bot on the right.'));
      } catch (e) {
        button.disabled = false;
        showError(e, 'recording');
      }
    };
    button.addEventListener('click', load);
    load();
  } else {
    recBox.append(h('p', {}, 'No recording (the agent does not record calls, or a test call was placed without recording).'));
  }
}
