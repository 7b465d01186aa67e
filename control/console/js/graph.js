// The scenario graph: every brick a node (id and kind), every connected output an edge
// labelled with its type, laid out in layers by distance from the entry bricks.

import {s, clear} from './dom.js';

const ROOT_KINDS = ['start_call', 'outbound_call', 'inbound_call', 'start_tree'];
const W = 150;
const H = 44;
const GAP_X = 40;
const GAP_Y = 70;
const PAD = 20;

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The bricks of a snapshot (or of its constructor) as [{id, kind, outputs: [{type, next}]}],
 * skipping whatever is not shaped like a brick (validation reports those).
 */
export function bricksOf(snapshot) {
  const constructor = isObj(snapshot) && isObj(snapshot.constructor) && 'bricks' in snapshot.constructor
    ? snapshot.constructor : snapshot;
  const groups = isObj(constructor) && isObj(constructor.bricks) ? constructor.bricks : {};
  const out = [];
  for (const [kind, group] of Object.entries(groups)) {
    const list = isObj(group) && Array.isArray(group.v1) ? group.v1 : [];
    for (const b of list) {
      if (!isObj(b)) continue;
      const outputs = Array.isArray(b.outputs) ? b.outputs.filter(isObj).map((o) => ({
        type: typeof o.type === 'string' ? o.type : '?',
        next: typeof o.next === 'string' ? o.next : '',
      })) : [];
      out.push({id: typeof b.id === 'string' ? b.id : '', kind, outputs});
    }
  }
  return out;
}

/**
 * Layers: the longest path from an entry brick, over the graph without its loops (an
 * output leading back to a brick being visited is drawn as a loop instead), so every
 * forward edge points down. Bricks no entry reaches come last.
 */
export function layout(bricks) {
  const byId = new Map();
  for (const b of bricks) if (b.id && !byId.has(b.id)) byId.set(b.id, b);
  const roots = [];
  for (const kind of ROOT_KINDS) for (const b of byId.values()) if (b.kind === kind) roots.push(b.id);
  // Depth-first from the roots: the order of completion, reversed, is a topological order
  // of the forward edges; an edge to a brick still on the stack closes a loop.
  const state = new Map();
  const order = [];
  const loops = new Set();
  for (const root of roots) {
    if (state.has(root)) continue;
    const stack = [[root, 0]];
    state.set(root, 'open');
    while (stack.length) {
      const top = stack[stack.length - 1];
      const outs = byId.get(top[0]).outputs;
      if (top[1] < outs.length) {
        const next = outs[top[1]++].next;
        if (!next || !byId.has(next)) continue;
        if (state.get(next) === 'open') loops.add(`${top[0]}\u0000${next}`);
        else if (!state.has(next)) {
          state.set(next, 'open');
          stack.push([next, 0]);
        }
      } else {
        state.set(top[0], 'done');
        order.push(top[0]);
        stack.pop();
      }
    }
  }
  const layer = new Map(roots.map((r) => [r, 0]));
  for (const id of order.reverse()) {
    const l = layer.get(id) ?? 0;
    for (const o of byId.get(id).outputs) {
      if (!o.next || !byId.has(o.next) || loops.has(`${id}\u0000${o.next}`)) continue;
      if ((layer.get(o.next) ?? -1) < l + 1) layer.set(o.next, l + 1);
    }
  }
  const deepest = Math.max(-1, ...layer.values());
  const rows = [];
  const pos = new Map();
  for (const b of byId.values()) {
    const l = layer.has(b.id) ? layer.get(b.id) : deepest + 1;
    (rows[l] ||= []).push(b.id);
  }
  // Within a layer, bricks follow the mean place of the bricks that lead to them (one
  // sweep from the top), which keeps most edges from crossing.
  const place = new Map();
  const parents = new Map();
  for (const b of byId.values()) {
    for (const o of b.outputs) {
      if (o.next && byId.has(o.next)) (parents.get(o.next) || parents.set(o.next, []).get(o.next)).push(b.id);
    }
  }
  for (const row of rows) {
    if (!row) continue;
    const key = new Map(row.map((id, i) => {
      const above = (parents.get(id) || []).filter((p) => place.has(p)).map((p) => place.get(p));
      return [id, above.length ? above.reduce((a, b) => a + b, 0) / above.length : i];
    }));
    row.sort((a, b) => key.get(a) - key.get(b));
    row.forEach((id, i) => place.set(id, i - (row.length - 1) / 2));
  }
  const widest = Math.max(1, ...rows.map((r) => (r ? r.length : 0)));
  const width = PAD * 2 + widest * W + (widest - 1) * GAP_X;
  rows.forEach((row, l) => {
    if (!row) return;
    const rowWidth = row.length * W + (row.length - 1) * GAP_X;
    const x0 = (width - rowWidth) / 2;
    row.forEach((id, i) => pos.set(id, {x: x0 + i * (W + GAP_X), y: PAD + l * (H + GAP_Y)}));
  });
  const height = PAD * 2 + rows.length * H + Math.max(0, rows.length - 1) * GAP_Y;
  return {byId, pos, width, height};
}

/**
 * Draws the graph into `container` (an element); `errors` and `warnings` map a brick id to
 * its SCN entries (those nodes are marked, warnings apart). Returns {highlight(id), mark(id, cls)}.
 */
export function drawGraph(container, snapshot, errors = new Map(), warnings = new Map()) {
  clear(container);
  const bricks = bricksOf(snapshot);
  const {byId, pos, width, height} = layout(bricks);
  const svg = s('svg', {class: 'graph', viewBox: `0 0 ${width} ${Math.max(height, 60)}`, width, height: Math.max(height, 60),
    role: 'img', 'aria-label': 'scenario graph'});
  svg.append(s('defs', {}, s('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'},
    s('path', {d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead'}))));
  const edges = s('g', {class: 'edges'});
  const nodes = s('g', {class: 'nodes'});
  for (const b of byId.values()) {
    const from = pos.get(b.id);
    b.outputs.forEach((o, i) => {
      const target = o.next && pos.get(o.next);
      if (!target) return;
      const x1 = from.x + W / 2 + (i - (b.outputs.length - 1) / 2) * 18;
      const y1 = from.y + H;
      const x2 = target.x + W / 2;
      let d;
      let lx;
      let ly;
      if (target.y > from.y) {
        const y2 = target.y;
        const my = (y1 + y2) / 2;
        d = `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2}`;
        lx = (x1 + x2) / 2;
        ly = my;
      } else {
        // A loop back up (or sideways): around the right side of both nodes.
        const side = Math.max(from.x, target.x) + W + 25;
        const y2 = target.y + H / 2;
        d = `M ${from.x + W} ${from.y + H / 2} C ${side} ${from.y + H / 2}, ${side} ${y2}, ${target.x + W} ${y2}`;
        lx = side - 10;
        ly = (from.y + y2) / 2 + H / 2;
      }
      edges.append(s('g', {class: 'edge', 'data-from': b.id, 'data-to': o.next, 'data-type': o.type},
        s('path', {d, 'marker-end': 'url(#arrow)'}),
        s('text', {x: lx, y: ly, class: 'edge-label', 'text-anchor': 'middle'}, o.type)));
    });
  }
  for (const b of byId.values()) {
    const p = pos.get(b.id);
    const errs = errors.get(b.id) || [];
    const warns = warnings.get(b.id) || [];
    const entries = [...errs, ...warns];
    const title = entries.length ? entries.map((e) => `${e.code} ${e.message}`).join('\n') : `${b.kind} ${b.id}`;
    const mark = errs.length ? 'node-error' : warns.length && 'node-warning';
    nodes.append(s('g', {class: ['node', `kind-${b.kind}`, mark], 'data-brick': b.id, 'data-kind': b.kind,
      transform: `translate(${p.x} ${p.y})`},
    s('title', {}, title),
    s('rect', {width: W, height: H, rx: 8}),
    s('text', {x: W / 2, y: 18, class: 'node-id', 'text-anchor': 'middle'}, b.id.length > 20 ? `${b.id.slice(0, 19)}…` : b.id),
    s('text', {x: W / 2, y: 35, class: 'node-kind', 'text-anchor': 'middle'}, b.kind + (entries.length ? `  ⚠ ${entries[0].code}` : ''))));
  }
  svg.append(edges, nodes);
  container.append(svg);
  return {
    /** Marks `id` as the running brick (the one before becomes visited). */
    highlight(id) {
      for (const n of svg.querySelectorAll('.node-active')) {
        n.classList.remove('node-active');
        n.classList.add('node-visited');
      }
      const n = svg.querySelector(`.node[data-brick="${CSS.escape(id)}"]`);
      if (n) n.classList.add('node-active');
    },
    reset() {
      for (const n of svg.querySelectorAll('.node-active, .node-visited')) n.classList.remove('node-active', 'node-visited');
    },
  };
}
