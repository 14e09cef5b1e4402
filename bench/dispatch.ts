/**
 * What the dispatcher costs per write as its queue grows: `n` gate removals of 16
 * tenants and 3 priorities queued at once (a large strict pass hands the dispatcher
 * thousands), sent at concurrency 16 to an executor that answers on the next turn, no
 * API server. Picking the next write must not cost a scan of the whole queue: the time
 * to drain `--large` writes over the time to drain `--writes` should be about their
 * ratio (linear), not its square.
 *
 *   node bench/dispatch.ts [--writes 5000] [--large 20000] [--repeat 5] [--smoke]
 *
 * Reports the median drain time of each size and the ratio large/writes beside the
 * size ratio. --smoke: 5,000 and 20,000 writes, 3 repeats; exits 1 when 4x the writes
 * cost more than 8x the time (linear gives about 4, a scan per pick about 16). A ratio
 * measured in one run, so the verdict does not depend on the machine's speed.
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { PriorityDispatcher } from '../src/dispatch/queue.ts';
import type { WriteRequest, WriteResult } from '../src/dispatch/types.ts';
import { systemClock } from '../src/lib/clock.ts';
import { systemTimers } from '../src/lib/timers.ts';
import { median } from './lib.ts';

const { values } = parseArgs({
  options: {
    writes: { type: 'string', default: '5000' },
    large: { type: 'string', default: '20000' },
    repeat: { type: 'string', default: '5' },
    smoke: { type: 'boolean', default: false },
  },
});
const small = values.smoke ? 5000 : Number(values.writes);
const large = values.smoke ? 20000 : Number(values.large);
const repeats = values.smoke ? 3 : Number(values.repeat);

function removal(i: number, now: number): WriteRequest {
  const name = `p${i}`;
  return {
    key: `batch/${name}`,
    target: { namespace: 'batch', name, uid: `uid-${i}`, resourceVersion: '1' },
    op: { type: 'removeGate', gate: 'batch.tollgate.io/ready', gateIndex: 0 },
    priority: i % 3,
    tenant: `tenant-${i % 16}`,
    deadline: now + 3_600_000,
    decisionId: `gate-release:Release:uid-${i}:1:${now}`,
  };
}

/** Milliseconds from handing `n` writes to the dispatcher to the last one answered. */
async function drain(n: number): Promise<number> {
  const dispatcher = new PriorityDispatcher({
    capacity: 2 * n,
    concurrency: 16,
    qps: 1_000_000,
    burst: 1_000_000,
    clock: systemClock,
    timers: systemTimers,
    executor: () => new Promise((answer) => setImmediate(() => answer({ resourceVersion: '2' }))),
  });
  const now = Date.now();
  const started = performance.now();
  const done: Promise<WriteResult>[] = [];
  for (let i = 0; i < n; i++) {
    const result = dispatcher.enqueue(removal(i, now));
    if (!result.accepted) throw new Error(`write ${i} refused: ${result.reason}`);
    done.push(result.done);
  }
  const results = await Promise.all(done);
  const ms = performance.now() - started;
  await dispatcher.close();
  const failed = results.filter((r) => r.result !== 'succeeded').length;
  if (failed > 0) throw new Error(`${failed} of ${n} writes did not succeed`);
  return ms;
}

async function medianDrain(n: number): Promise<number> {
  await drain(Math.min(n, 1000)); // warm-up
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) times.push(await drain(n));
  return median(times);
}

const smallMs = await medianDrain(small);
const largeMs = await medianDrain(large);
const result = {
  machine: { cpus: cpus().length, load: loadavg().map((l) => Number(l.toFixed(2))) },
  repeats,
  medianMs: { [small]: smallMs, [large]: largeMs },
  largeOverSmall: largeMs / smallMs,
  writesRatio: large / small,
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
if (values.smoke && result.largeOverSmall > 2 * result.writesRatio) {
  process.stderr.write(
    `bench dispatch smoke: ${result.writesRatio}x the writes cost ${result.largeOverSmall.toFixed(1)}x (limit ${2 * result.writesRatio}x)\n`,
  );
  process.exit(1);
}
