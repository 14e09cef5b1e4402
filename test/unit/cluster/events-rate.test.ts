/**
 * The Event recorder's rate limit, proven on an injected clock (ManualClock for the
 * token bucket, node:test's mock timers for the recorder's waits, moved together): the
 * writes it hands to the dispatcher, counted per window of clock time.
 */
import { mock, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { createEventRecorder } from '../../../src/cluster/events.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import type { Dispatcher } from '../../../src/dispatch/types.ts';

const pod = (i: number) => ({ namespace: 'team-a', name: `p-${i}`, uid: `uid-${i}` });
const held = { type: 'Normal' as const, reason: 'GateHeld', action: 'Hold', note: 'waiting' };
const released = { type: 'Normal' as const, reason: 'GateReleased', action: 'Release', note: 'ok' };

/** A dispatcher that writes at once and notes the clock time of every write it is given. */
function timedDispatcher(clock: ManualClock) {
  const at: number[] = [];
  const dispatcher: Dispatcher = {
    enqueue() {
      at.push(clock.now());
      return {
        accepted: true,
        coalesced: false,
        done: Promise.resolve({ result: 'succeeded', resourceVersion: '1' }),
      };
    },
    whenNotFull: () => Promise.resolve(),
    cancel: () => undefined,
    depth: 0,
    close: () => Promise.resolve(),
  };
  return { dispatcher, at };
}

/** Moves the clock and the timers together, letting the recorder run after each step. */
async function advance(clock: ManualClock, ms: number, stepMs = 10): Promise<void> {
  for (let done = 0; done < ms; done += stepMs) {
    clock.advance(stepMs);
    mock.timers.tick(stepMs);
    for (let i = 0; i < 5; i++) await turn();
  }
}

const settle = async () => {
  for (let i = 0; i < 5; i++) await turn();
};

/** The most writes that fall in any window of `windowMs` of clock time. */
function mostPerWindow(at: readonly number[], windowMs: number): number {
  return Math.max(
    ...at.map((start) => at.filter((t) => t >= start && t < start + windowMs).length),
  );
}

/** A recorder on a ManualClock at 0 with mocked timers (reset after the test). */
function pacedRecorder(t: TestContext, rate: { ratePerSecond: number; burst: number }) {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  const clock = new ManualClock(0);
  const { dispatcher, at } = timedDispatcher(clock);
  return { clock, at, recorder: createEventRecorder(dispatcher, { ...rate, clock }) };
}

test('Event writes at 10/s with a burst of 2: 2 at once, then one per 100 ms of clock time, never more than 12 in a second', async (t) => {
  const { clock, at, recorder } = pacedRecorder(t, { ratePerSecond: 10, burst: 2 });

  // A held pod re-evaluated 4 times and 11 releases: the first repeat bumps the series at
  // once (the burst's second token), the next two merge into one more bump; 11 creates.
  recorder.record(pod(0), held);
  await settle();
  for (let n = 0; n < 3; n++) recorder.record(pod(0), held);
  for (let i = 1; i < 12; i++) recorder.record(pod(i), released);
  await settle();
  assert.equal(at.length, 2, 'the burst goes at once, the rest waits for clock time');

  await advance(clock, 2_000);
  assert.equal(at.length, 14, 'every Event is written in the end');
  // The k-th write (from 0) needs k - 1 tokens beyond the burst of 2: (k - 1) x 100 ms.
  at.forEach((ms, k) => assert.ok(ms >= Math.max(0, k - 1) * 100, `write ${k} at ${ms} ms`));
  assert.ok(mostPerWindow(at, 1_000) <= 2 + 10, `${mostPerWindow(at, 1_000)} in one second`);
  // ... and paced, not stalled: the last write as soon as its token is there.
  assert.ok((at.at(-1) ?? 0) <= 1_200 + 20, `the last write waited until ${at.at(-1)} ms`);
  await recorder.close();
});

test('without clock time passing only the burst is written, however long real time runs', async (t) => {
  const { clock, at, recorder } = pacedRecorder(t, { ratePerSecond: 5, burst: 3 });
  for (let i = 0; i < 10; i++) recorder.record(pod(i), released);
  for (let i = 0; i < 20; i++) {
    mock.timers.tick(1_000); // the timers fire, the clock stands still: no new tokens
    await settle();
  }
  assert.equal(at.length, 3);
  await advance(clock, 200);
  assert.equal(at.length, 4, 'one more token after 200 ms of clock time at 5/s');
  await advance(clock, 2_000);
  await recorder.close();
  assert.equal(at.length, 10);
});
