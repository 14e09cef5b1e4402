import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expiresAt, isExpired, nextHold, recheckDelay } from '../../../src/decide/expiry.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy } from '../../builders/policy.ts';

const t0 = Date.UTC(2026, 10, 29, 8, 0, 0);
const recheck = { initialMs: 1000, maxMs: 5000, maxAttempts: 4 };

test('expiry counts from pod creation, when the gate was set', () => {
  const policy = aGatePolicy('ready', 'team-a').expiry(60_000, 'Review').obj();
  const pod = aPod('p', 'team-a').createdAt(t0).obj();
  assert.equal(expiresAt(policy, pod), t0 + 60_000);
  assert.equal(isExpired(policy, pod, t0 + 59_999), false);
  assert.equal(isExpired(policy, pod, t0 + 60_000), true);
  assert.equal(isExpired(aGatePolicy('no-expiry', 'team-a').obj(), pod, t0 + 1e9), false);
});

test('re-check backoff', async (t) => {
  const cases = [
    { name: 'starts at the initial delay', attempts: 0, want: 1000 },
    { name: 'doubles per attempt', attempts: 2, want: 4000 },
    { name: 'is capped at the maximum', attempts: 3, want: 5000 },
    { name: 'stops after the maximum number of attempts', attempts: 4, want: undefined },
  ];
  for (const c of cases)
    await t.test(c.name, () => assert.equal(recheckDelay(recheck, c.attempts), c.want));
});

test('hold state', async (t) => {
  await t.test('a new reason is a change and restarts the backoff', () => {
    const { hold, changed } = nextHold(
      { reasonKey: 'Budget', since: t0, attempts: 3 },
      'ImagePresent',
      recheck,
      t0 + 10,
    );
    assert.equal(changed, true);
    assert.deepEqual(hold, {
      reasonKey: 'ImagePresent',
      since: t0 + 10,
      attempts: 0,
      nextCheckAt: t0 + 1010,
    });
  });
  await t.test('the same reason before its re-check is due changes nothing', () => {
    const previous = { reasonKey: 'Budget', since: t0, attempts: 0, nextCheckAt: t0 + 1000 };
    assert.deepEqual(nextHold(previous, 'Budget', recheck, t0 + 500), {
      hold: previous,
      changed: false,
    });
  });
  await t.test(
    'the same reason past its re-check counts an attempt without recording a change',
    () => {
      const { hold, changed } = nextHold(
        { reasonKey: 'Budget', since: t0, attempts: 0, nextCheckAt: t0 + 1000 },
        'Budget',
        recheck,
        t0 + 1000,
      );
      assert.equal(changed, false);
      assert.deepEqual(hold, {
        reasonKey: 'Budget',
        since: t0,
        attempts: 1,
        nextCheckAt: t0 + 3000,
      });
    },
  );
});
