/**
 * The final audit flush of `tollgate run`'s shutdown is bounded: with the Git server down
 * or hanging, closeAudit gives up after its bound (an injected timer, no wall time), the
 * commits stay queued locally for the next term's leftover reconciliation, and a log
 * line and a metric say so. A flush that finishes in time is not flushed twice.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { GitAuditWriter, type AuditStore } from '../../../src/audit/writer.ts';
import { closeAudit, finalFlushBoundMs } from '../../../src/run/audit.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';
import { aDecision } from '../../builders/decision.ts';
import { parseWithMinimal } from '../../support/run-config.ts';

/** A store whose pushes never answer (a Git server that accepted the connection and hangs) unless told to land. */
class HangingStore implements AuditStore {
  commits: { pushed: boolean }[] = [];
  pushCalls = 0;
  hang = true;
  refuse = false;
  async commitFile(path: string) {
    this.commits.push({ pushed: false });
    return { oid: String(this.commits.length), path };
  }
  push(): Promise<number> {
    this.pushCalls += 1;
    if (this.refuse) return Promise.reject(new Error('connect ECONNREFUSED'));
    if (this.hang) return new Promise<number>(() => {});
    for (const commit of this.commits) commit.pushed = true;
    return Promise.resolve(this.commits.length);
  }
  async unpushed() {
    return this.commits.filter((commit) => !commit.pushed).map(() => ({ decisions: 1 }));
  }
}

function setup() {
  const timers = new ManualTimers();
  const store = new HangingStore();
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'tollgate-0',
    mode: 'strict',
    batch: { maxDecisions: 100, maxDelayMs: 5_000 },
    clock: timers.clock,
    timers,
  });
  const lines: { msg: string }[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { timers, store, writer, lines, log };
}

async function abandonedCount(): Promise<number> {
  const metric = await registry
    .getSingleMetric('tollgate_audit_final_flush_abandoned_total')
    ?.get();
  return metric?.values[0]?.value ?? 0;
}

test('a final flush whose push never answers is abandoned after the bound: closeAudit returns, the commit stays queued locally, a log line and the metric say so', async () => {
  const { timers, store, writer, lines, log } = setup();
  const before = await abandonedCount();
  writer.record([aDecision('Release', 'p1').succeeded().obj()]);
  let returned = false;
  const closing = closeAudit(writer, log, { boundMs: 5_000, timers }).then(() => {
    returned = true;
  });
  await settle();
  assert.equal(store.pushCalls, 1, 'the final flush pushes');
  await timers.advance(4_999);
  assert.equal(returned, false, 'closeAudit waits for the push until the bound');
  await timers.advance(1);
  assert.equal(returned, true, 'closeAudit returns once the bound passed');
  await closing;
  assert.equal(store.pushCalls, 1, 'no second flush after the abandoned one');
  assert.deepEqual(await store.unpushed(), [{ decisions: 1 }], 'the commit stays queued locally');
  assert.ok(
    lines.some((line) => line.msg.startsWith('final audit flush abandoned')),
    'a log line says the flush was abandoned',
  );
  assert.equal(
    await abandonedCount(),
    before + 1,
    'tollgate_audit_final_flush_abandoned_total counts it',
  );
});

test('a final flush that lands within the bound is not abandoned, and close does not push again', async () => {
  const { timers, store, writer, lines, log } = setup();
  store.hang = false;
  const before = await abandonedCount();
  writer.record([aDecision('Release', 'p1').succeeded().obj()]);
  await closeAudit(writer, log, { boundMs: 5_000, timers });
  assert.equal(store.pushCalls, 1);
  assert.deepEqual(await store.unpushed(), []);
  assert.equal(
    lines.some((line) => line.msg.startsWith('final audit flush abandoned')),
    false,
  );
  assert.equal(await abandonedCount(), before);
  assert.deepEqual(timers.pending, [], 'no timer left behind');
});

test('a final flush whose push fails is not pushed a second time by close: the commit stays queued locally', async () => {
  const { timers, store, writer, log } = setup();
  store.refuse = true;
  writer.record([aDecision('Release', 'p1').succeeded().obj()]);
  await closeAudit(writer, log, { boundMs: 5_000, timers });
  assert.equal(store.pushCalls, 1, 'one push: close does not flush again');
  assert.deepEqual(await store.unpushed(), [{ decisions: 1 }]);
  assert.deepEqual(timers.pending, [], 'no timer left behind');
});

/** terminationGracePeriodSeconds of a manifest, in ms. */
function graceMs(path: string): number {
  const match = /terminationGracePeriodSeconds: (\d+)/.exec(readFileSync(path, 'utf8'));
  assert.ok(match, `${path} sets terminationGracePeriodSeconds`);
  return Number(match[1]) * 1_000;
}

test('the final flush gets a quarter of --shutdown-timeout: at the default, the dispatcher and the audit together stay under the grace period of deploy/ and the chart', () => {
  const parsed = parseWithMinimal({});
  assert.ok(parsed.ok);
  const { shutdownTimeoutMs } = parsed.config;
  assert.equal(finalFlushBoundMs(shutdownTimeoutMs), shutdownTimeoutMs / 4);
  for (const manifest of [
    'deploy/base/deployment.yaml',
    'chart/tollgate/templates/deployment.yaml',
  ])
    assert.ok(
      shutdownTimeoutMs + finalFlushBoundMs(shutdownTimeoutMs) < graceMs(manifest),
      `${manifest}: ${shutdownTimeoutMs} + ${finalFlushBoundMs(shutdownTimeoutMs)} ms < its grace`,
    );
});
