/**
 * `tollgate run` reads its sweep schedules and runs its sweeps without asking ICU for a
 * date format, a time zone or a locale: the first `Intl.DateTimeFormat` a process makes
 * brings ICU's date, calendar and zone data into memory for the rest of its life. The
 * `cron` package asked for the system's time zone to read every schedule, and its date
 * library for the system's locale at every step: 7.3 MiB of resident memory in a
 * `tollgate run` at 0 pods (docs/BENCHMARKS.md). The sweeps are read in UTC. Counted by
 * wrapping `Intl.DateTimeFormat` in this test's own process (each test file runs alone).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRunConfig } from '../../../src/cli/run-config.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { startSweeps } from '../../../src/run/sweeps.ts';
import { sweepJob } from '../../../src/run/sweep-schedule.ts';

const made: string[] = [];
const DateTimeFormat = Intl.DateTimeFormat;
Intl.DateTimeFormat = new Proxy(DateTimeFormat, {
  construct(target, args: unknown[]) {
    made.push(new Error().stack ?? '');
    return Reflect.construct(target, args) as object;
  },
  apply(target, self, args: unknown[]) {
    made.push(new Error().stack ?? '');
    return Reflect.apply(target, self, args) as unknown;
  },
});

test('reading the sweep settings and starting the sweeps make no Intl.DateTimeFormat', async () => {
  made.length = 0;
  const result = parseRunConfig(
    {
      kubeconfig: '/kubeconfig',
      policyRepo: 'https://git.example/platform/policy.git',
      expirySweep: '*/15 * * * * *',
      auditFlush: '0 */5 * * * *',
    },
    { env: {}, hostname: 'tollgate-0', isFile: () => true, isDirectory: () => false },
  );
  assert.ok(result.ok, JSON.stringify(result));
  const sweeps = startSweeps(
    result.config.schedules,
    {
      passGateRelease: () => undefined,
      refreshPolicy: () => Promise.resolve(),
      flushAudit: () => Promise.resolve(),
    },
    silentLogger,
  );
  await sweeps.stop();
  assert.deepEqual(made, [], `made ${made.length}; the first by:\n${made[0] ?? ''}`);
});

test('a bad schedule is refused by name, still without Intl', () => {
  made.length = 0;
  const result = parseRunConfig(
    {
      kubeconfig: '/kubeconfig',
      policyRepo: 'https://git.example/platform/policy.git',
      policyResync: 'every minute',
    },
    { env: {}, hostname: 'tollgate-0', isFile: () => true, isDirectory: () => false },
  );
  assert.equal(result.ok, false);
  assert.match(
    result.ok ? '' : result.problems.join('\n'),
    /--policy-resync .*"every minute" is not a cron expression \(Unknown alias: eve\)/,
  );
  assert.deepEqual(made, []);
});

test('a sweep schedule is read in UTC, whatever the zone of the machine', () => {
  made.length = 0;
  process.env.TZ = 'Europe/Berlin';
  assert.equal(
    new Date(Date.UTC(2026, 6, 1, 12)).getHours(),
    14,
    'this process now reads Berlin time',
  );
  const job = sweepJob('0 0 1 * * *', () => undefined);
  try {
    const next = job.nextDate().toJSDate();
    assert.equal(next.getUTCHours(), 1, `01:00 UTC, not Berlin: ${next.toISOString()}`);
    assert.equal(next.getUTCMinutes(), 0);
  } finally {
    void job.stop();
  }
  assert.deepEqual(made, []);
});
