/**
 * Without a resize state key tollgate says so loudly (src/run/resize-key.ts): the gauge
 * at once, and at each term while ResizePolicies exist a warning and a Warning Event; a
 * configured key, or no ResizePolicies, stays quiet.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EventRecord } from '../../../src/cluster/events.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { watchResizeStateKey } from '../../../src/run/resize-key.ts';

const gauge = async (): Promise<number | undefined> =>
  (await registry.getSingleMetric('tollgate_resize_state_key_missing')?.get())?.values[0]?.value;

describe('a missing resize state key', () => {
  const cases: [string, string | undefined, number, number, string[]][] = [
    [
      'no key file, two ResizePolicies',
      undefined,
      2,
      1,
      ['ResizeStateKeyMissing', 'ResizeStateKeyMissing'],
    ],
    ['no key file, no ResizePolicy', undefined, 0, 1, []],
    ['a key file, two ResizePolicies', '/keys', 2, 0, []],
  ];
  for (const [what, keyFile, resizePolicies, missing, events] of cases) {
    it(`${what}: gauge ${missing}, ${events.length} Events over two terms`, async () => {
      const recorded: EventRecord[] = [];
      const atTerm = watchResizeStateKey(
        keyFile,
        () => resizePolicies,
        (e) => recorded.push(e),
        silentLogger,
      );
      assert.equal(await gauge(), missing);
      atTerm();
      atTerm();
      assert.deepEqual(
        recorded.map((e) => e.reason),
        events,
      );
      assert.ok(
        recorded.every((e) => e.type === 'Warning' && /tollgate-resize-state-key/.test(e.note)),
      );
    });
  }
});
