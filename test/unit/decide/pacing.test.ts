import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bucketCapacity,
  canTake,
  combinePacing,
  msUntil,
  rampBudget,
  refill,
  rejoinServed,
  stepRamp,
} from '../../../src/decide/pacing.ts';

const t0 = Date.UTC(2026, 10, 29, 8, 0, 0);

test('token bucket', async (t) => {
  const cases = [
    { name: 'a new bucket starts full', bucket: refill(undefined, 5, 5, t0), tokens: 5 },
    {
      name: 'tokens refill at the rate',
      bucket: refill({ tokens: 0, at: t0 }, 5, 5, t0 + 400),
      tokens: 2,
    },
    {
      name: 'a bucket never holds more than its capacity',
      bucket: refill({ tokens: 4, at: t0 }, 5, 5, t0 + 10_000),
      tokens: 5,
    },
  ];
  for (const c of cases)
    await t.test(c.name, () => assert.ok(Math.abs(c.bucket.tokens - c.tokens) < 1e-9));
  await t.test('a unit larger than the burst may go only from a full bucket', () => {
    assert.equal(canTake({ tokens: 5, at: t0 }, 8, 5), true);
    assert.equal(canTake({ tokens: 4, at: t0 }, 8, 5), false);
  });
  await t.test('the wait for tokens is computed from the rate', () => {
    assert.equal(msUntil({ tokens: 0, at: t0 }, 2, 4, 4), 500);
    assert.equal(msUntil({ tokens: 0, at: t0 }, 1, 0, 1), Number.POSITIVE_INFINITY);
  });
  await t.test('capacity is one second of releases bounded by the batch', () => {
    assert.equal(bucketCapacity({ releasesPerSecond: 100, batchSize: 20 }), 20);
    assert.equal(bucketCapacity({ releasesPerSecond: 0.5, batchSize: 20 }), 1);
  });
});

test('per-policy pacing only tightens the tenant pacing', () => {
  assert.deepEqual(
    combinePacing(
      { maxInFlight: 10, releasesPerSecond: 5, batchSize: 50 },
      { maxInFlight: 4, batchSize: 100 },
    ),
    {
      maxInFlight: 4,
      releasesPerSecond: 5,
      batchSize: 50,
    },
  );
});

test('an idle tenant rejoins fair share at the lowest virtual time, banking no credit', () => {
  const served = rejoinServed({ a: 30 }, [
    { name: 'a', weight: 1 },
    { name: 'b', weight: 2 },
  ]);
  assert.deepEqual(served, { a: 30, b: 60 });
});

test('budget ramp', async (t) => {
  const cases = [
    {
      name: 'the first limit seen applies at once',
      ramp: undefined,
      target: 100,
      at: t0,
      limit: 100,
    },
    {
      name: 'a lowered limit applies at once',
      ramp: { from: 100, to: 100, startedAt: t0 },
      target: 50,
      at: t0,
      limit: 50,
    },
    {
      name: 'a raised limit starts from the old one',
      ramp: { from: 100, to: 100, startedAt: t0 },
      target: 200,
      at: t0 + 1,
      limit: 100,
    },
    {
      name: 'a raised limit opens linearly',
      ramp: { from: 100, to: 200, startedAt: t0 },
      target: 200,
      at: t0 + 2500,
      limit: 125,
    },
    {
      name: 'a raised limit is fully open after the ramp',
      ramp: { from: 100, to: 200, startedAt: t0 },
      target: 200,
      at: t0 + 20_000,
      limit: 200,
    },
  ];
  for (const c of cases)
    await t.test(c.name, () =>
      assert.equal(stepRamp(c.ramp, c.target, c.at, 10_000).limit, c.limit),
    );
  await t.test('every budgeted dimension ramps, and a running ramp asks for another pass', () => {
    const first = rampBudget(undefined, { pods: 10, resources: { cpu: 1000 } }, t0, 10_000);
    const raised = rampBudget(
      first.ramps,
      { pods: 20, resources: { cpu: 3000 } },
      t0 + 1000,
      10_000,
    );
    assert.deepEqual(raised.limits, { pods: 10, resources: { cpu: 1000 } });
    const half = rampBudget(
      raised.ramps,
      { pods: 20, resources: { cpu: 3000 } },
      t0 + 6000,
      10_000,
    );
    assert.deepEqual(half.limits, { pods: 15, resources: { cpu: 2000 } });
    assert.equal(half.rampingUntil, t0 + 7000);
  });
});
