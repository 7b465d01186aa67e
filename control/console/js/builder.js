// The visual builder's panels: the palette of every brick kind, and the form of the
// selected brick, generated from the brick model (bricks.js) with the SCN entries of its
// fields beside them and its outputs connected to other bricks.

import {h, clear} from './dom.js';
import {GROUPS, KINDS, getPath, isObj, outputTypes, setPath, spokenText} from './bricks.js';
import {addBrick, bricksOf, connect, findBrick, removeOutput, renameOutputType} from './model.js';

/**
 * The palette: one button per brick kind, grouped; `onAdd(kind)` adds one.
 * @param {(kind: string) => void} onAdd
 */
export function palette(onAdd) {
  const box = h('div', {class: 'palette', id: 'palette', role: 'toolbar', 'aria-label': 'brick palette'});
  for (const [grp, label] of GROUPS) {
    const kinds = Object.entries(KINDS).filter(([, k]) => k.group === grp);
    box.append(h('div', {class: 'palette-group'}, h('span', {class: 'palette-label'}, label),
      kinds.map(([kind, k]) => h('button', {type: 'button', class: ['brick-btn', `kind-${kind}`], 'data-kind': kind, id: `palette-${kind}`,
        title: `${kind}: ${k.help}`, onclick: () => onAdd(kind)}, k.label))));
  }
  return box;
}

/** @param {any} e an SCN entry */
const entryText = (e) => `${e.code} ${e.message}`;

/**
 * Whether the SCN entry's `property` path lies at or below `path`.
 * @param {string} property @param {string} path
 */
export function pathCovers(property, path) {
  return property === path || property.startsWith(`${path}.`) || property.startsWith(`${path}[`);
}

/**
 * @typedef {object} FormContext
 * @property {any} doc the snapshot being edited (mutated in place)
 * @property {string} id the brick's id
 * @property {() => void} changed a value changed: sync the JSON view, the graph and the checks
 * @property {(select?: string | null) => void} restructured bricks or outputs changed: draw the form again too
 * @property {(id: string, type: string) => void} connectOnGraph the next brick clicked on the graph is the target
 * @property {(from: string, to: string) => void} rename
 * @property {(id: string) => void} remove
 */

/**
 * The form of one brick. Returns the element and `showErrors(entries, warnings)`, which puts
 * each SCN error and warning of the brick beside the field (or output) it names.
 * @param {FormContext} ctx
 */
export function brickForm(ctx) {
  const at = findBrick(ctx.doc, ctx.id);
  if (!at) return {el: h('p', {class: 'hint'}, `No brick ${ctx.id}.`), showErrors: () => {}};
  const {kind, brick} = at;
  const k = KINDS[kind];
  if (!isObj(brick.properties)) brick.properties = {};
  const props = brick.properties;
  const form = h('div', {class: 'brick-form', id: 'brick-form', 'data-brick': ctx.id, 'data-kind': kind});

  const idInput = h('input', {id: 'brick-id', value: ctx.id, spellcheck: false, 'aria-label': 'brick id'});
  idInput.addEventListener('change', () => ctx.rename(ctx.id, idInput.value.trim()));
  const del = h('button', {type: 'button', class: 'danger', id: 'delete-brick'}, 'Delete brick');
  del.addEventListener('click', () => ctx.remove(ctx.id));
  const general = h('ul', {class: 'form-errors', id: 'brick-form-errors'});
  form.append(h('div', {class: 'form-head'}, h('label', {}, h('span', {}, 'id'), idInput), h('span', {class: ['kind-tag', `kind-${kind}`]}, kind), del),
    h('p', {class: 'hint'}, k ? k.help : 'A brick kind this console does not know: edit it in the JSON view.'), general);
  const description = h('input', {'data-path': 'description', value: typeof brick.description === 'string' ? brick.description : '', placeholder: 'what this brick is for'});
  description.addEventListener('input', () => {
    brick.description = description.value;
    ctx.changed();
  });
  form.append(h('label', {class: 'field'}, h('span', {}, 'description'), description));

  const outputsBox = h('div', {class: 'outputs', id: 'brick-outputs'});
  const drawOutputs = () => renderOutputs(outputsBox, ctx, kind, brick);
  if (k) {
    const basic = h('div', {class: 'fields'});
    const advanced = h('div', {class: 'fields'});
    for (const f of k.fields) (f.advanced ? advanced : basic).append(fieldEl(f, props, 'properties', ctx, drawOutputs));
    form.append(basic);
    if (advanced.childNodes.length) form.append(h('details', {class: 'advanced'}, h('summary', {}, 'More settings'), advanced));
    const known = new Set(k.fields.map((f) => f.key.split('.')[0]));
    const other = Object.keys(props).filter((p) => !known.has(p));
    if (other.length) form.append(h('p', {class: 'hint'}, `Also set (edit in the JSON view): ${other.join(', ')}.`));
  }
  drawOutputs();
  form.append(h('h3', {}, 'Outputs'), outputsBox);

  /**
   * Puts each SCN entry beside the field or output it names (else at the top of the form);
   * warnings go the same places, amber and prefixed `warning:`.
   * @param {any[]} entries @param {any[]} [warnings]
   */
  const showErrors = (entries, warnings = []) => {
    for (const el of form.querySelectorAll('[data-error-for]')) {
      clear(el);
      el.closest('.field, .output-row')?.classList.remove('has-error', 'has-warning');
    }
    clear(general);
    const slots = [...form.querySelectorAll('[data-error-for]')];
    /** @param {any} e @param {boolean} warn */
    const place = (e, warn) => {
      let slot = null;
      if (e.output_type) slot = form.querySelector(`[data-error-for="output:${CSS.escape(e.output_type)}"]`);
      if (!slot && e.property) {
        // The most specific field the entry's path lies in.
        let best = -1;
        for (const el of slots) {
          const p = el.getAttribute('data-error-for') || '';
          if (!p.startsWith('output:') && pathCovers(e.property, p) && p.length > best) {
            best = p.length;
            slot = el;
          }
        }
      }
      const cls = warn ? 'scn warn' : 'scn';
      const text = warn ? `warning: ${entryText(e)}` : entryText(e);
      if (slot) {
        slot.append(h('div', {class: cls}, text));
        const row = slot.closest('.field, .output-row');
        if (row && !(warn && row.classList.contains('has-error'))) {
          row.classList.remove('has-warning');
          row.classList.add(warn ? 'has-warning' : 'has-error');
        }
      } else general.append(h('li', {class: cls}, text));
    };
    for (const e of entries || []) place(e, false);
    for (const e of warnings || []) place(e, true);
  };
  return {el: form, showErrors};
}

/**
 * One field of the form (recursively for groups and lists). `base` is the object the
 * field's dotted `key` is relative to, `path` its place in the brick as SCN entries name it.
 * @param {import('./bricks.js').Field} f
 * @param {Record<string, any>} base
 * @param {string} path
 * @param {FormContext} ctx
 * @param {() => void} outputsChanged
 * @returns {HTMLElement}
 */
function fieldEl(f, base, path, ctx, outputsChanged) {
  const full = `${path}.${f.key}`;
  const err = h('div', {class: 'field-error', 'data-error-for': full});
  const value = getPath(base, f.key);
  if (f.type === 'object') {
    const box = h('fieldset', {class: 'group', 'data-path': full}, h('legend', {}, f.label),
      (f.fields || []).map((sub) => fieldEl({...sub, key: `${f.key}.${sub.key}`}, base, path, ctx, outputsChanged)), err);
    return f.advanced ? h('details', {class: 'group-fold'}, h('summary', {}, f.label), box) : box;
  }
  if (f.type === 'list') {
    const items = h('div', {class: 'list-items'});
    const box = h('fieldset', {class: 'group list', 'data-path': full}, h('legend', {}, f.label), items, err);
    const draw = () => {
      clear(items);
      const arr = getPath(base, f.key);
      const list = Array.isArray(arr) ? arr : [];
      list.forEach((item, i) => {
        if (!isObj(item)) {
          items.append(h('div', {class: 'hint'}, `item ${i + 1} is not an object: edit it in the JSON view`));
          return;
        }
        const remove = h('button', {type: 'button', class: 'link remove-item', 'data-remove': `${full}[${i}]`}, 'remove');
        remove.addEventListener('click', () => {
          const branch = branchId(item);
          list.splice(i, 1);
          if (branch) renameOutputType(ctx.doc, ctx.id, branch, '');
          draw();
          outputsChanged();
          ctx.changed();
        });
        items.append(h('div', {class: 'list-item', 'data-item': `${full}[${i}]`},
          (f.fields || []).map((sub) => fieldEl(sub, item, `${full}[${i}]`, ctx, outputsChanged)), remove));
      });
      if (!list.length) items.append(h('div', {class: 'hint'}, 'none yet'));
    };
    const add = h('button', {type: 'button', class: 'add-item', 'data-add': full}, `+ add`);
    add.addEventListener('click', () => {
      let arr = getPath(base, f.key);
      if (!Array.isArray(arr)) {
        arr = [];
        setPath(base, f.key, arr);
      }
      arr.push(f.item ? f.item() : {});
      draw();
      outputsChanged();
      ctx.changed();
      /** @type {HTMLElement | null} */
      const first = items.querySelector('.list-item:last-of-type input, .list-item:last-of-type textarea');
      if (first) first.focus();
    });
    box.append(add);
    draw();
    return f.advanced ? h('details', {class: 'group-fold'}, h('summary', {}, f.label), box) : box;
  }
  /** @type {HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement} */
  let input;
  const attrs = {'data-path': full, name: full, 'aria-label': f.label};
  if (f.type === 'textarea') {
    input = h('textarea', {...attrs, rows: 3}, typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value));
  } else if (f.type === 'bool') {
    input = h('input', {...attrs, type: 'checkbox', checked: value === true});
  } else if (f.type === 'select') {
    const options = [...(f.options || [])];
    if (typeof value === 'string' && !options.includes(value)) options.push(value);
    input = h('select', attrs, options.map((o) => h('option', {value: o}, o === '' ? '(default)' : o)));
    input.value = typeof value === 'string' ? value : options.includes('') ? '' : '';
  } else if (f.type === 'words') {
    input = h('input', {...attrs, value: Array.isArray(value) ? value.join(', ') : typeof value === 'string' ? value : '', placeholder: 'one, two, three'});
  } else {
    input = h('input', {...attrs, type: f.type === 'number' ? 'number' : 'text', step: 'any',
      value: value === undefined || value === null ? '' : typeof value === 'string' || typeof value === 'number' ? String(value) : JSON.stringify(value)});
  }
  // A branch id (an answer's or a condition's) names an output: renaming it renames the output.
  const branch = f.key === 'answer_id' || f.key === 'condition_id';
  let previous = typeof value === 'string' ? value : '';
  const write = () => {
    /** @type {any} */
    let v;
    if (input instanceof HTMLInputElement && input.type === 'checkbox') v = input.checked;
    else if (f.type === 'number') v = input.value === '' ? undefined : Number(input.value);
    else if (f.type === 'words') v = input.value.split(',').map((t) => t.trim()).filter(Boolean);
    else v = input.value;
    setPath(base, f.key, v);
    if (branch) {
      renameOutputType(ctx.doc, ctx.id, previous, v);
      previous = v;
      outputsChanged();
    }
    ctx.changed();
  };
  input.addEventListener(f.type === 'bool' || f.type === 'select' ? 'change' : 'input', write);
  const label = h('span', {}, f.label);
  const hint = f.hint ? h('small', {class: 'hint'}, f.hint) : null;
  return f.type === 'bool'
    ? h('label', {class: 'field check'}, input, label, err)
    : h('label', {class: ['field', f.type === 'textarea' && 'wide']}, label, input, hint, err);
}

/** The output type an answer or condition item names ('' for other items). @param {any} item */
function branchId(item) {
  return typeof item.answer_id === 'string' ? item.answer_id : typeof item.condition_id === 'string' ? item.condition_id : '';
}

/**
 * The outputs of a brick: one row per type its kind takes (and any other it has), each
 * with the brick it leads to, a new brick of any kind, or a pick on the graph.
 * @param {HTMLElement} box @param {FormContext} ctx @param {string} kind @param {Record<string, any>} brick
 */
function renderOutputs(box, ctx, kind, brick) {
  clear(box);
  const allowed = outputTypes(kind, brick.properties);
  const outs = Array.isArray(brick.outputs) ? brick.outputs.filter(isObj) : [];
  const types = [...new Set([...allowed, ...outs.map((o) => String(o.type))])];
  if (!types.length) {
    box.append(h('p', {class: 'hint'}, 'This brick ends the call: it has no outputs.'));
    return;
  }
  const others = bricksOf(ctx.doc).filter((b) => b.id && b.id !== ctx.id);
  const branching = allowed.length > 1;
  for (const t of types) {
    const o = outs.find((x) => x.type === t);
    const next = o && typeof o.next === 'string' ? o.next : '';
    const sel = h('select', {'data-output-select': t, 'aria-label': `output ${t} leads to`},
      h('option', {value: ''}, t === 'next' && branching ? '— not connected (the other outputs decide) —' : '— not connected: ends the call —'),
      others.map((b) => {
        const said = spokenText(b.kind, b.properties);
        return h('option', {value: b.id}, `${b.id} · ${b.kind}${said ? ` · ${said.slice(0, 40)}` : ''}`);
      }),
      h('optgroup', {label: 'a new brick'}, Object.entries(KINDS).map(([nk, k]) => h('option', {value: `new:${nk}`}, `new ${k.label} (${nk})`))));
    if (next && !others.some((b) => b.id === next)) sel.append(h('option', {value: next}, `${next} (missing)`));
    sel.value = next;
    sel.addEventListener('change', () => {
      if (sel.value.startsWith('new:')) {
        const id = addBrick(ctx.doc, sel.value.slice(4));
        connect(ctx.doc, ctx.id, t, id);
        ctx.restructured(id);
        return;
      }
      connect(ctx.doc, ctx.id, t, sel.value);
      ctx.restructured(ctx.id);
    });
    const pick = h('button', {type: 'button', class: 'link', 'data-output-pick': t, title: 'then click the brick it leads to on the graph'}, 'pick on graph');
    pick.addEventListener('click', () => ctx.connectOnGraph(ctx.id, t));
    const row = h('div', {class: 'output-row', 'data-output': t},
      h('span', {class: 'output-type'}, t, t === 'next' && branching ? h('small', {class: 'hint'}, ' catch-all') : null), '→', sel, pick,
      h('div', {class: 'field-error', 'data-error-for': `output:${t}`}));
    if (!allowed.includes(t)) {
      const rm = h('button', {type: 'button', class: 'link', 'data-output-remove': t}, 'remove');
      rm.addEventListener('click', () => {
        removeOutput(ctx.doc, ctx.id, t);
        ctx.restructured(ctx.id);
      });
      row.append(h('small', {class: 'hint'}, ` ${kind} takes no ${t} output `), rm);
    }
    box.append(row);
  }
}
