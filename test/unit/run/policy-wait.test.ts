/**
 * `tollgate run` without a policy it can run (src/run/policy.ts): it waits, polling again
 * with a doubling backoff on injected timers, until the source has a policy, and stops
 * waiting on shutdown; what happened at start is announced as Events on its Lease once it
 * leads, and each refused commit once.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EventRecord } from '../../../src/cluster/events.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import type { PolicyError } from '../../../src/policy/errors.ts';
import type { PolicyState } from '../../../src/policy/source.ts';
import {
  announcePolicyState,
  backoffDelay,
  waitForPolicy,
  type PolicyFeed,
} from '../../../src/run/policy.ts';
import { aPolicy } from '../../builders/policy.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';

/** A feed that has a policy from its `goodFrom`-th refresh on (never, when undefined). */
function feedGoodFrom(goodFrom: number | undefined) {
  const policy = aPolicy().obj();
  const feed = {
    refreshes: 0,
    current: () => (goodFrom !== undefined && feed.refreshes >= goodFrom ? policy : undefined),
    refresh: async () => void (feed.refreshes += 1),
    state: (): PolicyState => ({ kind: 'none', why: 'the Git server is down' }),
  };
  return { feed, policy };
}

describe('waiting for a first policy', () => {
  const backoff = { firstMs: 1_000, maxMs: 8_000 };

  it('the backoff doubles from the first delay up to the cap', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 40].map((n) => backoffDelay(backoff, n)),
      [1_000, 2_000, 4_000, 8_000, 8_000, 8_000, 8_000],
    );
  });

  it('a source that has a policy: at once, without a refresh or a timer', async () => {
    const { feed, policy } = feedGoodFrom(0);
    const timers = new ManualTimers();
    const signal = new AbortController().signal;
    assert.equal(await waitForPolicy(feed, { signal, log: silentLogger, timers, backoff }), policy);
    assert.equal(feed.refreshes, 0);
    assert.deepEqual(timers.pending, []);
  });

  it('polls again after 1, 2, 4, 8, 8 s until the fifth refresh brings a policy, announcing once', async () => {
    const { feed, policy } = feedGoodFrom(5);
    const timers = new ManualTimers();
    const waiting: string[] = [];
    const result = waitForPolicy(feed, {
      signal: new AbortController().signal,
      log: silentLogger,
      timers,
      backoff,
      onWaiting: (why) => waiting.push(why),
    });
    const delays: number[] = [];
    for (let refreshes = 0; refreshes < 5; refreshes += 1) {
      await settle();
      delays.push(timers.pending[0]!);
      await timers.advance(timers.pending[0]!);
      assert.equal(feed.refreshes, refreshes + 1);
    }
    assert.deepEqual(delays, [1_000, 2_000, 4_000, 8_000, 8_000]);
    assert.equal(await result, policy);
    assert.deepEqual(waiting, ['the Git server is down']);
    assert.deepEqual(timers.pending, [], 'no timer left behind');
  });

  it('a shutdown while waiting ends the wait with no policy and no timer left', async () => {
    const { feed } = feedGoodFrom(undefined);
    const timers = new ManualTimers();
    const shutdown = new AbortController();
    const result = waitForPolicy(feed, {
      signal: shutdown.signal,
      log: silentLogger,
      timers,
      backoff,
    });
    await timers.advance(1_000);
    await settle();
    shutdown.abort();
    assert.equal(await result, undefined);
    assert.equal(feed.refreshes, 1);
    assert.deepEqual(timers.pending, []);
  });
});

describe("the policy's Events on tollgate's Lease", () => {
  function announcing(state: PolicyState) {
    const events: EventRecord[] = [];
    let rejected: ((commit: string, errors: readonly PolicyError[]) => void) | undefined;
    const feed: Pick<PolicyFeed, 'state' | 'onRejected'> = {
      state: () => state,
      onRejected: (listener) => void (rejected = listener),
    };
    const announced = announcePolicyState(feed, { record: (event) => events.push(event) });
    return {
      events,
      announced,
      reject: (commit: string) =>
        rejected!(commit, [{ file: 'gates/a.yaml', message: 'unknown tenant' } as PolicyError]),
    };
  }

  const started: [string, PolicyState, string[]][] = [
    [
      'from the saved copy',
      { kind: 'saved', commit: 'c'.repeat(40), why: 'Git is down' },
      [
        'StartedFromLastGoodPolicy: started from the saved last good policy, commit cccccccccccc: Git is down',
      ],
    ],
    [
      'from history',
      { kind: 'history', commit: 'd'.repeat(40), why: 'HEAD is invalid' },
      [
        'StartedFromLastGoodPolicy: started from an older commit of the policy history, commit dddddddddddd: HEAD is invalid',
      ],
    ],
    ['from the newest commit', { kind: 'fetched', commit: 'e'.repeat(40) }, []],
  ];
  for (const [what, state, expected] of started) {
    it(`a replica started ${what} says so once it leads, not before`, () => {
      const { events, announced } = announcing(state);
      announced.started();
      assert.equal(events.length, 0, 'nothing before a term');
      announced.leading();
      announced.leading();
      assert.deepEqual(
        events.map((e) => `${e.reason}: ${e.note}`),
        expected,
      );
      assert.ok(events.every((e) => e.type === 'Warning'));
    });
  }

  it('a replica that waited without a policy says why once it leads', () => {
    const { events, announced } = announcing({ kind: 'fetched', commit: 'f'.repeat(40) });
    announced.unavailable('the Git server is down');
    announced.leading();
    assert.deepEqual(
      events.map((e) => e.reason),
      ['PolicyUnavailable'],
    );
    assert.match(events[0]!.note, /stays not ready .*: the Git server is down/);
  });

  it('each refused commit is one Warning naming the commit and the first error', () => {
    const { events, reject } = announcing({ kind: 'fetched', commit: 'a'.repeat(40) });
    reject('1'.repeat(40));
    reject('1'.repeat(40));
    reject('2'.repeat(40));
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.reason}`),
      ['Warning PolicyCommitRefused', 'Warning PolicyCommitRefused'],
    );
    assert.match(
      events[0]!.note,
      /^policy commit 111111111111 is invalid: gates\/a\.yaml.*unknown tenant; the last good policy stays in force$/,
    );
  });
});
