// Edits of a scenario snapshot `{name, constructor: {bricks: {<kind>: {v1: [brick]}}}}` for
// the builder: find, add, rename, remove and connect bricks. Pure functions over the JSON
// value (no DOM), shared by the builder, the graph and `node --test`.

import {KINDS, isObj, newBrick, outputTypes} from './bricks.js';

/**
 * A brick as the graph sees it.
 * @typedef {{id: string, kind: string, outputs: {type: string, next: string}[], properties: any}} BrickView
 */

/**
 * The bricks of a snapshot (or of its constructor) as [{id, kind, outputs, properties}],
 * skipping whatever is not shaped like a brick (validation reports those).
 * @param {any} snapshot
 * @returns {BrickView[]}
 */
export function bricksOf(snapshot) {
  const constructor = isObj(snapshot) && isObj(snapshot.constructor) && 'bricks' in snapshot.constructor
    ? snapshot.constructor : snapshot;
  const groups = isObj(constructor) && isObj(constructor.bricks) ? constructor.bricks : {};
  /** @type {BrickView[]} */
  const out = [];
  for (const [kind, grp] of Object.entries(groups)) {
    const list = isObj(grp) && Array.isArray(grp.v1) ? grp.v1 : [];
    for (const b of list) {
      if (!isObj(b)) continue;
      const outputs = Array.isArray(b.outputs) ? b.outputs.filter(isObj).map((o) => ({
        type: typeof o.type === 'string' ? o.type : '?',
        next: typeof o.next === 'string' ? o.next : '',
      })) : [];
      out.push({id: typeof b.id === 'string' ? b.id : '', kind, outputs, properties: b.properties});
    }
  }
  return out;
}

/**
 * The `bricks` object of a snapshot, made when missing (the builder edits snapshots whose
 * shape validation accepts; a malformed one is left to the JSON view).
 * @param {any} snapshot
 * @returns {Record<string, any>}
 */
function bricksObject(snapshot) {
  // `constructor` is the snapshot's own key; a plain object inherits a function of that name.
  if (!Object.prototype.hasOwnProperty.call(snapshot, 'constructor') || !isObj(snapshot.constructor)) snapshot.constructor = {};
  if (!isObj(snapshot.constructor.bricks)) snapshot.constructor.bricks = {};
  return snapshot.constructor.bricks;
}

/**
 * The kind groups of a snapshot (`constructor.bricks`), or null when it has none.
 * @param {any} snapshot
 * @returns {Record<string, any> | null}
 */
function groupsOf(snapshot) {
  if (!isObj(snapshot) || !Object.prototype.hasOwnProperty.call(snapshot, 'constructor')) return null;
  /** @type {any} */
  const c = snapshot.constructor;
  return isObj(c) && isObj(c.bricks) ? c.bricks : null;
}

/**
 * Where brick `id` is: {kind, index, brick}, or null.
 * @param {any} snapshot @param {string} id
 * @returns {{kind: string, index: number, brick: Record<string, any>} | null}
 */
export function findBrick(snapshot, id) {
  const groups = groupsOf(snapshot);
  if (!groups) return null;
  for (const [kind, grp] of Object.entries(groups)) {
    const list = isObj(grp) && Array.isArray(grp.v1) ? grp.v1 : [];
    const index = list.findIndex((b) => isObj(b) && b.id === id);
    if (index >= 0) return {kind, index, brick: list[index]};
  }
  return null;
}

/** Every brick id of the snapshot. @param {any} snapshot */
export function brickIds(snapshot) {
  return new Set(bricksOf(snapshot).map((b) => b.id).filter(Boolean));
}

/** The first id of the form base, base_2, base_3 … that no brick has. @param {any} snapshot @param {string} base */
export function uniqueId(snapshot, base) {
  const taken = brickIds(snapshot);
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** The id a new brick of `kind` gets by default. */
const ID_BASE = /** @type {Record<string, string>} */ ({
  start_call: 'start', outbound_call: 'outbound', inbound_call: 'inbound', start_tree: 'tree', audio_tts: 'say', audio: 'prompts',
  audio_file: 'play', question: 'ask', goal: 'goal', condition_group: 'check', assignment: 'set', increment: 'count',
  data_mapping: 'map', webhook: 'webhook', sms: 'sms', call_transfer: 'transfer', end_call: 'hang_up', end: 'end',
});

/**
 * Adds a new brick of `kind` (defaults of bricks.js) and returns its id.
 * @param {any} snapshot @param {string} kind @param {string} [id]
 */
export function addBrick(snapshot, kind, id) {
  if (!KINDS[kind]) throw new Error(`unknown brick kind ${kind}`);
  const brickId = id || uniqueId(snapshot, ID_BASE[kind] || kind);
  const bricks = bricksObject(snapshot);
  if (!isObj(bricks[kind])) bricks[kind] = {};
  if (!Array.isArray(bricks[kind].v1)) bricks[kind].v1 = [];
  bricks[kind].v1.push(newBrick(kind, brickId));
  return brickId;
}

/** Calls `f(output)` for every output object of every brick. @param {any} snapshot @param {(o: Record<string, any>) => void} f */
function eachOutput(snapshot, f) {
  const groups = groupsOf(snapshot);
  if (!groups) return;
  for (const grp of Object.values(groups)) {
    for (const b of isObj(grp) && Array.isArray(grp.v1) ? grp.v1 : []) {
      if (isObj(b) && Array.isArray(b.outputs)) for (const o of b.outputs) if (isObj(o)) f(o);
    }
  }
}

/**
 * Removes brick `id`; outputs that led to it are left unconnected (`next` "").
 * @param {any} snapshot @param {string} id
 */
export function removeBrick(snapshot, id) {
  const at = findBrick(snapshot, id);
  if (!at) return false;
  const grp = snapshot.constructor.bricks[at.kind];
  grp.v1.splice(at.index, 1);
  if (!grp.v1.length) delete snapshot.constructor.bricks[at.kind];
  eachOutput(snapshot, (o) => {
    if (o.next === id) o.next = '';
  });
  return true;
}

/**
 * Renames brick `from` to `to`, and every output that led to it. Throws when `to` is
 * empty or taken.
 * @param {any} snapshot @param {string} from @param {string} to
 */
export function renameBrick(snapshot, from, to) {
  if (from === to) return;
  if (!to) throw new Error('a brick needs an id');
  if (brickIds(snapshot).has(to)) throw new Error(`there is already a brick ${to}`);
  const at = findBrick(snapshot, from);
  if (!at) throw new Error(`no brick ${from}`);
  at.brick.id = to;
  eachOutput(snapshot, (o) => {
    if (o.next === from) o.next = to;
  });
}

/**
 * Connects the output `type` of brick `id` to `next` ("" leaves it unconnected): the
 * brick's output of that type is updated, or added.
 * @param {any} snapshot @param {string} id @param {string} type @param {string} next
 */
export function connect(snapshot, id, type, next) {
  const at = findBrick(snapshot, id);
  if (!at) throw new Error(`no brick ${id}`);
  if (!Array.isArray(at.brick.outputs)) at.brick.outputs = [];
  const o = at.brick.outputs.find((/** @type {any} */ x) => isObj(x) && x.type === type);
  if (o) o.next = next;
  else at.brick.outputs.push({type, description: '', next});
}

/**
 * Removes the output `type` of brick `id` (an output its kind does not take).
 * @param {any} snapshot @param {string} id @param {string} type
 */
export function removeOutput(snapshot, id, type) {
  const at = findBrick(snapshot, id);
  if (!at || !Array.isArray(at.brick.outputs)) return;
  at.brick.outputs = at.brick.outputs.filter((/** @type {any} */ x) => !(isObj(x) && x.type === type));
}

/**
 * Renames the output type `from` of brick `id` to `to` (an answer or condition renamed):
 * the branch keeps its target. Nothing happens when `to` is already an output.
 * @param {any} snapshot @param {string} id @param {string} from @param {string} to
 */
export function renameOutputType(snapshot, id, from, to) {
  const at = findBrick(snapshot, id);
  if (!at || !Array.isArray(at.brick.outputs) || from === to) return;
  const outs = at.brick.outputs.filter(isObj);
  const o = outs.find((x) => x.type === from);
  if (!o) return;
  if (!to) {
    if (!o.next) at.brick.outputs = at.brick.outputs.filter((/** @type {any} */ x) => x !== o);
    return;
  }
  if (outs.some((x) => x.type === to)) return;
  o.type = to;
}

/**
 * The first output type of brick `id` its kind takes that leads nowhere yet (what a brick
 * added "after" it is connected to), or null.
 * @param {any} snapshot @param {string} id
 */
export function firstOpenOutput(snapshot, id) {
  const at = findBrick(snapshot, id);
  if (!at) return null;
  const outs = Array.isArray(at.brick.outputs) ? at.brick.outputs.filter(isObj) : [];
  for (const t of outputTypes(at.kind, at.brick.properties)) {
    const o = outs.find((x) => x.type === t);
    // The catch-all of a branching brick is not offered while it has other outputs.
    if (t === 'next' && outputTypes(at.kind, at.brick.properties).length > 1) continue;
    if (!o || !o.next) return t;
  }
  return null;
}

/** Variables every call has (bricks.md, "Templating"): not asked for as test variables. */
const BUILT_IN = /^(call|time|webhook)\./;

/**
 * The names of the `{{placeholders}}` the snapshot's strings use, except the built-ins,
 * in order of appearance: the variables a test call may want to set.
 * @param {any} snapshot
 * @returns {string[]}
 */
export function placeholders(snapshot) {
  /** @type {Set<string>} */
  const names = new Set();
  const re = /\{\{\s*([\p{L}\p{N}_.-]+)\s*\}\}/gu;
  /** @param {any} v */
  const walk = (v) => {
    if (typeof v === 'string') {
      for (const m of v.matchAll(re)) if (m[1] && !BUILT_IN.test(m[1])) names.add(m[1]);
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (isObj(v)) Object.values(v).forEach(walk);
  };
  walk(snapshot);
  return [...names];
}
