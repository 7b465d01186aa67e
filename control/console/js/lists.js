// The list pages (agents, numbers, audio files, communications, result deliveries): a
// creation form where the console makes such records, a filter form over the list
// endpoint's query parameters, a table with the names of the records it refers to beside
// their ids, and paging by limit/offset.

import {get, post, query, request} from './api.js';
import {h, clear, when, text, showError, showNote, action} from './dom.js';

/**
 * Names of the account's scenarios, numbers and agents by id, for the lists' columns and
 * the creation forms' choices.
 * @typedef {{scenarios: Map<string, any>, numbers: Map<string, any>}} Names
 */

/** @returns {Promise<Names>} */
async function loadNames() {
  const [scenarios, numbers] = await Promise.all([
    get(`/v1/scenario${query({limit: 500})}`).catch(() => ({items: []})),
    get(`/v1/number${query({limit: 500})}`).catch(() => ({items: []})),
  ]);
  return {scenarios: new Map(scenarios.items.map((s) => [s.id, s])), numbers: new Map(numbers.items.map((n) => [n.id, n]))};
}

/**
 * A record's name with its id beside it (the id alone when the name is unknown).
 * @param {string | null | undefined} id @param {string | undefined} name @param {string} [href]
 */
export function named(id, name, href) {
  if (!id) return '';
  const label = name || id;
  return h('span', {class: 'named'}, href ? h('a', {href}, label) : label, name ? h('code', {class: 'sid'}, ` ${id}`) : null);
}

/** @param {Names} n @param {string} id */
const scenarioName = (n, id) => named(id, n.scenarios.get(id)?.name, `#/scenario/${encodeURIComponent(id)}`);
/** @param {Names} n @param {string} id */
const numberName = (n, id) => {
  const num = n.numbers.get(id);
  return named(id, num ? [num.identifier, num.name].filter(Boolean).join(' · ') : undefined);
};

const PAGE = 50;

const STATUS = ['', 'active', 'inactive'];

/** Every list page: its endpoint, filters (query parameters) and columns. */
export const LISTS = {
  agents: {
    title: 'Agents',
    path: '/v1/agent',
    filters: [
      {name: 'status', options: STATUS},
      {name: 'scenario_sid', placeholder: 'scn_…'},
      {name: 'gateway_type', options: ['', 'number', 'number_pool']},
      {name: 'archived', options: ['', 'true', 'false'], label: 'archived (empty: live only)'},
    ],
    columns: [
      ['id', (r) => r.id],
      ['status', (r) => r.status],
      ['scenario', (r, n) => scenarioName(n, r.scenario_sid)],
      ['gateway', (r, n) => [r.gateway_type, ' ', r.number_sid ? numberName(n, r.number_sid) : r.number_pool_sid || '']],
      ['limits', (r) => text(r.limits)],
      ['recording', (r) => (r.call_recording ? 'yes' : 'no')],
      ['created', (r) => when(r.created_at)],
    ],
  },
  numbers: {
    title: 'Numbers',
    path: '/v1/number',
    filters: [
      {name: 'filter_query', placeholder: 'identifier or name contains'},
      {name: 'status', options: STATUS},
      {name: 'order_by', options: ['', 'created_at', 'name', 'identifier']},
    ],
    columns: [
      ['identifier', (r) => r.identifier],
      ['name', (r) => r.name],
      ['trunk', (r) => r.trunk || ''],
      ['pool', (r) => r.pool_sid || ''],
      ['status', (r) => r.status],
      ['id', (r) => r.id],
      ['created', (r) => when(r.created_at)],
    ],
  },
  communications: {
    title: 'Communications',
    path: '/v1/communication',
    filters: [
      {name: 'communication_status', options: ['', 'new', 'queued', 'dialing', 'in_progress', 'completed', 'failed', 'canceled', 'interrupted']},
      {name: 'direction', options: ['', 'outbound', 'inbound']},
      {name: 'agent_sid', placeholder: 'agt_…'},
      {name: 'created_from', type: 'datetime-local'},
      {name: 'created_to', type: 'datetime-local'},
    ],
    columns: [
      ['id', (r) => h('a', {href: `#/communication/${encodeURIComponent(r.id)}`}, r.id)],
      ['status', (r) => r.communication_status],
      ['call', (r) => r.call_status || ''],
      ['direction', (r) => r.direction],
      ['recipient', (r) => r.recipient],
      ['scenario', (r, n) => [scenarioName(n, r.scenario_sid), r.version ? ` v${r.version}` : r.draft_version ? ` draft ${r.draft_version}` : '']],
      ['agent', (r) => r.agent_sid || ''],
      ['goals', (r) => (r.goals || []).join(', ')],
      ['test', (r) => (r.is_test ? 'test' : '')],
      ['created', (r) => when(r.created_at)],
    ],
  },
  audio: {
    title: 'Audio files',
    path: '/v1/audio',
    filters: [],
    columns: [
      ['file', (r) => r.original_filename || r.filename],
      ['id (use it in a brick)', (r) => h('code', {}, r.id)],
      ['type', (r) => r.content_type],
      ['size', (r) => `${Math.round((r.size_bytes || 0) / 1024)} KiB`],
      ['created', (r) => when(r.created_at)],
    ],
  },
  results: {
    title: 'Result deliveries',
    path: '/v1/communication-result',
    filters: [{name: 'status', options: ['', 'new', 'delivering', 'delivered', 'failed']}],
    columns: [
      ['id', (r) => r.id],
      ['communication', (r) => h('a', {href: `#/communication/${encodeURIComponent(r.communication_sid)}`}, r.communication_sid)],
      ['agent', (r) => r.agent_sid],
      ['url', (r) => r.url],
      ['status', (r) => r.status],
      ['attempts', (r) => r.attempts],
      ['last', (r) => [r.last_status_code ?? '', r.last_error ? ` ${r.last_error}` : '']],
      ['created', (r) => when(r.created_at)],
    ],
  },
};

/** A datetime-local value as RFC 3339 (the API's time format). */
function toRfc3339(v) {
  const d = new Date(v);
  return isNaN(d.getTime()) ? v : d.toISOString();
}

/**
 * The creation form of a list page (agents, numbers, audio files), or null; `done()` loads
 * the list again.
 * @param {string} which @param {Names} names @param {() => void} done
 */
function createForm(which, names, done) {
  if (which === 'agents') {
    const scenario = h('select', {name: 'scenario_sid', id: 'new-agent-scenario', required: true},
      h('option', {value: ''}, '— scenario —'),
      [...names.scenarios.values()].map((s) => h('option', {value: s.id, disabled: !s.latest_version},
        `${s.name}${s.latest_version ? ` (v${s.latest_version})` : ' (not published)'}`)));
    const number = h('select', {name: 'number_sid', id: 'new-agent-number', required: true},
      h('option', {value: ''}, '— number —'),
      [...names.numbers.values()].map((n) => h('option', {value: n.id}, [n.identifier, n.name].filter(Boolean).join(' · '))));
    const recording = h('input', {type: 'checkbox', name: 'call_recording', id: 'new-agent-recording'});
    const submit = h('button', {type: 'submit', id: 'create-agent'}, 'Create agent');
    const form = h('form', {class: 'inline-form', id: 'create-agent-form'},
      h('label', {}, h('span', {}, 'scenario (published)'), scenario), h('label', {}, h('span', {}, 'calls from'), number),
      h('label', {class: 'check'}, recording, h('span', {}, 'record calls')), submit);
    form.addEventListener('submit', action(submit, 'create agent', async () => {
      const a = await post('/v1/agent', {gateway_type: 'number', number_sid: number.value, scenario_sid: scenario.value,
        call_recording: recording.checked});
      showNote(`Agent ${a.id} created.`);
      done();
    }));
    return h('section', {class: 'card'}, h('h2', {}, 'New agent'), form);
  }
  if (which === 'numbers') {
    const identifier = h('input', {name: 'identifier', id: 'new-number-identifier', placeholder: '+4930…', required: true});
    const name = h('input', {name: 'name', id: 'new-number-name', placeholder: 'name'});
    const trunk = h('input', {name: 'trunk', id: 'new-number-trunk', placeholder: 'trunk (empty: the default)'});
    const submit = h('button', {type: 'submit', id: 'create-number'}, 'Create number');
    const form = h('form', {class: 'inline-form', id: 'create-number-form'}, identifier, name, trunk, submit);
    form.addEventListener('submit', action(submit, 'create number', async () => {
      const body = {identifier: identifier.value.trim()};
      if (name.value) body.name = name.value;
      if (trunk.value) body.trunk = trunk.value;
      const n = await post('/v1/number', body);
      showNote(`Number ${n.identifier} created.`);
      done();
    }));
    return h('section', {class: 'card'}, h('h2', {}, 'New number'), form);
  }
  if (which === 'audio') {
    const file = h('input', {type: 'file', name: 'file', id: 'new-audio-file', accept: 'audio/*', required: true});
    const submit = h('button', {type: 'submit', id: 'upload-audio'}, 'Upload');
    const form = h('form', {class: 'inline-form', id: 'upload-audio-form'}, file, submit);
    form.addEventListener('submit', action(submit, 'upload audio', async () => {
      const chosen = file.files && file.files[0];
      if (!chosen) throw new Error('choose a file first');
      const data = new FormData();
      data.append('file', chosen, chosen.name);
      const a = await (await request('POST', '/v1/audio', {form: data})).json();
      showNote(`Uploaded ${a.original_filename || a.filename} as ${a.id}: put that id in a Play file brick.`);
      done();
    }));
    return h('section', {class: 'card'}, h('h2', {}, 'Upload an audio file'), form);
  }
  return null;
}

export async function renderList(main, which) {
  const spec = LISTS[which];
  const state = {offset: 0};
  let names = await loadNames();
  const form = h('form', {class: 'filters', 'data-list': which});
  const inputs = {};
  for (const f of spec.filters) {
    const input = f.options
      ? h('select', {name: f.name}, f.options.map((o) => h('option', {value: o}, o || 'any')))
      : h('input', {name: f.name, type: f.type || 'text', placeholder: f.placeholder || ''});
    inputs[f.name] = {input, f};
    form.append(h('label', {}, h('span', {}, f.label || f.name.replace(/_/g, ' ')), input));
  }
  form.append(h('button', {type: 'submit'}, 'Filter'));
  const table = h('table', {class: 'list', id: `list-${which}`});
  const pager = h('div', {class: 'pager'});
  const creation = h('div');
  const drawCreation = () => {
    const c = createForm(which, names, async () => {
      names = await loadNames();
      drawCreation();
      load();
    });
    clear(creation).append(c || '');
  };
  drawCreation();
  main.append(h('h1', {}, spec.title), creation, form, table, pager);

  async function load() {
    const params = {limit: PAGE, offset: state.offset};
    for (const [name, {input, f}] of Object.entries(inputs)) {
      params[name] = f.type === 'datetime-local' && input.value ? toRfc3339(input.value) : input.value;
    }
    try {
      const page = await get(spec.path + query(params));
      clear(table);
      table.append(h('thead', {}, h('tr', {}, spec.columns.map(([name]) => h('th', {}, name)))));
      const body = h('tbody');
      for (const row of page.items || []) {
        body.append(h('tr', {'data-id': row.id || ''}, spec.columns.map(([, cell]) => h('td', {}, cell(row, names)))));
      }
      if (!(page.items || []).length) body.append(h('tr', {}, h('td', {colspan: spec.columns.length, class: 'empty'}, 'nothing here')));
      table.append(body);
      clear(pager);
      const total = page.total ?? 0;
      const from = total ? state.offset + 1 : 0;
      const to = Math.min(state.offset + PAGE, total);
      pager.append(
        h('button', {type: 'button', disabled: state.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - PAGE); load(); }}, '‹ previous'),
        h('span', {}, ` ${from}–${to} of ${total} `),
        h('button', {type: 'button', disabled: to >= total, onclick: () => { state.offset += PAGE; load(); }}, 'next ›'),
      );
    } catch (e) {
      showError(e, spec.title);
    }
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.offset = 0;
    load();
  });
  load();
}
