// The graph's layout and view (control/console/js/graph.js): every brick in view.
import test from 'node:test';
import assert from 'node:assert/strict';
import {H, W, fitView, layout, wrap} from '../../control/console/js/graph.js';

const b = (id, kind, ...next) => ({id, kind, properties: {}, outputs: next.map((n, i) => ({type: `o${i}`, next: n}))});

test('layers go down from the entry; a loop does not push bricks down', () => {
  const l = layout([b('start', 'start_call', 'ask'), b('ask', 'question', 'yes', 'ask'), b('yes', 'audio_tts', 'start')]);
  assert.equal(l.pos.get('start').y < l.pos.get('ask').y, true);
  assert.equal(l.pos.get('ask').y < l.pos.get('yes').y, true);
  assert.equal(l.unreachable.size, 0);
});

test('unreachable bricks are laid out in rows inside the graph, however many', () => {
  const bricks = [b('start', 'start_call', 'a'), b('a', 'audio_tts')];
  for (let i = 0; i < 30; i++) bricks.push(b(`loose${i}`, 'goal'));
  const l = layout(bricks);
  assert.equal(l.unreachable.size, 30);
  const rows = new Map();
  for (const id of l.unreachable) {
    const p = l.pos.get(id);
    rows.set(p.y, (rows.get(p.y) || 0) + 1);
  }
  assert.ok(Math.max(...rows.values()) <= 4, 'at most four loose bricks a row when the graph is narrow');
  assert.equal(rows.size, 8);
  for (const p of l.pos.values()) {
    assert.ok(p.x >= 0 && p.x + W <= l.width, `x ${p.x} within ${l.width}`);
    assert.ok(p.y >= 0 && p.y + H <= l.height, `y ${p.y} within ${l.height}`);
  }
  // Every loose brick lies below the reachable ones.
  for (const id of l.unreachable) assert.ok(l.pos.get(id).y > l.pos.get('a').y);
});

test('a graph without an entry brick is still drawn', () => {
  const l = layout([b('x', 'goal', 'y'), b('y', 'end')]);
  assert.equal(l.pos.size, 2);
  assert.ok(l.width >= W && l.height >= H);
});

test('the fitted view shows the whole graph, never enlarged', () => {
  const v = fitView(2000, 1000, 800, 600);
  assert.equal(v.k, 0.4);
  assert.ok(v.x >= 0 && v.x + 2000 * v.k <= 800 + 1e-9);
  assert.ok(v.y >= 0 && v.y + 1000 * v.k <= 600 + 1e-9);
  assert.equal(fitView(200, 100, 800, 600).k, 1);
});

test('node text wraps into lines and ends in … when cut', () => {
  assert.deepEqual(wrap('Hello there', 32, 2), ['Hello there']);
  const lines = wrap('Would you like a call back? Please say yes or no, or press one or two on your phone.', 20, 2);
  assert.equal(lines.length, 2);
  assert.ok(lines.every((l) => l.length <= 20), JSON.stringify(lines));
  assert.ok(lines[1].endsWith('…'));
  assert.deepEqual(wrap('', 10, 2), []);
});
