/**
 * Found by test/e2e/write-path/stalled-leader.test.ts: when a leader term ends while the
 * Released-condition writer waits for room in the term's dispatcher, the wait rejects
 * with the term's reason; unhandled, that rejection ended `tollgate run` (exit with
 * "Error: loops stopping") before the term's last outcomes were recorded. The wait's end
 * must be handled: nothing more is written this term.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createReleasedConditions } from '../../../src/loops/released-condition.ts';
import type { Dispatcher } from '../../../src/dispatch/types.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aPod } from '../../builders/pod.ts';

test('a term that ends while condition writes wait for room is no unhandled rejection', async () => {
  const term = new AbortController();
  let enqueued = 0;
  const dispatcher: Dispatcher = {
    enqueue: () => {
      enqueued += 1;
      return { accepted: false, reason: 'full' };
    },
    // A term-bound dispatcher (loops/leadership.ts): the wait ends with the term.
    whenNotFull: () =>
      new Promise<void>((_, reject) =>
        term.signal.addEventListener('abort', () => reject(term.signal.reason as Error)),
      ),
    cancel: () => undefined,
    depth: 0,
    close: async () => undefined,
  };
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const conditions = createReleasedConditions({ dispatcher, clock: new ManualClock() });
    conditions.held(aPod('p', 'team-a').gated('team-a.tollgate.io/ready').obj(), 'k', 'held');
    assert.equal(enqueued, 1);
    term.abort(new Error('loops stopping'));
    await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  assert.deepEqual(unhandled.map(String), []);
});
