import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay } from '../../../src/cluster/backoff.ts';

const policy = { baseMs: 500, maxMs: 30_000 };

test('the delay doubles per attempt and stays between half the cap and the cap', () => {
  const cases: { attempt: number; cap: number }[] = [
    { attempt: 0, cap: 500 },
    { attempt: 1, cap: 1000 },
    { attempt: 2, cap: 2000 },
    { attempt: 5, cap: 16_000 },
    { attempt: 6, cap: 30_000 },
    { attempt: 60, cap: 30_000 },
    { attempt: 5000, cap: 30_000 },
  ];
  for (const { attempt, cap } of cases) {
    assert.equal(
      backoffDelay(attempt, policy, () => 0),
      cap / 2,
      `attempt ${attempt} lowest`,
    );
    assert.equal(
      backoffDelay(attempt, policy, () => 0.999999),
      Math.round(cap / 2 + (cap / 2) * 0.999999),
      `attempt ${attempt} highest`,
    );
  }
});

test('jitter spreads the retries of many informers failing together', () => {
  let seed = 42;
  const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const delays = new Set(Array.from({ length: 100 }, () => backoffDelay(10, policy, random)));
  assert.ok(delays.size > 50, `only ${delays.size} distinct delays`);
  for (const delay of delays) assert.ok(delay >= 15_000 && delay <= 30_000);
});

test('a negative or fractional attempt is rejected with a clear error', () => {
  assert.throws(() => backoffDelay(-1, policy, Math.random), /non-negative integer/);
  assert.throws(() => backoffDelay(1.5, policy, Math.random), /non-negative integer/);
});
