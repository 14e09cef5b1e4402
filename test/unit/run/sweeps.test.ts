/**
 * Stopping the sweeps is the first step of a shutdown ("no new work first"): it stops
 * their timers and does not wait for a tick already running (a policy fetch that parses
 * slowly, an audit flush retrying a push while Git is down). Waiting for it held the
 * shutdown there while the loops, stopped next, went on deciding and releasing pods: in
 * the 30-minute soak (seed 2) a leader released 4 pods more than 20 s after its SIGTERM
 * and was killed before their outcomes were pushed. The order is proven by promises
 * (stop resolved while the tick's work is still pending), not by time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSweeps, type SweepTargets } from '../../../src/run/sweeps.ts';
import { silentLogger } from '../../../src/observe/log.ts';

const everySecond = '* * * * * *';
const never = '0 0 1 1 *';

const rows: { sweep: 'policyResync' | 'auditFlush'; target: keyof SweepTargets }[] = [
  { sweep: 'policyResync', target: 'refreshPolicy' },
  { sweep: 'auditFlush', target: 'flushAudit' },
];

for (const { sweep, target } of rows) {
  test(`stopping the sweeps does not wait for a running ${target} tick`, async () => {
    let release = (): void => undefined;
    const work = new Promise<void>((resolve) => (release = resolve));
    let ticked = (): void => undefined;
    const running = new Promise<void>((resolve) => (ticked = resolve));
    const targets: SweepTargets = {
      passGateRelease: () => undefined,
      refreshPolicy: () => Promise.resolve(),
      flushAudit: () => Promise.resolve(),
      [target]: () => {
        ticked();
        return work;
      },
    };
    const schedules = { expirySweep: never, policyResync: never, auditFlush: never };
    const sweeps = startSweeps({ ...schedules, [sweep]: everySecond }, targets, silentLogger);
    await running;
    let stopped = false;
    const stopping = sweeps.stop().then(() => (stopped = true));
    await new Promise<void>((resolve) => setImmediate(resolve));
    const before = stopped;
    release();
    await stopping;
    assert.equal(before, true, `stop resolved while the ${target} tick was still running`);
  });
}
