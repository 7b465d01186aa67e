// Snapshot edits of the builder (control/console/js/model.js): what the palette, the forms
// and the JSON view do to the draft.
import test from 'node:test';
import assert from 'node:assert/strict';
import {setPath} from '../../control/console/js/bricks.js';
import {addBrick, bricksOf, connect, findBrick, firstOpenOutput, placeholders, removeBrick, renameBrick, renameOutputType,
  uniqueId} from '../../control/console/js/model.js';

/** Builds a two-question bot the way the builder does: palette, forms, outputs. */
function twoQuestions() {
  const doc = {name: 'two questions', constructor: {bricks: {}}};
  const start = addBrick(doc, 'start_call');
  const ask1 = addBrick(doc, 'question');
  connect(doc, start, firstOpenOutput(doc, start), ask1);
  const q1 = findBrick(doc, ask1).brick;
  setPath(q1.properties, 'statement.audio.tts.text', 'Hello {{first_name}}, is this a good time?');
  q1.properties.answer.answers.push({answer_id: 'yes', speech_input: {tokens: ['yes'], mode: 'contains'}});
  const ask2 = addBrick(doc, 'question');
  connect(doc, ask1, firstOpenOutput(doc, ask1), ask2);
  const bye = addBrick(doc, 'end');
  for (const t of ['invalid', 'empty']) connect(doc, ask1, t, bye);
  return {doc, start, ask1, ask2, bye};
}

test('the palette gives unique ids and the first open output connects the next brick', () => {
  const {doc, start, ask1, ask2, bye} = twoQuestions();
  assert.deepEqual([start, ask1, ask2, bye], ['start', 'ask', 'ask_2', 'end']);
  assert.equal(uniqueId(doc, 'ask'), 'ask_3');
  const q1 = bricksOf(doc).find((b) => b.id === 'ask');
  // The answer's output comes first: it is what a newcomer connects.
  assert.deepEqual(q1.outputs, [{type: 'invalid', next: 'end'}, {type: 'empty', next: 'end'}, {type: 'yes', next: 'ask_2'}]);
  assert.equal(bricksOf(doc).find((b) => b.id === 'start').outputs[0].next, 'ask');
  assert.equal(firstOpenOutput(doc, 'ask'), null, 'every branch of the first question leads somewhere');
  assert.equal(firstOpenOutput(doc, 'ask_2'), 'invalid');
  assert.equal(firstOpenOutput(doc, 'end'), null);
});

test('the JSON view and the builder hold the same snapshot', () => {
  const {doc} = twoQuestions();
  const text = JSON.stringify(doc, null, 2);
  const back = JSON.parse(text);
  assert.deepEqual(back, doc);
  assert.deepEqual(bricksOf(back), bricksOf(doc));
  // An edit of the text is an edit of the bricks the graph draws.
  const edited = JSON.parse(text.replace('"next": "ask_2"', '"next": "end"'));
  assert.equal(bricksOf(edited).find((b) => b.id === 'ask').outputs.find((o) => o.type === 'yes').next, 'end');
  // A snapshot that is not shaped like one yields no bricks, not an exception.
  assert.deepEqual(bricksOf({constructor: {bricks: {question: {v1: 'x'}}}}), []);
  assert.deepEqual(bricksOf(null), []);
});

test('renaming a brick renames the outputs that lead to it', () => {
  const {doc} = twoQuestions();
  renameBrick(doc, 'ask_2', 'ask_day');
  assert.ok(findBrick(doc, 'ask_day'));
  assert.equal(bricksOf(doc).find((b) => b.id === 'ask').outputs.find((o) => o.type === 'yes').next, 'ask_day');
  assert.throws(() => renameBrick(doc, 'ask_day', 'ask'), /already a brick ask/);
  assert.throws(() => renameBrick(doc, 'ask_day', ''), /needs an id/);
});

test('deleting a brick leaves the outputs that led to it unconnected', () => {
  const {doc} = twoQuestions();
  assert.ok(removeBrick(doc, 'end'));
  assert.equal(findBrick(doc, 'end'), null);
  assert.equal(doc.constructor.bricks.end, undefined, 'an empty kind group goes too');
  assert.deepEqual(bricksOf(doc).find((b) => b.id === 'ask').outputs.filter((o) => o.next === '').map((o) => o.type), ['invalid', 'empty']);
  assert.equal(removeBrick(doc, 'nothing'), false);
});

test('renaming an answer renames its output and keeps the target', () => {
  const {doc} = twoQuestions();
  renameOutputType(doc, 'ask', 'yes', 'sure');
  assert.deepEqual(bricksOf(doc).find((b) => b.id === 'ask').outputs.find((o) => o.type === 'sure'), {type: 'sure', next: 'ask_2'});
  // A name another output has already is left alone (validation reports the duplicate answer).
  renameOutputType(doc, 'ask', 'sure', 'invalid');
  assert.ok(bricksOf(doc).find((b) => b.id === 'ask').outputs.some((o) => o.type === 'sure'));
  // An answer cleared: its unconnected output goes, a connected one stays.
  connect(doc, 'ask', 'maybe', '');
  renameOutputType(doc, 'ask', 'maybe', '');
  assert.ok(!bricksOf(doc).find((b) => b.id === 'ask').outputs.some((o) => o.type === 'maybe'));
});

test('placeholders are the variables a test call may set, built-ins left out', () => {
  const {doc} = twoQuestions();
  setPath(findBrick(doc, 'ask_2').brick.properties, 'statement.audio.tts.text', 'At {{ time.hour }}, {{first_name}} and {{ order-id }}; {{call.recipient}}');
  assert.deepEqual(placeholders(doc), ['first_name', 'order-id']);
  assert.deepEqual(placeholders({}), []);
});
