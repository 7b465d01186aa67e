// Browser test calls: the microphone and speaker as the call's leg over WebRTC
// (POST /v1/communication/-/browser-call with the complete SDP offer), and the live view
// read from GET /v1/communication/{id}/live (server-sent events over fetch, since
// EventSource cannot send the Authorization header).

import {post, request} from './api.js';
import {h, clear, text, showError} from './dom.js';

const GATHER_TIMEOUT_MS = 5000;

/** Resolves when ICE gathering is complete, or after the timeout with what was gathered. */
function gathered(pc) {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      pc.removeEventListener('icegatheringstatechange', check);
      clearTimeout(timer);
      resolve();
    };
    const check = () => {
      if (pc.iceGatheringState === 'complete') done();
    };
    const timer = setTimeout(done, GATHER_TIMEOUT_MS);
    pc.addEventListener('icegatheringstatechange', check);
  });
}

/**
 * Reads a text/event-stream body, calling `onEvent(name, data)` per event (data parsed
 * as JSON when it is JSON). Comment lines (`: keepalive`) are skipped.
 */
export async function readEvents(resp, onEvent) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let name = 'message';
  let data = [];
  const dispatch = () => {
    if (data.length) {
      const raw = data.join('\n');
      let value = raw;
      try {
        value = JSON.parse(raw);
      } catch {
        value = raw;
      }
      onEvent(name, value);
    }
    name = 'message';
    data = [];
  };
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      // A CR at the end of what arrived may be the first half of a CRLF: wait for more.
      if (nl === buf.length - 1 && buf[nl] === '\r') break;
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') dispatch();
      else if (line.startsWith(':')) continue;
      else {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') name = v;
        else if (field === 'data') data.push(v);
      }
    }
  }
  dispatch();
}

/**
 * A turn's latency breakdown in ms (fields a turn does not have yet are left out):
 * response (end of the caller's speech → first packet of the reply: what the caller
 * waits), recognition (end of speech → final transcript), reply (answer → first packet of
 * the reply) and the engine's share of it.
 */
function turnLatency(t) {
  const parts = [];
  if (t.response_ms != null) parts.push(`response ${t.response_ms} ms`);
  if (t.final_latency_ms != null) parts.push(`recognition ${t.final_latency_ms} ms`);
  if (t.turn_latency_us != null) parts.push(`reply ${Math.round(t.turn_latency_us / 1000)} ms`);
  if (t.turn_engine_us != null) parts.push(`engine ${Math.round(t.turn_engine_us / 1000)} ms`);
  if (t.speech_ended_ms != null && t.final_ms != null) parts.push(`speech end→final ${t.final_ms - t.speech_ended_ms} ms`);
  return parts.join(', ') || '…';
}

/** The live panel of one call: transcripts, bricks, variables, prompts, turns, trace. */
function livePanel(container) {
  clear(container);
  const status = h('div', {class: 'live-status', id: 'live-status'}, 'connecting…');
  // The conversation: the bot's prompts and the caller's final transcripts, in the order
  // of the call's clock (a prompt is told when it has ended, with its start time).
  const transcript = h('ol', {class: 'transcript chat', id: 'live-transcript'});
  const interim = h('li', {class: 'interim caller', hidden: true});
  transcript.append(interim);
  /** Puts `li` (with data-at) before the first line of the chat that started later. */
  const place = (li) => {
    const at = Number(li.dataset.at);
    const later = [...transcript.children].find((c) => c !== interim && Number(c.dataset.at) > at);
    transcript.insertBefore(li, later || interim);
    transcript.scrollTop = transcript.scrollHeight;
  };
  const stamp = (ms) => h('span', {class: 'at'}, ms === undefined || ms === null ? '' : `${(ms / 1000).toFixed(2)} s`);
  const bricks = h('ol', {class: 'bricks', id: 'live-bricks'});
  const vars = h('tbody');
  const prompts = h('tbody');
  const turns = h('tbody');
  const trace = h('ol', {class: 'trace', id: 'live-trace'});
  const ended = h('div', {class: 'live-ended', id: 'live-ended', hidden: true});
  container.append(
    status, ended,
    h('div', {class: 'live-grid'},
      h('section', {class: 'chat-section'}, h('h3', {}, 'Conversation'), transcript),
      h('section', {}, h('h3', {}, 'Bricks'), bricks),
      h('section', {}, h('h3', {}, 'Variables'), h('table', {class: 'kv', id: 'live-variables'}, h('thead', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'value'))), vars)),
      h('section', {}, h('h3', {}, 'Prompts'), h('table', {class: 'list', id: 'live-prompts'},
        h('thead', {}, h('tr', {}, h('th', {}, 'brick'), h('th', {}, 'text'), h('th', {}, 'heard'))), prompts)),
      h('section', {}, h('h3', {}, 'Turn latency'), h('table', {class: 'list', id: 'live-turns'},
        h('thead', {}, h('tr', {}, h('th', {}, 'brick'), h('th', {}, 'heard'), h('th', {}, 'latency'))), turns)),
      h('section', {class: 'wide'}, h('h3', {}, 'Trace'), trace)));
  const varRows = new Map();
  const turnRows = new Map();
  return {
    status(t) {
      status.textContent = t;
    },
    onEvent(name, d, graph) {
      d = d && typeof d === 'object' ? d : {value: d};
      const at = d.at_ms !== undefined ? `${(d.at_ms / 1000).toFixed(2)} s ` : '';
      switch (name) {
        case 'brick':
          bricks.append(h('li', {'data-brick': d.brick_id}, `${at}${d.brick_id} (${d.kind})`));
          if (graph) graph.highlight(d.brick_id);
          break;
        case 'variable': {
          let row = varRows.get(d.name);
          if (!row) {
            row = h('tr', {'data-variable': d.name}, h('td', {}, d.name), h('td'));
            varRows.set(d.name, row);
            vars.append(row);
          }
          row.lastChild.textContent = text(d.new);
          row.title = `was ${text(d.old)}`;
          break;
        }
        case 'prompt': {
          const heard = d.played_ms !== undefined ? `${(d.played_ms / 1000).toFixed(1)} s${d.interrupted ? ', interrupted' : ''}` : '';
          const outcome = d.outcome && d.outcome !== 'completed' && d.outcome !== 'interrupted' ? ` (${d.outcome})` : '';
          prompts.append(h('tr', {}, h('td', {}, d.brick_id || ''), h('td', {}, d.text || d.file || ''), h('td', {}, heard + outcome)));
          place(h('li', {class: ['bot', d.interrupted && 'interrupted'], 'data-at': d.at_ms ?? 0, 'data-brick': d.brick_id || ''},
            h('span', {class: 'who'}, 'bot'), h('span', {class: 'said'}, d.text || (d.file ? `♪ ${d.file}` : '')),
            h('span', {class: 'meta'}, stamp(d.at_ms), d.brick_id ? ` · ${d.brick_id}` : '', heard ? ` · heard ${heard}` : '', outcome)));
          break;
        }
        case 'transcript':
          if (d.final) {
            interim.hidden = true;
            place(h('li', {class: 'final caller', 'data-at': d.at_ms ?? 0},
              h('span', {class: 'who'}, 'caller'), h('span', {class: 'said'}, d.text), h('span', {class: 'meta'}, stamp(d.at_ms))));
          } else {
            interim.hidden = false;
            interim.dataset.at = String(d.at_ms ?? '');
            clear(interim).append(h('span', {class: 'who'}, 'caller'), h('span', {class: 'said'}, `${d.text} …`), h('span', {class: 'meta'}, stamp(d.at_ms)));
          }
          break;
        case 'turn': {
          // A turn is told when it ends and again once its reply's first packet is out:
          // one row per turn index, drawn again with what is known.
          // The row keeps the brick of the turn's first telling: by the second one the
          // call is in the reply's brick.
          const key = d.index ?? d.brick_id ?? '';
          let row = turnRows.get(key);
          if (!row) {
            row = h('tr', {'data-turn': key, 'data-brick': d.brick_id || ''});
            turnRows.set(key, row);
            turns.append(row);
          }
          clear(row).append(h('td', {}, row.dataset.brick), h('td', {}, d.heard || ''), h('td', {}, turnLatency(d)));
          // The caller's line of this turn shows what the caller waited for the reply.
          const line = [...transcript.querySelectorAll('li.final')].find((li) => Number(li.dataset.at) === d.final_ms)
            || (d.final_ms == null ? null : [...transcript.querySelectorAll('li.final')].pop());
          if (line) {
            let lat = line.querySelector('.latency');
            if (!lat) line.querySelector('.meta').append(lat = h('span', {class: 'latency'}));
            lat.textContent = ` · ${turnLatency(d)}`;
          }
          break;
        }
        case 'trace': {
          const ev = d.event && typeof d.event === 'object' ? d.event : d;
          const {event, at_ms: _at, ...rest} = ev;
          // Played prompts are listed under Prompts, with what was heard of them.
          if (event === 'prompt_played') break;
          trace.append(h('li', {}, h('b', {}, `${at}${event || 'event'} `), h('code', {}, JSON.stringify(rest))));
          break;
        }
        default:
          trace.append(h('li', {}, h('b', {}, `${name} `), h('code', {}, JSON.stringify(d))));
      }
    },
    ended(d, id) {
      status.textContent = `ended: ${d.communication_status || d.status || ''}${d.call_status ? ` (${d.call_status})` : ''}`;
      if (Array.isArray(d.goals)) status.append(h('span', {id: 'live-goals'}, ` · goals: ${d.goals.join(', ') || 'none'}`));
      ended.hidden = false;
      const href = `#/communication/${encodeURIComponent(id)}`;
      // On the communication's own page the link draws it again (the hash does not change).
      const again = (ev) => {
        if (location.hash !== href) return;
        ev.preventDefault();
        window.dispatchEvent(new HashChangeEvent('hashchange'));
      };
      clear(ended).append('The call ended. ', h('a', {href, id: 'live-ended-link', onclick: again}, 'Open the communication'));
    },
  };
}

/**
 * Follows a communication's live events into `panel` (from livePanel) until `ended` or
 * until stop(); `graph` gets the running brick highlighted, `onEnd` runs once at the end.
 */
function followLive(id, panel, graph, onEnd) {
  const abort = new AbortController();
  let over = false;
  const end = () => {
    if (over) return;
    over = true;
    if (onEnd) onEnd();
  };
  (async () => {
    try {
      const resp = await request('GET', `/v1/communication/${encodeURIComponent(id)}/live`,
        {headers: {Accept: 'text/event-stream'}, signal: abort.signal});
      let endedSeen = false;
      await readEvents(resp, (name, data) => {
        if (name === 'ended') {
          endedSeen = true;
          panel.ended(data || {}, id);
        } else {
          panel.onEvent(name, data, graph);
        }
      });
      if (!endedSeen) panel.ended({status: 'stream closed'}, id);
    } catch (e) {
      if (e.name === 'AbortError') return;
      showError(e, 'live view');
      panel.ended({status: 'live view unavailable'}, id);
    }
    end();
  })();
  return {
    stop() {
      over = true;
      abort.abort();
    },
  };
}

/** Watches a communication that is under way (a call placed elsewhere) in `container`. */
export function watchCommunication(id, container, graph, onEnd) {
  const panel = livePanel(container);
  panel.status(`live: ${id}`);
  return followLive(id, panel, graph, onEnd);
}

/**
 * Places a browser call of a scenario's draft (`draft` true) or newest published version,
 * with test variables `data` (a flat object) and recorded when `record`, and runs its live
 * view in `container`. `graph` (from drawGraph) gets the running brick highlighted. Returns a
 * handle with hangUp().
 */
export async function startCall({scenarioSid, draft, direction = 'outbound', data = {}, record = false}, container, graph, onEnd) {
  const panel = livePanel(container);
  const audio = h('audio', {autoplay: true, id: 'remote-audio'});
  container.prepend(audio);
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({audio: true});
  } catch (e) {
    panel.status('no microphone');
    throw new Error(`the microphone is not available: ${e.message}`);
  }
  const pc = new RTCPeerConnection({iceServers: []});
  let communication = null;
  let finished = false;
  let watch = null;
  const finish = (why) => {
    if (finished) return;
    finished = true;
    for (const t of stream.getTracks()) t.stop();
    pc.close();
    if (watch) watch.stop();
    if (why) panel.status(why);
    if (onEnd) onEnd(communication);
  };
  try {
    for (const t of stream.getAudioTracks()) pc.addTrack(t, stream);
    pc.addEventListener('track', (ev) => {
      audio.srcObject = ev.streams[0] || new MediaStream([ev.track]);
    });
    await pc.setLocalDescription(await pc.createOffer());
    panel.status('gathering network candidates…');
    await gathered(pc);
    panel.status('calling…');
    const body = {scenario_sid: scenarioSid, draft: !!draft, direction, sdp: pc.localDescription.sdp};
    if (Object.keys(data).length) body.data = data;
    if (record) body.record = true;
    const answer = await post('/v1/communication/-/browser-call', body);
    communication = answer.communication;
    await pc.setRemoteDescription({type: 'answer', sdp: answer.sdp});
    panel.status(`in call ${communication.id}`);
    container.dataset.communication = communication.id;
  } catch (e) {
    finish('call failed');
    throw e;
  }
  pc.addEventListener('connectionstatechange', () => {
    if (pc.connectionState === 'failed') panel.status('media connection failed');
  });
  const id = communication.id;
  watch = followLive(id, panel, graph, () => finish());
  return {
    communication,
    /**
     * Asks the engine to hang up and stops the microphone; the live view goes on until
     * the engine reports the end (at most 10 s).
     */
    async hangUp() {
      panel.status('hanging up…');
      try {
        await post(`/v1/communication/${encodeURIComponent(id)}/hangup`);
      } catch (e) {
        finish('hung up here (the engine did not take the hang-up)');
        throw e;
      }
      for (const t of stream.getTracks()) t.stop();
      setTimeout(() => finish('hung up'), 10000);
    },
  };
}
