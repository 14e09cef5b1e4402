import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket } from '../../../src/lib/token-bucket.ts';

const clockAt = (start: number) => {
  const clock = { t: start, now: () => clock.t };
  return clock;
};

test('the token bucket allows a burst, then the configured rate', () => {
  const clock = clockAt(0);
  const bucket = new TokenBucket(5, 3, clock);
  assert.deepEqual(
    [bucket.take(), bucket.take(), bucket.take(), bucket.take()],
    [true, true, true, false],
  );
  assert.equal(bucket.waitMs(), 200);
  clock.t = 199;
  assert.equal(bucket.take(), false);
  clock.t = 200;
  assert.equal(bucket.take(), true);
});

test('a clock stepping backwards does not drain or refill the bucket', () => {
  const clock = clockAt(1000);
  const bucket = new TokenBucket(1, 1, clock);
  assert.equal(bucket.take(), true);
  clock.t = 0;
  assert.equal(bucket.take(), false);
  assert.equal(bucket.waitMs(), 1000);
});

test('a rate of zero or a burst below one is refused with the value named', () => {
  assert.throws(() => new TokenBucket(0, 1, clockAt(0)), /rate must be > 0 per second, got 0/);
  assert.throws(() => new TokenBucket(1, 0.5, clockAt(0)), /burst must be >= 1, got 0.5/);
});
