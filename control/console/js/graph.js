// The scenario graph: every brick a node (id, kind, what it says or its key properties),
// every connected output an edge labelled with its type, laid out in layers by distance
// from the entry bricks; bricks no entry reaches are laid out in rows below. The view pans
// (drag the background), zooms (wheel, buttons) and fits the whole graph.

import {s, h, clear} from './dom.js';
import {ROOT_KINDS, keyFacts, outputTypes, spokenText} from './bricks.js';
import {bricksOf} from './model.js';

export {bricksOf};

export const W = 200;
export const H = 78;
const GAP_X = 40;
const GAP_Y = 74;
const PAD = 20;
/** At least this many unreachable bricks share a row. */
const LOOSE_ROW = 4;

/**
 * @typedef {import('./model.js').BrickView} BrickView
 * @typedef {{byId: Map<string, BrickView>, pos: Map<string, {x: number, y: number}>, width: number, height: number,
 *   unreachable: Set<string>}} Layout
 */

/**
 * Layers: the longest path from an entry brick, over the graph without its loops (an
 * output leading back to a brick being visited is drawn as a loop instead), so every
 * forward edge points down. Bricks no entry reaches come last, in rows as wide as the
 * widest layer (at least LOOSE_ROW), so they stay in view however many there are.
 * @param {BrickView[]} bricks
 * @returns {Layout}
 */
export function layout(bricks) {
  /** @type {Map<string, BrickView>} */
  const byId = new Map();
  for (const b of bricks) if (b.id && !byId.has(b.id)) byId.set(b.id, b);
  /** @type {string[]} */
  const roots = [];
  for (const kind of ROOT_KINDS) for (const b of byId.values()) if (b.kind === kind) roots.push(b.id);
  const nextOf = (/** @type {string} */ id) => (byId.get(id)?.outputs || []).map((o) => o.next).filter((n) => n && byId.has(n));
  // Depth-first from the roots: the order of completion, reversed, is a topological order
  // of the forward edges; an edge to a brick still on the stack closes a loop.
  /** @type {Map<string, 'open'|'done'>} */
  const state = new Map();
  /** @type {string[]} */
  const order = [];
  const loops = new Set();
  for (const root of roots) {
    if (state.has(root)) continue;
    /** @type {[string, number][]} */
    const stack = [[root, 0]];
    state.set(root, 'open');
    while (stack.length) {
      const top = /** @type {[string, number]} */ (stack[stack.length - 1]);
      const outs = nextOf(top[0]);
      if (top[1] < outs.length) {
        const next = /** @type {string} */ (outs[top[1]++]);
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
  /** @type {Map<string, number>} */
  const layer = new Map(roots.map((r) => [r, 0]));
  for (const id of order.reverse()) {
    const l = layer.get(id) ?? 0;
    for (const next of nextOf(id)) {
      if (loops.has(`${id}\u0000${next}`)) continue;
      if ((layer.get(next) ?? -1) < l + 1) layer.set(next, l + 1);
    }
  }
  /** @type {string[][]} */
  const rows = [];
  const unreachable = new Set();
  for (const b of byId.values()) {
    const l = layer.get(b.id);
    if (l === undefined) unreachable.add(b.id);
    else (rows[l] ||= []).push(b.id);
  }
  // Within a layer, bricks follow the mean place of the bricks that lead to them (one
  // sweep from the top), which keeps most edges from crossing.
  /** @type {Map<string, number>} */
  const place = new Map();
  /** @type {Map<string, string[]>} */
  const parents = new Map();
  for (const b of byId.values()) {
    for (const next of nextOf(b.id)) {
      const list = parents.get(next) || [];
      list.push(b.id);
      parents.set(next, list);
    }
  }
  for (const row of rows) {
    if (!row) continue;
    const key = new Map(row.map((id, i) => {
      const above = (parents.get(id) || []).filter((p) => place.has(p)).map((p) => /** @type {number} */ (place.get(p)));
      return [id, above.length ? above.reduce((a, b) => a + b, 0) / above.length : i];
    }));
    row.sort((a, b) => key.get(a) - key.get(b));
    row.forEach((id, i) => place.set(id, i - (row.length - 1) / 2));
  }
  const reachableRows = rows.filter(Boolean);
  const widest = Math.max(1, ...reachableRows.map((r) => r.length));
  const perLoose = Math.max(LOOSE_ROW, widest);
  const loose = [...unreachable];
  for (let i = 0; i < loose.length; i += perLoose) reachableRows.push(loose.slice(i, i + perLoose));
  const cols = Math.max(1, ...reachableRows.map((r) => r.length));
  const width = PAD * 2 + cols * W + (cols - 1) * GAP_X;
  /** @type {Map<string, {x: number, y: number}>} */
  const pos = new Map();
  reachableRows.forEach((row, l) => {
    const rowWidth = row.length * W + (row.length - 1) * GAP_X;
    const x0 = (width - rowWidth) / 2;
    row.forEach((id, i) => pos.set(id, {x: x0 + i * (W + GAP_X), y: PAD + l * (H + GAP_Y)}));
  });
  const height = PAD * 2 + reachableRows.length * H + Math.max(0, reachableRows.length - 1) * GAP_Y;
  return {byId, pos, width, height, unreachable};
}

/**
 * `text` cut into at most `lines` lines of at most `width` characters, the last one
 * ending in … when something was left out.
 * @param {string} text @param {number} width @param {number} lines
 * @returns {string[]}
 */
export function wrap(text, width, lines) {
  const words = String(text).replace(/\s+/g, ' ').trim().split(' ').filter(Boolean);
  /** @type {string[]} */
  const out = [];
  let line = '';
  let i = 0;
  for (; i < words.length; i++) {
    let w = /** @type {string} */ (words[i]);
    if (w.length > width) w = `${w.slice(0, width - 1)}…`;
    if (!line) line = w;
    else if (line.length + 1 + w.length <= width) line += ` ${w}`;
    else {
      out.push(line);
      line = w;
      if (out.length === lines) break;
    }
  }
  if (line && out.length < lines) out.push(line);
  if (i < words.length || out.length > lines) {
    out.length = Math.min(out.length, lines);
    const last = out[out.length - 1] || '';
    out[out.length - 1] = `${last.length >= width ? last.slice(0, width - 1) : last}…`;
  }
  return out;
}

/** A view: the graph translated by (x, y) and scaled by k. @typedef {{x: number, y: number, k: number, fitted: boolean}} View */

/**
 * The view that shows the whole graph of `width` × `height` in a box of `boxW` × `boxH`
 * (never enlarged beyond 1:1), centred.
 * @param {number} width @param {number} height @param {number} boxW @param {number} boxH
 * @returns {View}
 */
export function fitView(width, height, boxW, boxH) {
  const k = Math.min(1, boxW / Math.max(width, 1), boxH / Math.max(height, 1));
  return {k, x: (boxW - width * k) / 2, y: Math.max(0, (boxH - height * k) / 2), fitted: true};
}

/**
 * @typedef {object} GraphHandle
 * @property {(id: string) => void} highlight marks the running brick (the one before becomes visited)
 * @property {() => void} reset
 * @property {(id: string | null) => void} select marks the brick being edited
 * @property {() => void} fit
 */

/**
 * Draws the graph into `container`; `errors` and `opts.warnings` map a brick id to its SCN
 * errors and warnings (those nodes are marked, an error over a warning). The view (pan and
 * zoom) is kept on the container across redraws.
 * `onPort(id, type)` is called when an output port is clicked (the builder connects it).
 * @param {HTMLElement & {_view?: View}} container
 * @param {any} snapshot
 * @param {Map<string, any[]>} [errors]
 * @param {{onPort?: (id: string, type: string) => void, selected?: string | null, warnings?: Map<string, any[]>}} [opts]
 * @returns {GraphHandle}
 */
export function drawGraph(container, snapshot, errors = new Map(), opts = {}) {
  clear(container);
  const bricks = bricksOf(snapshot);
  const {byId, pos, width, height, unreachable} = layout(bricks);
  const svg = s('svg', {class: 'graph', role: 'img', 'aria-label': 'scenario graph', 'data-width': width, 'data-height': height});
  svg.append(s('defs', {}, s('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'},
    s('path', {d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead'}))));
  const viewport = s('g', {class: 'viewport'});
  const edges = s('g', {class: 'edges'});
  const nodes = s('g', {class: 'nodes'});
  if (unreachable.size) {
    const top = Math.min(...[...unreachable].map((id) => pos.get(id)?.y ?? 0));
    viewport.append(s('text', {x: PAD, y: top - 10, class: 'loose-label'}, 'not reached from an entry brick'));
  }
  for (const b of byId.values()) {
    const from = /** @type {{x: number, y: number}} */ (pos.get(b.id));
    b.outputs.forEach((o, i) => {
      const target = o.next ? pos.get(o.next) : undefined;
      if (!target) return;
      const x1 = from.x + W / 2 + (i - (b.outputs.length - 1) / 2) * 22;
      const y1 = from.y + H;
      const x2 = target.x + W / 2;
      let d;
      let lx;
      let ly;
      if (target.y > from.y) {
        const y2 = target.y;
        const my = (y1 + y2) / 2;
        d = `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2}`;
        // Labels of a brick's outputs sit at different points of their curves, so that
        // several outputs to one brick stay readable.
        const t = b.outputs.length > 1 ? 0.3 + 0.4 * (i / (b.outputs.length - 1)) : 0.5;
        const u = 1 - t;
        lx = u * u * u * x1 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t * t * t * x2;
        ly = u * u * u * y1 + 3 * u * u * t * my + 3 * u * t * t * my + t * t * t * y2;
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
    const p = /** @type {{x: number, y: number}} */ (pos.get(b.id));
    const errs = errors.get(b.id) || [];
    const said = spokenText(b.kind, b.properties);
    const facts = keyFacts(b.kind, b.properties);
    const warns = (opts.warnings && opts.warnings.get(b.id)) || [];
    const title = [`${b.kind} ${b.id}`, said, facts, ...errs.map((e) => `${e.code} ${e.message}`),
      ...warns.map((e) => `warning: ${e.code} ${e.message}`)].filter(Boolean).join('\n');
    const lines = wrap(said ? `“${said}”` : facts, 32, said ? 2 : 1);
    if (said && facts) lines.push(...wrap(facts, 32, 1));
    const node = s('g', {class: ['node', `kind-${b.kind}`, errs.length ? 'node-error' : warns.length && 'node-warning', unreachable.has(b.id) && 'node-unreachable',
      opts.selected === b.id && 'node-selected'], 'data-brick': b.id, 'data-kind': b.kind, transform: `translate(${p.x} ${p.y})`},
    s('title', {}, title),
    s('rect', {width: W, height: H, rx: 8}),
    s('text', {x: 10, y: 17, class: 'node-id'}, b.id.length > 22 ? `${b.id.slice(0, 21)}…` : b.id),
    s('text', {x: W - 10, y: 17, class: 'node-kind', 'text-anchor': 'end'}, b.kind + (errs.length ? ` ⚠ ${errs[0].code}` : warns.length ? ` ⚠ ${warns[0].code}` : '')),
    lines.slice(0, 3).map((l, i) => s('text', {x: 10, y: 35 + i * 14, class: i < 2 && said ? 'node-text' : 'node-facts'}, l)));
    // One port per output type the brick takes: filled when connected; a click starts a connection.
    const types = [...new Set([...outputTypes(b.kind, b.properties), ...b.outputs.map((o) => o.type)])];
    types.forEach((t, i) => {
      const connected = b.outputs.some((o) => o.type === t && o.next);
      const x = W / 2 + (i - (types.length - 1) / 2) * 22;
      node.append(s('circle', {class: ['port', connected && 'port-connected'], cx: x, cy: H, r: 6, 'data-port': t},
        s('title', {}, `${t}: ${connected ? `→ ${b.outputs.find((o) => o.type === t)?.next}` : 'not connected (click, then click a brick)'}`)));
    });
    nodes.append(node);
  }
  viewport.append(edges, nodes);
  svg.append(viewport);
  const zoomIn = h('button', {type: 'button', class: 'zoom', id: 'zoom-in', title: 'zoom in'}, '+');
  const zoomOut = h('button', {type: 'button', class: 'zoom', id: 'zoom-out', title: 'zoom out'}, '−');
  const fitBtn = h('button', {type: 'button', class: 'zoom', id: 'zoom-fit', title: 'show the whole graph'}, 'Fit');
  container.append(svg, h('div', {class: 'zoom-bar'}, zoomIn, zoomOut, fitBtn));

  const box = () => ({w: container.clientWidth || 600, h: container.clientHeight || 500});
  const apply = () => {
    const v = /** @type {View} */ (container._view);
    viewport.setAttribute('transform', `translate(${v.x} ${v.y}) scale(${v.k})`);
    svg.dataset.zoom = v.k.toFixed(3);
  };
  const fit = () => {
    const b = box();
    container._view = fitView(width, height, b.w, b.h);
    apply();
  };
  // A redraw keeps the view the designer chose; a fitted view is fitted again (the graph grew).
  if (!container._view || container._view.fitted) fit();
  else apply();
  /** @param {number} factor @param {number} cx @param {number} cy */
  const zoom = (factor, cx, cy) => {
    const v = /** @type {View} */ (container._view);
    const k = Math.min(3, Math.max(0.15, v.k * factor));
    container._view = {k, x: cx - (cx - v.x) * (k / v.k), y: cy - (cy - v.y) * (k / v.k), fitted: false};
    apply();
  };
  zoomIn.addEventListener('click', () => zoom(1.25, box().w / 2, box().h / 2));
  zoomOut.addEventListener('click', () => zoom(0.8, box().w / 2, box().h / 2));
  fitBtn.addEventListener('click', fit);
  svg.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    zoom(ev.deltaY < 0 ? 1.1 : 1 / 1.1, ev.clientX - r.left, ev.clientY - r.top);
  }, {passive: false});
  /** @type {{x: number, y: number, vx: number, vy: number, moved: boolean} | null} */
  let drag = null;
  svg.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0 || (ev.target instanceof Element && ev.target.closest('.node'))) return;
    const v = /** @type {View} */ (container._view);
    drag = {x: ev.clientX, y: ev.clientY, vx: v.x, vy: v.y, moved: false};
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener('pointermove', (ev) => {
    if (!drag) return;
    const v = /** @type {View} */ (container._view);
    container._view = {...v, x: drag.vx + ev.clientX - drag.x, y: drag.vy + ev.clientY - drag.y, fitted: false};
    svg.classList.add('panning');
    apply();
  });
  const endDrag = () => {
    drag = null;
    svg.classList.remove('panning');
  };
  svg.addEventListener('pointerup', endDrag);
  svg.addEventListener('pointercancel', endDrag);
  svg.addEventListener('click', (ev) => {
    const port = ev.target instanceof Element ? ev.target.closest('.port') : null;
    const node = port && port.closest('.node');
    if (port && node && opts.onPort) {
      ev.stopPropagation();
      opts.onPort(/** @type {string} */ (node.getAttribute('data-brick')), /** @type {string} */ (port.getAttribute('data-port')));
    }
  }, true);
  return {
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
    select(id) {
      for (const n of svg.querySelectorAll('.node-selected')) n.classList.remove('node-selected');
      const n = id ? svg.querySelector(`.node[data-brick="${CSS.escape(id)}"]`) : null;
      if (n) n.classList.add('node-selected');
    },
    fit,
  };
}
