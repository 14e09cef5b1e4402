/**
 * The writer's memory of the last record per decision (RecordDeduper, up to 50,000
 * decisions: a quiet pass records nothing new) must cost a small fixed number of bytes
 * per decision, not the record itself: it keeps decisions of pods long gone until its
 * capacity, about 23 MB when it kept each record's canonical JSON. Measured on the heap
 * after a forced collection.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { RecordDeduper } from '../../../src/audit/batcher.ts';
import { aDecision } from '../../builders/decision.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const retained = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

/** A Hold the budget keeps, as the gate-release loop records it for a waiting pod. */
const hold = (index: number, queuedAhead: number) =>
  aDecision('Hold', `pod-${index}`)
    .input('Budget', false, {
      pods: { used: 9, adding: 1, limit: 9 },
      exceeded: ['pods'],
      queuedAhead,
    })
    .obj();

test('the deduper keeps a small fixed number of bytes per decision, not its record', () => {
  const deduper = new RecordDeduper();
  const decisions = 20_000;
  const before = retained();
  for (let index = 0; index < decisions; index += 1) deduper.isRepeat(hold(index, index % 50));
  const perDecision = (retained() - before) / decisions;
  assert.ok(perDecision <= 200, `${perDecision.toFixed(0)} bytes kept per decision`);
  assert.equal(deduper.isRepeat(hold(7, 7)), true, 'still remembers');
});

test('a record that says the same is a repeat; one changed anywhere is not', () => {
  const deduper = new RecordDeduper();
  assert.equal(deduper.isRepeat(hold(1, 3)), false);
  assert.equal(deduper.isRepeat(hold(1, 3)), true);
  assert.equal(deduper.isRepeat(hold(1, 4)), false, 'an input changed');
  assert.equal(deduper.isRepeat(hold(1, 4)), true);
  assert.equal(deduper.isRepeat(hold(2, 4)), false, 'another decision');
});
