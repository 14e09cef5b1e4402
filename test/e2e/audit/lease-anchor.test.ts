/**
 * The tamper anchor outside the branch: the leader records the last audit commit it
 * pushed on its Lease (the real kube-apiserver). The branch on the real git server is
 * then rewritten (its last commit dropped, as a force push does), and a new leader starts
 * on a fresh cache, the case where the clone remembers nothing: it must refuse the
 * branch, loudly (reconcile rejects naming the rewrite, strict intents are refused so
 * their writes are held, tollgate_audit_history_rewritten is 1, a Warning Event on the
 * Lease), and push nothing on top of the rewritten history.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { LeaderElector, leaseClientFromKubeConfig } from '../../../src/cluster/leader.ts';
import { openTestWriter } from './support.ts';
import { anchorAuditInLease, auditAnchorAnnotation } from '../../../src/run/audit.ts';
import type { EventRecord, EventSubject } from '../../../src/cluster/events.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

const run = promisify(execFile);
const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };
const lease = { namespace: 'tollgate-system', name: 'audit-lease-anchor' };

let cp: ControlPlane;
let git: GitServer;
const running: { stop(): Promise<void> }[] = [];
before(async () => {
  cp = await sharedControlPlane();
  git = await startGitServer();
});
after(async () => {
  for (const item of running.reverse()) await item.stop().catch(() => undefined);
  await git?.close();
});

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A replica: an elector on the real Lease and a writer on a fresh cache, anchored in the Lease. */
async function replica(identity: string, url: string) {
  const elector = new LeaderElector({
    leases: leaseClientFromKubeConfig(cp.kubeConfig('tollgate')),
    ...lease,
    identity,
    timings,
  });
  const { writer, repo } = await openTestWriter(git, url, 'anchor', identity);
  const events: { subject: EventSubject; event: EventRecord }[] = [];
  writer.setFence(elector.fence);
  anchorAuditInLease(writer, elector, lease, {
    record: (subject, event) => events.push({ subject, event }),
  });
  running.push({ stop: () => writer.close().catch(() => undefined) }, elector);
  elector.start();
  await until(`${identity} leads`, () => elector.isLeader());
  return { elector, writer, repo, events };
}

test('a branch rewritten behind the anchor on the Lease is refused by a new leader on a fresh cache', async () => {
  const url = git.createRepo('anchor');
  const bare = join(git.root, 'anchor.git');
  const a = await replica('replica-a', url);
  await a.writer.reconcile();
  for (const name of ['p0', 'p1']) {
    const intent = aDecision('Release', name, 'anchor').obj();
    await a.writer.recordIntents([intent]);
    a.writer.record([outcomeOf(intent)]);
    await a.writer.flush();
  }
  const tip = (
    await run('git', ['-C', bare, 'rev-parse', 'refs/heads/tollgate/audit'])
  ).stdout.trim();
  const leases = leaseClientFromKubeConfig(cp.kubeConfig('tollgate'));
  await until('the pushed tip on the Lease', async () => {
    const current = await leases.get(lease.namespace, lease.name);
    return current?.metadata?.annotations?.[auditAnchorAnnotation] === `tollgate/audit@${tip}`;
  });
  await a.elector.stop();
  await a.writer.close();

  // A force push: the branch loses its last commit (p1's outcome).
  await run('git', ['-C', bare, 'update-ref', 'refs/heads/tollgate/audit', `${tip}~1`]);

  const b = await replica('replica-b', url);
  await assert.rejects(
    b.writer.reconcile(),
    /audit branch tollgate\/audit .* was rewritten: .* does not contain .*recorded in the leader Lease/,
  );
  await assert.rejects(
    b.writer.recordIntents([aDecision('Release', 'p2', 'anchor').obj()]),
    /rewritten/,
  );
  assert.match(await registry.metrics(), /^tollgate_audit_history_rewritten 1$/m);
  assert.deepEqual(
    b.events.map(({ subject, event }) => [subject.kind, subject.name, event.type, event.reason]),
    [['Lease', lease.name, 'Warning', 'AuditHistoryRewritten']],
  );
  // Nothing was built on the rewritten branch.
  const after = (
    await run('git', ['-C', bare, 'rev-parse', 'refs/heads/tollgate/audit'])
  ).stdout.trim();
  assert.equal(after, (await run('git', ['-C', bare, 'rev-parse', `${tip}~1`])).stdout.trim());
  // The anchor on the Lease still names the commit the branch lost.
  const current = await leases.get(lease.namespace, lease.name);
  assert.equal(current?.metadata?.annotations?.[auditAnchorAnnotation], `tollgate/audit@${tip}`);
});
