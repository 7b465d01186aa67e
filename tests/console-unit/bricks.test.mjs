// The brick model of the console's builder (control/console/js/bricks.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import {GROUPS, KINDS, getPath, keyFacts, newBrick, outputTypes, setPath, spokenText} from '../../control/console/js/bricks.js';

test('every kind is in a palette group and has outputs, fields and defaults', () => {
  const groups = new Set(GROUPS.map(([g]) => g));
  assert.equal(Object.keys(KINDS).length, 18);
  for (const [kind, k] of Object.entries(KINDS)) {
    assert.ok(groups.has(k.group), `${kind} is in a palette group`);
    assert.ok(k.label && k.help, `${kind} has a label and help`);
    assert.ok(Array.isArray(k.outputs) && Array.isArray(k.fields), kind);
    const b = newBrick(kind, 'x');
    assert.equal(b.id, 'x');
    assert.deepEqual(b.properties, k.props(), `${kind}: defaults are fresh objects`);
    assert.notEqual(b.properties, k.props(), `${kind}: each brick gets its own properties`);
    for (const o of b.outputs) assert.ok(k.outputs.includes(o.type), `${kind}: ${o.type} is an output it takes`);
  }
});

test('a new brick gets an open output per branch, or its one next', () => {
  assert.deepEqual(newBrick('audio_tts', 'a').outputs.map((o) => o.type), ['next']);
  assert.deepEqual(newBrick('question', 'q').outputs.map((o) => o.type), ['invalid', 'empty']);
  assert.deepEqual(newBrick('end', 'e').outputs, []);
  assert.throws(() => newBrick('nope', 'n'), /unknown brick kind/);
});

test('answers and conditions add their output types before the fixed ones', () => {
  const q = {answer: {answers: [{answer_id: 'yes'}, {answer_id: 'no'}, {answer_id: ''}, 'junk']}};
  assert.deepEqual(outputTypes('question', q), ['yes', 'no', 'next', 'invalid', 'empty']);
  const c = {condition: {conditions: [{condition_id: 'morning'}]}};
  assert.deepEqual(outputTypes('condition_group', c), ['morning', 'next', 'else']);
  assert.deepEqual(outputTypes('question', null), ['next', 'invalid', 'empty']);
  assert.deepEqual(outputTypes('unknown_kind', {}), []);
});

test('dotted paths read and write nested properties', () => {
  const o = {};
  setPath(o, 'statement.audio.tts.text', 'Hi');
  assert.deepEqual(o, {statement: {audio: {tts: {text: 'Hi'}}}});
  assert.equal(getPath(o, 'statement.audio.tts.text'), 'Hi');
  assert.equal(getPath(o, 'statement.nothing.here'), undefined);
  setPath(o, 'statement.audio', undefined);
  assert.deepEqual(o, {statement: {}});
  const bad = {a: 'text'};
  setPath(bad, 'a.b', 1);
  assert.deepEqual(bad, {a: {b: 1}});
});

test('nodes show what a brick says and its key facts', () => {
  assert.equal(spokenText('question', {statement: {audio: {mode: 'tts', tts: {text: 'Hello {{first_name}}?'}}}}), 'Hello {{first_name}}?');
  assert.equal(spokenText('audio', {audios: [{mode: 'tts', tts_properties: {text: 'One'}}, {mode: 'tts', tts_properties: {text: 'Two'}}]}), 'One');
  assert.equal(spokenText('audio_file', {url: 'aud_1'}), '♪ aud_1');
  assert.equal(spokenText('goal', {goal: 'x'}), '');
  assert.equal(keyFacts('goal', {goal: 'won'}), 'goal: won');
  assert.equal(keyFacts('question', {answer: {answers: [{answer_id: 'yes'}, {answer_id: 'no'}]}}), 'yes · no');
  assert.equal(keyFacts('webhook', {request: {method: 'POST', url: 'https://x'}}), 'POST https://x');
});
