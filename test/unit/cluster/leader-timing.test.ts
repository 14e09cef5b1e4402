import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  DEFAULT_LEADER_TIMINGS,
  decideLeaseAction,
  fenceOpen,
  leaderTimingProblems,
  nextAcquireDelay,
  validateLeaderTimings,
  type LeaseRecord,
} from '../../../src/cluster/leader-timing.ts';

const me = 'tollgate-a';
const other = 'tollgate-b';
const held = (holder: string, seconds = 15, transitions = 3): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: seconds,
  leaseTransitions: transitions,
  resourceVersion: '42',
});

describe('leader timings', () => {
  it('the client-go defaults are valid', () => {
    assert.deepEqual(leaderTimingProblems(DEFAULT_LEADER_TIMINGS), []);
  });

  const invalid: { name: string; timings: [number, number, number]; mentions: RegExp }[] = [
    {
      name: 'a lease no longer than the renew deadline is refused',
      timings: [10_000, 10_000, 2_000],
      mentions: /leaseDuration.*greater than renewDeadline/,
    },
    {
      name: 'a renew deadline within 1.2 retry periods is refused',
      timings: [15_000, 2_400, 2_000],
      mentions: /renewDeadline.*1\.2 x retryPeriod/,
    },
    {
      name: 'a lease of fractional seconds is refused',
      timings: [1_500, 1_000, 500],
      mentions: /whole seconds/,
    },
    {
      name: 'a zero retry period is refused',
      timings: [15_000, 10_000, 0],
      mentions: /retryPeriodMs must be a positive/,
    },
    {
      name: 'a negative lease is refused',
      timings: [-1, 10_000, 2_000],
      mentions: /leaseDurationMs must be a positive/,
    },
  ];
  for (const { name, timings, mentions } of invalid) {
    it(name, () => {
      const [leaseDurationMs, renewDeadlineMs, retryPeriodMs] = timings;
      assert.throws(
        () => validateLeaderTimings({ leaseDurationMs, renewDeadlineMs, retryPeriodMs }),
        mentions,
      );
    });
  }
});

describe('deciding one acquire-or-renew attempt', () => {
  const base = {
    identity: me,
    now: 100_000,
    observedAt: 90_000,
    leading: false,
    leaseDurationMs: 15_000,
  };
  const cases: {
    name: string;
    input: Partial<typeof base> & { record: LeaseRecord | undefined };
    expected: string;
  }[] = [
    { name: 'a missing lease is created', input: { record: undefined }, expected: 'create' },
    {
      name: 'our own lease is renewed while our term is open',
      input: { record: held(me), leading: true },
      expected: 'renew',
    },
    {
      name: 'our own lease after a lost term starts a new term',
      input: { record: held(me), leading: false },
      expected: 'takeover',
    },
    { name: 'a released lease is taken over', input: { record: held('') }, expected: 'takeover' },
    {
      name: "another holder's lease observed 10s ago is waited on",
      input: { record: held(other) },
      expected: 'wait',
    },
    {
      name: "another holder's lease observed exactly one duration ago is taken over",
      input: { record: held(other), observedAt: 85_000 },
      expected: 'takeover',
    },
    {
      name: 'the duration in the record wins over our own setting',
      input: { record: held(other, 5), observedAt: 95_000 },
      expected: 'takeover',
    },
  ];
  for (const { name, input, expected } of cases) {
    it(name, () => {
      assert.equal(decideLeaseAction({ ...base, ...input }).action, expected);
    });
  }

  it('a waiting candidate retries exactly when the observed lease expires, if sooner than a retry period', () => {
    const action = decideLeaseAction({ ...base, record: held(other), observedAt: 86_000 });
    assert.deepEqual(action, { action: 'wait', holder: other, expiresAt: 101_000 });
    assert.equal(nextAcquireDelay(action, 100_000, 2_000), 1_000);
    assert.equal(nextAcquireDelay(action, 95_000, 2_000), 2_000);
    assert.equal(nextAcquireDelay({ action: 'create' }, 95_000, 2_000), 2_000);
  });
});

describe('the fence', () => {
  it('closes exactly at the renew deadline after the last renewal started', () => {
    const input = { leading: true, lastRenewStartedAt: 50_000, renewDeadlineMs: 10_000 };
    assert.equal(fenceOpen({ ...input, now: 59_999 }), true);
    assert.equal(fenceOpen({ ...input, now: 60_000 }), false);
    assert.equal(fenceOpen({ ...input, leading: false, now: 50_001 }), false);
  });

  it('always closes before any other candidate may take over (property)', () => {
    // The holder starts a renewal at `sent`; the server commits it at `committed` >= sent;
    // a candidate observes the new record at `observed` >= committed. The candidate may
    // take over from observed + leaseDuration; the holder's fence must be closed by then.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 59_000 }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.nat(30_000),
        fc.nat(30_000),
        (leaseSeconds, renewDeadlineMs, retryPeriodMs, commitDelay, observeDelay) => {
          const timings = { leaseDurationMs: leaseSeconds * 1000, renewDeadlineMs, retryPeriodMs };
          fc.pre(leaderTimingProblems(timings).length === 0);
          const sent = 1_000_000;
          const observed = sent + commitDelay + observeDelay;
          const takeoverAt = observed + timings.leaseDurationMs;
          const action = decideLeaseAction({
            record: held(other, leaseSeconds),
            identity: me,
            now: takeoverAt,
            observedAt: observed,
            leading: false,
            leaseDurationMs: timings.leaseDurationMs,
          });
          assert.equal(action.action, 'takeover');
          assert.equal(
            fenceOpen({
              leading: true,
              lastRenewStartedAt: sent,
              now: takeoverAt,
              renewDeadlineMs,
            }),
            false,
          );
          // And one millisecond earlier the candidate still waits.
          const before = decideLeaseAction({
            record: held(other, leaseSeconds),
            identity: me,
            now: takeoverAt - 1,
            observedAt: observed,
            leading: false,
            leaseDurationMs: timings.leaseDurationMs,
          });
          assert.equal(before.action, 'wait');
        },
      ),
    );
  });
});
