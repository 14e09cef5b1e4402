/**
 * `tollgate queue`'s estimates against a paced run on the real control plane: six pods
 * of one tenant paced at 2 releases/s, one per batch, all conditions met. The queue is
 * read before tollgate starts; then tollgate releases them and an independent informer
 * (admin identity) stamps each release.
 *
 * Asserted: tollgate decides the releases in exactly the queue's order (its Release
 * intents in the audit trail, by decision time), each pod once, each with a succeeded
 * outcome, and every gate goes. The order in which the API server applied the removals
 * is reported, not asserted: a strict audit push can land the intents of two passes
 * together, their writes are then in flight at once, and the API server may apply the
 * second first (a fresh-clone CI saw job-3's removal after job-4's and job-5's; locally
 * 2 runs in 12, job-3 before job-2, both sent within a millisecond, in order). Reported
 * too (as a test diagnostic, never asserted: wall time on a shared machine is no proof):
 * each pod's estimated offset from the first release against the observed one, and the
 * largest error.
 *
 * Run: node --test --test-concurrency=1 test/e2e/explain/estimate.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CoreV1Api, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { aPod } from '../../builders/pod.ts';
import { auditRecords } from '../../support/audit-records.ts';
import { eventually } from '../../support/eventually.ts';
import { policyFiles, startWorld, type PolicyState, type World } from '../isolation/world.ts';

const execFileAsync = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const namespace = 'explain-paced';
const gate = 'paced.tollgate.io/run';
const count = 6;

const policy: PolicyState = {
  tenants: [
    {
      name: 'paced',
      namespaces: [namespace],
      gatePrefixes: ['paced.tollgate.io/'],
      pacing: { releasesPerSecond: 2, batchSize: 1, maxInFlight: 50 },
    },
  ],
  gatePolicies: [{ name: 'run', tenant: 'paced', gate, conditions: [{ type: 'Budget' }] }],
};

interface QueueItem {
  pod: string;
  position: number;
  waiting: string;
  estimate: { releaseAt: string | null; basis: string };
}

describe('queue estimates against a paced run', () => {
  let world: World;
  let policyDir: string;

  before(async () => {
    world = await startWorld('explain-estimate', policy);
    await world.createNamespaces(namespace);
    policyDir = join(mkdtempSync(join(tmpdir(), 'tollgate-estimate-')), 'policy');
    for (const [file, text] of Object.entries(policyFiles(policy))) {
      if (text === null) continue;
      mkdirSync(dirname(join(policyDir, file)), { recursive: true });
      writeFileSync(join(policyDir, file), text);
    }
    await world.createPods(
      Array.from({ length: count }, (_, i) => aPod(`job-${i}`, namespace).gated(gate).obj()),
    );
  });

  after(async () => {
    await world?.stop();
  });

  test('tollgate releases in the queue order; the estimate error is reported', async (t) => {
    const { stdout } = await execFileAsync(
      process.execPath,
      [
        join(repoRoot, 'src/cli/main.ts'),
        'queue',
        '--tenant',
        'paced',
        '--policy-dir',
        policyDir,
        '--kubeconfig',
        world.cp.tollgateKubeconfig,
        '-o',
        'json',
      ],
      { encoding: 'utf8', cwd: repoRoot },
    );
    const queue = (JSON.parse(stdout) as { items: QueueItem[]; total: number }).items;
    assert.equal(queue.length, count);
    assert.deepEqual(
      queue.map((e) => e.waiting),
      ['nothing', ...Array(count - 1).fill('pacing')],
      'the first is releasable now, the rest wait for pace',
    );

    // An independent observer stamps each gate removal.
    const released = new Map<string, number>();
    const informer = makeInformer<V1Pod>(world.kc, `/api/v1/namespaces/${namespace}/pods`, () =>
      world.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace }),
    );
    const observe = (pod: V1Pod): void => {
      const key = `${namespace}/${pod.metadata?.name}`;
      if (!released.has(key) && (pod.spec?.schedulingGates ?? []).length === 0)
        released.set(key, performance.now());
    };
    informer.on('update', observe);
    informer.on('add', observe);
    await informer.start();
    try {
      await world.startTollgate();
      await eventually('every pod released', async () => released.size === count, {
        timeoutMs: 60_000,
      });
    } finally {
      await informer.stop();
    }

    const queued = queue.map((e) => e.pod);
    const ofPods = (records: Awaited<ReturnType<typeof auditRecords>>) =>
      records.filter((r) => r.kind === 'Release' && r.target.namespace === namespace);
    // The outcomes are recorded once the API server's answers are back: waited for.
    const records = await eventually(
      'a Release intent and outcome for each pod in the audit trail',
      async () => {
        const found = ofPods(await auditRecords(world.auditUrl, world.git.token));
        return found.filter((r) => r.phase === 'outcome').length >= count ? found : false;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    const intents = records.filter((r) => r.phase === 'intent');
    const decided = [...intents]
      .sort((a, b) => a.at - b.at)
      .map((r) => `${r.target.namespace}/${r.target.name}`);
    assert.deepEqual(decided, queued, 'releases decided in the order the queue showed');
    const outcomes = records.filter((r) => r.phase === 'outcome');
    assert.deepEqual(
      outcomes.map((r) => [r.target.name, r.outcome.result]).sort(),
      queued.map((pod) => [pod.split('/')[1], 'succeeded']).sort(),
      'one succeeded outcome per pod',
    );
    const order = [...released.entries()].sort(([, a], [, b]) => a - b).map(([pod]) => pod);
    assert.deepEqual([...order].sort(), [...queued].sort(), 'every gate removed');
    t.diagnostic(
      `removals in the order the API server applied them: ${order.join(', ')}${
        order.join() === queued.join() ? ' (the queue order)' : ' (not the queue order)'
      }`,
    );

    const estimatedAt = queue.map((e) => Date.parse(e.estimate.releaseAt as string));
    const firstActual = released.get(order[0] as string) as number;
    const rows = queue.map((e, i) => {
      const estimated = (estimatedAt[i] as number) - (estimatedAt[0] as number);
      const actual = (released.get(e.pod) as number) - firstActual;
      return { pod: e.pod, estimatedMs: estimated, actualMs: Math.round(actual) };
    });
    const worst = Math.max(...rows.map((r) => Math.abs(r.actualMs - r.estimatedMs)));
    for (const r of rows)
      t.diagnostic(
        `${r.pod}: estimated +${r.estimatedMs} ms after the first release, released +${r.actualMs} ms`,
      );
    t.diagnostic(`largest estimate error: ${worst} ms at 2 releases/s`);
  });
});
