// Scenarios: the list with creation from a template, and the scenario page: the visual
// builder (palette, graph, brick form) and the draft's JSON in an editor with line numbers,
// validation with the SCN errors and warnings beside the bricks they name, publishing,
// versions side by side, and browser test calls.

import {get, post, put, query} from './api.js';
import {h, clear, when, showError, showNote, hideBanner, action} from './dom.js';
import {drawGraph} from './graph.js';
import {addBrick, bricksOf, connect, findBrick, firstOpenOutput, placeholders, removeBrick, renameBrick} from './model.js';
import {brickForm, palette} from './builder.js';
import {startCall} from './call.js';
import {TEMPLATES} from './templates.js';

export function renderScenarioList(main, go) {
  const name = h('input', {id: 'new-scenario-name', name: 'name', placeholder: 'name', required: true});
  const template = h('select', {id: 'new-scenario-template', name: 'template'},
    Object.entries(TEMPLATES).map(([k, [label]]) => h('option', {value: k}, label)));
  const create = h('button', {type: 'submit', id: 'create-scenario'}, 'Create');
  const form = h('form', {class: 'inline-form', id: 'create-scenario-form'}, name, template, create);
  form.addEventListener('submit', action(create, 'create scenario', async () => {
    const [, build] = TEMPLATES[template.value];
    const sc = await post('/v1/scenario', {name: name.value, constructor: build()});
    go(`#/scenario/${encodeURIComponent(sc.id)}`);
  }));
  const filter = h('input', {name: 'filter_query', placeholder: 'name contains', id: 'scenario-filter'});
  const table = h('table', {class: 'list', id: 'scenario-list'});
  const filterForm = h('form', {class: 'filters'}, h('label', {}, h('span', {}, 'name'), filter), h('button', {type: 'submit'}, 'Filter'));
  main.append(h('h1', {}, 'Scenarios'), h('section', {class: 'card'}, h('h2', {}, 'New scenario'), form), filterForm, table);
  async function load() {
    try {
      const page = await get(`/v1/scenario${query({filter_query: filter.value, limit: 200, order_by: 'created_at', order: 'desc'})}`);
      clear(table).append(h('thead', {}, h('tr', {}, ['name', 'id', 'published', 'updated'].map((c) => h('th', {}, c)))));
      const body = h('tbody');
      for (const sc of page.items) {
        body.append(h('tr', {'data-scenario': sc.id},
          h('td', {}, h('a', {href: `#/scenario/${encodeURIComponent(sc.id)}`}, sc.name)),
          h('td', {}, h('code', {}, sc.id)),
          h('td', {}, sc.latest_version ? `v${sc.latest_version}` : 'draft only'),
          h('td', {}, when(sc.updated_at))));
      }
      if (!page.items.length) body.append(h('tr', {}, h('td', {colspan: 4, class: 'empty'}, 'no scenarios yet')));
      table.append(body);
    } catch (e) {
      showError(e, 'scenarios');
    }
  }
  filterForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    load();
  });
  load();
}

/** The 1-based line of `"id": "<id>"` in the editor text (0 when absent). */
function brickLine(text, id) {
  const re = new RegExp(`"id"\\s*:\\s*${JSON.stringify(id).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`);
  const m = re.exec(text);
  return m ? text.slice(0, m.index).split('\n').length : 0;
}

/** SCN entries grouped by the brick they name ('' for scenario-level ones). */
function byBrick(errors) {
  const m = new Map();
  for (const e of errors || []) {
    const k = e.node_id || '';
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(e);
  }
  return m;
}

function errorText(e) {
  const where = [e.property && `at ${e.property}`, e.output_type && `output ${e.output_type}`,
    e.invalid_value && `value ${e.invalid_value}`].filter(Boolean).join(', ');
  return `${e.code} ${e.message}${where ? ` (${where})` : ''}`;
}

/** A longest-common-subsequence line diff: [[kind, left, right]], kind '=', '-', '+'. */
function diffLines(a, b) {
  if (a.length * b.length > 4e6) {
    return Array.from({length: Math.max(a.length, b.length)}, (_, i) => [a[i] === b[i] ? '=' : '~', a[i], b[i]]);
  }
  const n = a.length;
  const m = b.length;
  const L = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) out.push(['=', a[i++], b[j++]]);
    else if (j < m && (i === n || L[i][j + 1] >= L[i + 1][j])) out.push(['+', undefined, b[j++]]);
    else out.push(['-', a[i++], undefined]);
  }
  return out;
}

const versionLabel = (v) => (v.version ? `version ${v.version}` : v.draft_version ? `frozen draft ${v.draft_version}` : 'working draft');

export async function renderScenario(main, id) {
  const sc = await get(`/v1/scenario/${encodeURIComponent(id)}`);
  const draft = await get(`/v1/scenario-version/by-scenario${query({scenario_sid: id, version: 0, draft: true})}`);
  let errors = new Map();
  // SCN warnings (e.g. SCN127 a variable no brick sets): shown like errors, styled apart.
  let warnings = new Map();
  let graph = null;
  let call = null;
  // The snapshot being edited: the builder changes it in place and writes the JSON view;
  // an edit of the JSON view that parses replaces it.
  let doc = draft.snapshot;
  let selected = null;
  let form = null;
  let connecting = null;

  const title = h('h1', {id: 'scenario-title'}, sc.name);
  const facts = h('p', {class: 'facts'});
  const showFacts = () => {
    clear(facts).append(h('code', {}, sc.id), ' · ', sc.latest_version ? `newest published version ${sc.latest_version}` : 'not published yet',
      ' · updated ', when(sc.updated_at));
  };
  showFacts();

  // The JSON view: a textarea with a gutter of line numbers and error marks.
  const textarea = h('textarea', {id: 'draft-json', spellcheck: false, wrap: 'off', 'aria-label': 'draft JSON'});
  textarea.value = JSON.stringify(doc, null, 2);
  const gutter = h('pre', {class: 'gutter', 'aria-hidden': 'true'});
  const editor = h('div', {class: 'editor'}, gutter, textarea);
  const renderGutter = () => {
    const lines = textarea.value.split('\n').length;
    const marks = new Map();
    // A line with an error is marked as one; a line with warnings only, as a warning.
    for (const [cls, map, prefix] of [['gutter-warning', warnings, 'warning: '], ['gutter-error', errors, '']]) {
      for (const [brick, entries] of map) {
        const line = brick ? brickLine(textarea.value, brick) : 0;
        if (line) marks.set(line, [cls, [...(marks.get(line) || [null, []])[1], ...entries.map((e) => prefix + errorText(e))]]);
      }
    }
    clear(gutter);
    for (let i = 1; i <= lines; i++) {
      const [cls, texts] = marks.get(i) || [];
      gutter.append(texts ? h('span', {class: cls, title: texts.join('\n')}, `⚠${i}`) : `${i}`, '\n');
    }
    gutter.scrollTop = textarea.scrollTop;
  };
  textarea.addEventListener('scroll', () => { gutter.scrollTop = textarea.scrollTop; });

  const graphBox = h('div', {class: 'graph-box', id: 'graph'});
  const connectHint = h('div', {class: 'connect-hint', id: 'connect-hint', hidden: true});
  const formBox = h('div', {class: 'form-box', id: 'form-box'});
  const brickTable = h('table', {class: 'list bricks-table', id: 'bricks'});
  const general = h('ul', {class: 'scenario-errors', id: 'scenario-errors'});
  const verdict = h('div', {class: 'verdict', id: 'verdict'});
  const checkState = h('span', {class: 'check-state', id: 'check-state'});

  const parsed = () => {
    try {
      return JSON.parse(textarea.value);
    } catch (e) {
      return null;
    }
  };
  const renderBricks = (snapshot) => {
    const bricks = bricksOf(snapshot);
    clear(brickTable).append(h('thead', {}, h('tr', {}, ['brick', 'kind', 'outputs', 'problems'].map((c) => h('th', {}, c)))));
    const body = h('tbody');
    const known = new Set();
    for (const b of bricks) {
      known.add(b.id);
      const errs = errors.get(b.id) || [];
      const warns = warnings.get(b.id) || [];
      body.append(h('tr', {'data-brick-row': b.id, class: errs.length ? 'has-error' : warns.length ? 'has-warning' : ''},
        h('td', {}, h('a', {href: '#', class: 'brick-link', onclick: (ev) => { ev.preventDefault(); selectBrick(b.id); }}, b.id || '(no id)')),
        h('td', {}, b.kind),
        h('td', {}, b.outputs.map((o) => `${o.type} → ${o.next || '(end)'}`).join(', ')),
        h('td', {class: 'brick-errors', 'data-brick-error': b.id}, errs.map((e) => h('div', {class: 'scn'}, errorText(e))),
          warns.map((e) => h('div', {class: 'scn warn', 'data-brick-warning': b.id}, `warning: ${errorText(e)}`)))));
    }
    brickTable.append(body);
    clear(general);
    for (const [brick, errs] of errors) {
      if (brick && known.has(brick)) continue;
      for (const e of errs) general.append(h('li', {class: 'scn'}, (brick ? `${brick}: ` : '') + errorText(e)));
    }
    for (const [brick, warns] of warnings) {
      if (brick && known.has(brick)) continue;
      for (const e of warns) general.append(h('li', {class: 'scn warn'}, `warning: ${brick ? `${brick}: ` : ''}${errorText(e)}`));
    }
  };
  /** Draws what depends on `doc` and the SCN errors and warnings: the graph, the bricks, the form's marks. */
  const drawAll = () => {
    graph = drawGraph(graphBox, doc, errors, {selected, onPort: startConnect, warnings});
    renderBricks(doc);
    if (form) form.showErrors(errors.get(selected) || [], warnings.get(selected) || []);
  };
  /** The form of the selected brick (or what to do when none is). */
  const renderForm = () => {
    clear(formBox);
    form = null;
    if (!selected || !findBrick(doc, selected)) {
      selected = null;
      formBox.append(h('p', {class: 'hint', id: 'form-empty'}, 'Click a brick on the graph to edit it, or add one from the palette: ',
        'a new brick is connected to the first open output of the brick selected before.'));
      return;
    }
    form = brickForm({doc, id: selected, changed, restructured, connectOnGraph: startConnect,
      rename: (from, to) => {
        try {
          renameBrick(doc, from, to);
        } catch (e) {
          showError(e, 'rename');
          renderForm();
          return;
        }
        restructured(to);
      },
      remove: (bid) => {
        removeBrick(doc, bid);
        showNote(`Brick ${bid} deleted; outputs that led to it are no longer connected.`);
        restructured(null);
      }});
    formBox.append(form.el);
    form.showErrors(errors.get(selected) || [], warnings.get(selected) || []);
  };
  // From the JSON view: the text replaces the snapshot when it parses.
  const redraw = () => {
    renderGutter();
    const snap = parsed();
    if (snap === null) {
      verdict.className = 'verdict bad';
      verdict.textContent = 'The text is not valid JSON.';
      return;
    }
    doc = snap;
    drawAll();
    renderForm();
  };
  // From the builder: the JSON view follows, the graph is drawn again, the draft checked.
  const writeText = () => {
    textarea.value = JSON.stringify(doc, null, 2);
    renderGutter();
  };
  const changed = () => {
    writeText();
    drawAll();
    scheduleCheck();
  };
  const restructured = (sel) => {
    if (sel !== undefined) selected = sel;
    changed();
    renderForm();
  };
  const jumpTo = (brick) => {
    const line = brickLine(textarea.value, brick);
    if (!line) return;
    const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
    textarea.scrollTop = Math.max(0, (line - 5) * lineHeight);
  };
  const selectBrick = (bid) => {
    selected = bid;
    if (graph) graph.select(bid);
    renderForm();
    jumpTo(bid);
  };
  function startConnect(from, type) {
    connecting = {from, type};
    graphBox.classList.add('connecting');
    connectHint.hidden = false;
    clear(connectHint).append(`Click the brick the ${type} output of ${from} leads to `,
      h('button', {type: 'button', class: 'link', id: 'connect-cancel', onclick: stopConnect}, 'cancel'));
  }
  function stopConnect() {
    connecting = null;
    graphBox.classList.remove('connecting');
    connectHint.hidden = true;
  }
  graphBox.addEventListener('click', (ev) => {
    const node = ev.target.closest && ev.target.closest('.node');
    if (!node) return;
    if (connecting) {
      const {from, type} = connecting;
      stopConnect();
      connect(doc, from, type, node.dataset.brick);
      restructured(from);
      return;
    }
    selectBrick(node.dataset.brick);
  });
  const onKey = (ev) => {
    if (ev.key === 'Escape' && connecting) stopConnect();
  };
  document.addEventListener('keydown', onKey);
  let pending = null;
  textarea.addEventListener('input', () => {
    clearTimeout(pending);
    pending = setTimeout(redraw, 300);
  });

  /** Shows a validation's errors and warnings (a refused publish or call carries errors only). */
  const setErrors = (list, warningList = []) => {
    errors = byBrick(list);
    warnings = byBrick(warningList);
    const n = (list || []).length;
    const w = (warningList || []).length;
    verdict.className = n ? 'verdict bad' : w ? 'verdict good has-warnings' : 'verdict good';
    verdict.textContent = (n ? `${n} validation problem${n > 1 ? 's' : ''}` : 'The draft is valid.') +
      (w ? ` ${w} warning${w > 1 ? 's' : ''}.` : '');
    renderGutter();
    drawAll();
  };

  /** Saves the editor's text as the working draft. */
  const save = async () => {
    let body;
    try {
      body = JSON.parse(textarea.value);
    } catch (e) {
      throw new Error(`the draft is not valid JSON: ${e.message}`);
    }
    return put(`/v1/scenario/${encodeURIComponent(id)}/draft`, body);
  };

  // Checking as one builds: each change of the builder saves the draft and validates it
  // (after a pause in the typing), so the SCN entries stay beside the fields.
  const autoCheck = h('input', {type: 'checkbox', id: 'auto-check', checked: true});
  let checkTimer = null;
  let checkRun = 0;
  function scheduleCheck() {
    clearTimeout(checkTimer);
    if (!autoCheck.checked) {
      checkState.textContent = 'not saved';
      return;
    }
    checkState.textContent = 'editing…';
    checkTimer = setTimeout(async () => {
      const run = ++checkRun;
      checkState.textContent = 'saving and checking…';
      try {
        await save();
        const report = await post(`/v1/scenario/${encodeURIComponent(id)}/validate`);
        if (run !== checkRun) return;
        setErrors(report.errors, report.warnings);
        checkState.textContent = 'saved and checked';
      } catch (e) {
        checkState.textContent = 'not saved';
        showError(e, 'check');
      }
    }, 700);
  }

  const addFromPalette = (kind) => {
    stopConnect();
    const after = selected && findBrick(doc, selected) ? selected : null;
    const bid = addBrick(doc, kind);
    const open = after ? firstOpenOutput(doc, after) : null;
    if (after && open) {
      connect(doc, after, open, bid);
      showNote(`Added ${bid}, connected from ${after} (${open}).`);
    } else showNote(`Added ${bid}.`);
    restructured(bid);
  };

  const saveBtn = h('button', {type: 'button', id: 'save-draft'}, 'Save draft');
  const validateBtn = h('button', {type: 'button', id: 'validate'}, 'Validate');
  const publishBtn = h('button', {type: 'button', id: 'publish', class: 'primary'}, 'Publish');
  const callDraftBtn = h('button', {type: 'button', id: 'call-draft'}, 'Call draft');
  const callVersionBtn = h('button', {type: 'button', id: 'call-version'});
  const hangUpBtn = h('button', {type: 'button', id: 'hang-up', class: 'danger', hidden: true}, 'Hang up');
  // Which entry brick the call starts at: start_call/outbound_call, or inbound_call.
  const direction = h('select', {id: 'call-direction', 'aria-label': 'call direction', title: 'the call starts at the outbound or the inbound entry brick'},
    h('option', {value: 'outbound'}, 'as outbound'), h('option', {value: 'inbound'}, 'as inbound'));
  const showCallVersion = () => {
    callVersionBtn.textContent = sc.latest_version ? `Call version ${sc.latest_version}` : 'Call version (none published)';
    callVersionBtn.disabled = !sc.latest_version;
  };
  showCallVersion();

  saveBtn.addEventListener('click', action(saveBtn, 'save draft', async () => {
    await save();
    showNote('Draft saved.');
  }));
  validateBtn.addEventListener('click', action(validateBtn, 'validate', async () => {
    await save();
    const report = await post(`/v1/scenario/${encodeURIComponent(id)}/validate`);
    hideBanner();
    setErrors(report.errors, report.warnings);
  }));
  publishBtn.addEventListener('click', action(publishBtn, 'publish', async () => {
    await save();
    try {
      const v = await post(`/v1/scenario/${encodeURIComponent(id)}/publish`);
      setErrors([]);
      showNote(`Published as version ${v.version}.`);
      Object.assign(sc, await get(`/v1/scenario/${encodeURIComponent(id)}`));
      showFacts();
      showCallVersion();
      await loadVersions();
    } catch (e) {
      const scn = e.data && e.data.errors && e.data.errors.scenario;
      if (scn) setErrors(scn);
      throw e;
    }
  }));

  // Test variables (the `data` of the browser call, filled into {{placeholders}}) and
  // whether the call is recorded; kept per scenario in this browser.
  const varsKey = `callsmith.test-vars.${id}`;
  const varRows = h('div', {class: 'var-rows', id: 'test-vars'});
  const addVar = (name = '', value = '') => {
    const n = h('input', {class: 'var-name', placeholder: 'name', value, 'aria-label': 'variable name'});
    n.value = name;
    const v = h('input', {class: 'var-value', placeholder: 'value', 'aria-label': 'variable value'});
    v.value = value;
    const row = h('div', {class: 'var-row', 'data-var': name}, n, '=', v,
      h('button', {type: 'button', class: 'link', onclick: () => { row.remove(); storeVars(); }}, 'remove'));
    for (const el of [n, v]) el.addEventListener('input', () => { row.dataset.var = n.value; storeVars(); });
    varRows.append(row);
    return row;
  };
  const testData = () => {
    const data = {};
    for (const row of varRows.querySelectorAll('.var-row')) {
      const name = row.querySelector('.var-name').value.trim();
      if (name) data[name] = row.querySelector('.var-value').value;
    }
    return data;
  };
  const storeVars = () => {
    try {
      localStorage.setItem(varsKey, JSON.stringify(testData()));
    } catch {
      // storage may be off; the variables still go with the call
    }
  };
  /** Rows for the placeholders the draft uses that have none yet. */
  const suggestVars = () => {
    const have = new Set(Object.keys(testData()));
    for (const name of placeholders(doc)) if (!have.has(name)) addVar(name, '');
  };
  try {
    for (const [k, v] of Object.entries(JSON.parse(localStorage.getItem(varsKey) || '{}'))) addVar(k, String(v));
  } catch {
    // nothing stored
  }
  const record = h('input', {type: 'checkbox', id: 'call-record'});
  const callOptions = h('details', {class: 'call-options', id: 'call-options'},
    h('summary', {}, 'Test variables and recording'),
    h('p', {class: 'hint'}, 'Browser calls start with these variables, as a dispatch\'s data: {{name}} in a prompt speaks its value.'),
    varRows,
    h('div', {class: 'toolbar'},
      h('button', {type: 'button', id: 'add-test-var', onclick: () => addVar().querySelector('input').focus()}, '+ variable'),
      h('button', {type: 'button', id: 'suggest-test-vars', title: 'a row for each {{placeholder}} of the draft', onclick: suggestVars}, 'Variables the draft uses'),
      h('label', {class: 'check'}, record, h('span', {}, 'record the call (replay it on the communication page)'))));

  const live = h('div', {class: 'live', id: 'live'});
  const liveSection = h('section', {class: 'card', id: 'live-section', hidden: true}, h('h2', {}, 'Live call'), live);
  // The graph is drawn again as the draft changes: the call highlights on the current one.
  const liveGraph = {highlight: (b) => graph && graph.highlight(b), reset: () => graph && graph.reset()};
  const placeCall = (draftCall, btn) => action(btn, 'call', async () => {
    if (call) return;
    if (draftCall) await save();
    liveSection.hidden = false;
    if (graph) graph.reset();
    callDraftBtn.disabled = callVersionBtn.disabled = true;
    const ended = () => {
      call = null;
      hangUpBtn.hidden = true;
      callDraftBtn.disabled = false;
      showCallVersion();
    };
    try {
      call = await startCall({scenarioSid: id, draft: draftCall, direction: direction.value, data: testData(), record: record.checked}, live, liveGraph, ended);
      hangUpBtn.hidden = false;
    } catch (e) {
      ended();
      // A draft that does not validate is refused with its SCN entries: show them.
      const scn = e.data && e.data.errors && e.data.errors.scenario;
      if (scn) setErrors(scn);
      throw e;
    }
  });
  callDraftBtn.addEventListener('click', placeCall(true, callDraftBtn));
  callVersionBtn.addEventListener('click', placeCall(false, callVersionBtn));
  hangUpBtn.addEventListener('click', action(hangUpBtn, 'hang up', async () => {
    if (call) await call.hangUp();
  }));

  // Versions and frozen drafts, two of them side by side.
  const versionTable = h('table', {class: 'list', id: 'versions'});
  const left = h('select', {id: 'compare-left'});
  const right = h('select', {id: 'compare-right'});
  const panes = h('div', {class: 'compare', id: 'compare'});
  let versions = [];
  const compare = () => {
    const a = versions.find((v) => v.id === left.value);
    const b = versions.find((v) => v.id === right.value);
    clear(panes);
    if (!a || !b) return;
    const rows = diffLines(JSON.stringify(a.snapshot, null, 2).split('\n'), JSON.stringify(b.snapshot, null, 2).split('\n'));
    const pa = h('pre', {class: 'pane', 'data-version': a.id});
    const pb = h('pre', {class: 'pane', 'data-version': b.id});
    for (const [k, la, lb] of rows) {
      pa.append(h('span', {class: k === '=' ? '' : la === undefined ? 'gap' : 'removed'}, la === undefined ? ' ' : la), '\n');
      pb.append(h('span', {class: k === '=' ? '' : lb === undefined ? 'gap' : 'added'}, lb === undefined ? ' ' : lb), '\n');
    }
    const changed = rows.filter(([k]) => k !== '=').length;
    panes.append(h('div', {class: 'pane-head'}, h('b', {}, versionLabel(a)), ` ${a.content_hash.slice(0, 12)}`),
      h('div', {class: 'pane-head'}, h('b', {}, versionLabel(b)), ` ${b.content_hash.slice(0, 12)} · ${changed ? `${changed} line(s) differ` : 'identical'}`),
      pa, pb);
  };
  left.addEventListener('change', compare);
  right.addEventListener('change', compare);
  async function loadVersions() {
    const page = await get(`/v1/scenario-version${query({scenario_sid: id, limit: 200})}`);
    versions = page.items;
    clear(versionTable).append(h('thead', {}, h('tr', {}, ['record', 'content hash', 'created', 'id'].map((c) => h('th', {}, c)))));
    const body = h('tbody');
    for (const v of versions) {
      body.append(h('tr', {'data-version': v.version ?? '', 'data-draft-version': v.draft_version ?? ''},
        h('td', {}, versionLabel(v)), h('td', {}, h('code', {}, v.content_hash.slice(0, 16))), h('td', {}, when(v.created_at)), h('td', {}, h('code', {}, v.id))));
    }
    versionTable.append(body);
    const has = (vid) => versions.some((v) => v.id === vid);
    // Defaults: the newest published or frozen record beside the working draft.
    const defaultLeft = (versions.find((v) => v.version || v.draft_version) || versions[0] || {}).id || '';
    const defaultRight = (versions.find((v) => v.draft_version === 0) || versions[0] || {}).id || '';
    for (const [sel, fallback] of [[left, defaultLeft], [right, defaultRight]]) {
      clear(sel).append(...versions.map((v) => h('option', {value: v.id}, versionLabel(v))));
      sel.value = has(sel.dataset.chosen) ? sel.dataset.chosen : fallback;
    }
    compare();
  }
  for (const sel of [left, right]) sel.addEventListener('change', () => { sel.dataset.chosen = sel.value; });

  main.append(title, facts,
    h('div', {class: 'toolbar'}, saveBtn, validateBtn, publishBtn, h('span', {class: 'sep'}), callDraftBtn, callVersionBtn, direction, hangUpBtn),
    callOptions,
    h('div', {class: 'verdict-line'}, verdict, h('label', {class: 'check', title: 'each change in the builder saves the draft and validates it'},
      autoCheck, h('span', {}, 'check as I build (saves the draft)')), checkState),
    h('section', {class: 'card palette-card'}, palette(addFromPalette)),
    h('div', {class: 'designer'},
      h('section', {class: 'card'}, h('h2', {}, 'Graph'), connectHint, graphBox),
      h('section', {class: 'card'}, h('h2', {}, 'Brick'), formBox)),
    liveSection,
    h('section', {class: 'card'}, h('h2', {}, 'JSON'), h('p', {class: 'hint'}, 'The draft as JSON, in step with the builder: an edit here that parses is drawn at once.'), editor),
    h('section', {class: 'card'}, h('h2', {}, 'Bricks'), general, brickTable),
    h('section', {class: 'card'}, h('h2', {}, 'Versions'), versionTable,
      h('div', {class: 'compare-pick'}, h('label', {}, 'left ', left), h('label', {}, 'right ', right)), panes));
  redraw();
  loadVersions().catch((e) => showError(e, 'versions'));
  // The validation state of what is stored, without saving anything.
  post(`/v1/scenario/${encodeURIComponent(id)}/validate`).then((r) => setErrors(r.errors, r.warnings)).catch((e) => showError(e, 'validate'));
  return () => {
    document.removeEventListener('keydown', onKey);
    clearTimeout(checkTimer);
    if (call) call.hangUp().catch(() => {});
  };
}
