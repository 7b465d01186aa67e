// The list pages (agents, numbers, communications, result deliveries): a filter form over
// the list endpoint's query parameters, a table, and paging by limit/offset.

import {get, query} from './api.js';
import {h, clear, when, text, showError} from './dom.js';

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
      ['scenario', (r) => h('a', {href: `#/scenario/${encodeURIComponent(r.scenario_sid)}`}, r.scenario_sid)],
      ['gateway', (r) => `${r.gateway_type} ${r.number_sid || r.number_pool_sid || ''}`],
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
      ['scenario', (r) => `${r.scenario_sid} ${r.version ? `v${r.version}` : r.draft_version ? `draft ${r.draft_version}` : ''}`],
      ['goals', (r) => (r.goals || []).join(', ')],
      ['test', (r) => (r.is_test ? 'test' : '')],
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
  return isNaN(d) ? v : d.toISOString();
}

export function renderList(main, which) {
  const spec = LISTS[which];
  const state = {offset: 0};
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
  main.append(h('h1', {}, spec.title), form, table, pager);

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
        body.append(h('tr', {}, spec.columns.map(([, cell]) => h('td', {}, cell(row)))));
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
