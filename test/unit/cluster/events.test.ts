import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventAggregator, TokenBucket } from '../../../src/cluster/events.ts';

const pod = (uid: string) => ({ namespace: 'team-a', name: `pod-${uid}`, uid });
const released = {
  type: 'Normal' as const,
  reason: 'GateReleased',
  action: 'Release',
  note: 'conditions hold',
};
const held = { type: 'Normal' as const, reason: 'GateHeld', action: 'Hold', note: 'waiting' };

test('repeats of one (pod, reason) inside the window merge into one pending write with a count', () => {
  const aggregator = new EventAggregator(60_000, 100);
  for (let i = 0; i < 5; i++) aggregator.add(pod('a'), held, 1000 + i);
  assert.equal(aggregator.backlog, 1);
  const series = aggregator.next();
  assert.equal(series?.count, 5);
  assert.equal(aggregator.next(), undefined);
});

test('different reasons or different pods are separate Events', () => {
  const aggregator = new EventAggregator(60_000, 100);
  aggregator.add(pod('a'), held, 0);
  aggregator.add(pod('a'), released, 0);
  aggregator.add(pod('b'), held, 0);
  assert.equal(aggregator.backlog, 3);
});

test('a repeat after the window starts a new Event instead of extending the old series', () => {
  const aggregator = new EventAggregator(60_000, 100);
  aggregator.add(pod('a'), held, 0);
  const first = aggregator.next();
  if (first) first.name = 'pod-a.1';
  aggregator.add(pod('a'), held, 120_000);
  const second = aggregator.next();
  assert.equal(second?.count, 1);
  assert.equal(second?.name, undefined);
});

test('a full backlog drops new Events and counts them, but still merges repeats of queued ones', () => {
  const aggregator = new EventAggregator(60_000, 2);
  assert.equal(aggregator.add(pod('a'), held, 0), true);
  assert.equal(aggregator.add(pod('b'), held, 0), true);
  assert.equal(aggregator.add(pod('c'), held, 0), false);
  assert.equal(aggregator.add(pod('a'), held, 1), true);
  assert.equal(aggregator.dropped, 1);
  assert.equal(aggregator.backlog, 2);
});

test('series outside their window are forgotten once written', () => {
  const aggregator = new EventAggregator(1000, 10);
  aggregator.add(pod('a'), held, 0);
  aggregator.next();
  aggregator.expire(5000);
  aggregator.add(pod('a'), held, 5000);
  assert.equal(aggregator.next()?.count, 1);
});

test('the token bucket allows a burst, then the configured rate', () => {
  const bucket = new TokenBucket(5, 3, 0);
  assert.deepEqual(
    [bucket.tryTake(0), bucket.tryTake(0), bucket.tryTake(0), bucket.tryTake(0)],
    [true, true, true, false],
  );
  assert.equal(bucket.waitMs(0), 200);
  assert.equal(bucket.tryTake(199), false);
  assert.equal(bucket.tryTake(200), true);
  assert.throws(() => new TokenBucket(0, 1, 0), /rate > 0/);
});
