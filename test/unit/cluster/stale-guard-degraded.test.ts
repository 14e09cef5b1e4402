/**
 * The stale-guard reports degraded when freshness cannot be established: live reads are
 * refused by an open breaker. A gauge, a /readyz detail line (the replica stays ready:
 * only destructive acts on stale pods wait) and one Event per change on tollgate's Lease.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FreshnessHealth, LiveReader } from '../../../src/cluster/stale-guard.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { readinessChecks } from '../../../src/run/observe.ts';
import { runChecks } from '../../../src/observe/http.ts';
import { ControllerEvents, fallbackEvent, freshnessEvent } from '../../../src/run/writes.ts';
import type { EventRecord, EventSubject } from '../../../src/cluster/events.ts';

const liveReads = { qps: 100, burst: 100, breaker: { failureThreshold: 2, openMs: 5_000 } };

async function degradedGauge(): Promise<number | undefined> {
  return (await registry.getSingleMetric('tollgate_stale_guard_degraded')?.get())?.values[0]?.value;
}

function failingThenHealthy(clock: ManualClock) {
  let failing = true;
  const changes: string[] = [];
  const health = new FreshnessHealth({
    onChange: (degraded) =>
      changes.push(degraded === undefined ? 'recovered' : `degraded: ${degraded}`),
  });
  const reader = new LiveReader<object>({
    read: async () => {
      if (failing) throw new Error('connect ECONNREFUSED');
      return {};
    },
    policy: liveReads,
    clock,
    health,
  });
  return { health, reader, changes, heal: () => (failing = false) };
}

test('an open live-read breaker marks freshness degraded with the reason; the next good read clears it', async () => {
  const clock = new ManualClock();
  const w = failingThenHealthy(clock);
  assert.equal(w.health.degraded, undefined);
  await w.reader.read('ns', 'a');
  assert.equal(w.health.degraded, undefined, 'one failure is not yet degraded');
  await w.reader.read('ns', 'a');
  assert.match(w.health.degraded ?? '', /live reads failing \(2 in a row\): .*ECONNREFUSED/);
  assert.equal(await degradedGauge(), 1);
  w.heal();
  clock.advance(liveReads.breaker.openMs);
  const probe = await w.reader.read('ns', 'a');
  assert.equal(probe.ok, true);
  assert.equal(w.health.degraded, undefined);
  assert.equal(await degradedGauge(), 0);
  assert.deepEqual(
    w.changes.map((c) => c.replace(/:.*/, '')),
    ['degraded', 'recovered'],
    'each change told once',
  );
});

test('a budget spent is not degraded: the key only waits for a token', async () => {
  const clock = new ManualClock();
  const health = new FreshnessHealth();
  const reader = new LiveReader<object>({
    read: async () => ({}),
    policy: { ...liveReads, qps: 1, burst: 1 },
    clock,
    health,
  });
  await reader.read('ns', 'a');
  const refused = await reader.read('ns', 'b');
  assert.equal(refused.ok, false);
  assert.equal(health.degraded, undefined);
});

test('/readyz lists the degraded stale-guard as a detail line and stays ready', () => {
  const health = new FreshnessHealth();
  health.set('live reads failing (5 in a row): timeout');
  // The stale-guard's check alone (the others fail here: no policy, no view).
  const only = () => ({ 'stale-guard': readinessChecks({ freshness: health })['stale-guard']! });
  const report = runChecks(only(), false);
  assert.equal(report.ok, true);
  assert.match(
    report.body,
    /^\[!\] stale-guard degraded: live reads failing \(5 in a row\): timeout$/m,
  );
  health.set(undefined);
  assert.equal(runChecks(only(), false).body, 'ok\n');
});

test('write-path Events name the change: fallback entered and left, freshness degraded and recovered', () => {
  const rows: { event: EventRecord; type: string; reason: string; note: RegExp }[] = [
    {
      event: fallbackEvent({
        to: 'degraded',
        reason: 'failure_ratio',
        detail: '12 of the last 20 attempts failed',
      }),
      type: 'Warning',
      reason: 'WritePathDegraded',
      note: /synchronous.*12 of the last 20 attempts failed/,
    },
    {
      event: fallbackEvent({ to: 'healthy', detail: '10 writes succeeded in a row' }),
      type: 'Normal',
      reason: 'WritePathRecovered',
      note: /queued again.*10 writes succeeded/,
    },
    {
      event: freshnessEvent('live reads failing (2 in a row): timeout'),
      type: 'Warning',
      reason: 'StaleGuardDegraded',
      note: /freshness cannot be established.*timeout/,
    },
    {
      event: freshnessEvent(undefined),
      type: 'Normal',
      reason: 'StaleGuardRecovered',
      note: /live reads answer again/,
    },
  ];
  for (const row of rows) {
    assert.equal(row.event.type, row.type);
    assert.equal(row.event.reason, row.reason);
    assert.match(row.event.note, row.note);
  }
});

test("tollgate's own Events regard its Lease, and wait for the recorder once attached", () => {
  const seen: [EventSubject, EventRecord][] = [];
  const events = new ControllerEvents({ namespace: 'tollgate-system', name: 'tollgate' });
  events.record(freshnessEvent(undefined));
  events.attach({ record: (subject, event) => void seen.push([subject, event]) });
  events.record(freshnessEvent('x'));
  assert.equal(seen.length, 2, 'the one recorded before attach is kept and sent');
  assert.deepEqual(seen[0]?.[0], {
    namespace: 'tollgate-system',
    name: 'tollgate',
    uid: '',
    kind: 'Lease',
    apiVersion: 'coordination.k8s.io/v1',
  });
});
