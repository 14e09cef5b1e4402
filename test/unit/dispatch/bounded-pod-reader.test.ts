/**
 * `tollgate run`'s live reads (boundedPodReader in src/cluster/client.ts): spent from the
 * policy's budget behind its breaker, each refusal a rejection that names its reason.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { boundedPodReader, LiveReadRefused } from '../../../src/cluster/client.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aPod } from '../../builders/pod.ts';

const liveReads = { qps: 1, burst: 2, breaker: { failureThreshold: 2, openMs: 10_000 } };

test('reads beyond the budget are refused with the budget named, and pass again once it refills', async () => {
  const clock = new ManualClock();
  let reads = 0;
  const read = boundedPodReader(
    async () => {
      reads += 1;
      return aPod('p', 'ns').obj();
    },
    () => liveReads,
    clock,
  );
  await read('ns', 'p');
  await read('ns', 'p');
  await assert.rejects(read('ns', 'p'), (error: unknown) => {
    assert.ok(error instanceof LiveReadRefused);
    assert.match(error.message, /live-read budget of 1\/s spent/);
    assert.ok(error.retryAfterMs > 0);
    return true;
  });
  assert.equal(reads, 2, 'the refused read never reached the API server');
  clock.advance(1_000);
  assert.equal((await read('ns', 'p'))?.metadata?.name, 'p');
});

test('failing reads open the breaker: later reads are refused without touching the API server', async () => {
  const clock = new ManualClock();
  let reads = 0;
  const read = boundedPodReader(
    async (): Promise<V1Pod | undefined> => {
      reads += 1;
      throw new Error('503 from the API');
    },
    () => ({ ...liveReads, qps: 100, burst: 100 }),
    clock,
  );
  await assert.rejects(read('ns', 'p'), /live read of ns\/p failed: 503/);
  await assert.rejects(read('ns', 'p'), /live read of ns\/p failed: 503/);
  await assert.rejects(read('ns', 'p'), /breaker open after 2 failures/);
  assert.equal(reads, 2);
});

test('a new policy with another budget takes effect at once', async () => {
  const clock = new ManualClock();
  let settings = { ...liveReads, qps: 1, burst: 1 };
  const read = boundedPodReader(
    async () => aPod('p', 'ns').obj(),
    () => settings,
    clock,
  );
  await read('ns', 'p');
  await assert.rejects(read('ns', 'p'), LiveReadRefused);
  settings = { ...liveReads, qps: 1, burst: 5 };
  await read('ns', 'p');
});
