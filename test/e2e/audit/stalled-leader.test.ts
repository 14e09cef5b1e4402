/**
 * A leader that stalls past its lease must not double outcomes: two leader electors on
 * a real Lease (the real kube-apiserver), each fencing its own audit writer, both
 * writing to one audit branch on the real git server. Leader A records an intent, then
 * "stalls" (its lease client is cut off, so it cannot renew); B takes the lease and its
 * term start closes A's intent. When A resumes, neither its outcome for that intent nor
 * a new intent reaches the branch: `tollgate audit verify` passes with exactly one
 * outcome.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import {
  LeaderElector,
  leaseClientFromKubeConfig,
  type LeaseClient,
} from '../../../src/cluster/leader.ts';
import { openIntents, recoveredOutcome } from '../../../src/audit/recover.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { openTestWriter } from './support.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

const root = new URL('../../../', import.meta.url).pathname;
const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

/** A lease client whose network can be cut (the stall). */
function stallable(inner: LeaseClient): LeaseClient & { stalled: boolean } {
  const refuse = (): Promise<never> => Promise.reject(new Error('stalled (cut by the test)'));
  const client = {
    stalled: false,
    get: (ns: string, name: string) => (client.stalled ? refuse() : inner.get(ns, name)),
    create: (ns: string, lease: Parameters<LeaseClient['create']>[1]) =>
      client.stalled ? refuse() : inner.create(ns, lease),
    replace: (ns: string, name: string, lease: Parameters<LeaseClient['replace']>[2]) =>
      client.stalled ? refuse() : inner.replace(ns, name, lease),
  };
  return client;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('a stalled leader', () => {
  let cp: ControlPlane;
  let git: GitServer;
  // Stopped here too, so a failing assertion does not leave a renewing elector behind.
  const running: { stop(): Promise<void> }[] = [];
  before(async () => {
    cp = await sharedControlPlane();
    git = await startGitServer();
  });
  after(async () => {
    for (const item of running) await item.stop().catch(() => undefined);
    await git?.close();
  });

  it('records nothing once it lost the lease; the successor alone closes its intent', async () => {
    const url = git.createRepo('stalled');
    const kc = cp.kubeConfig('tollgate');
    const replica = async (identity: string, leases: LeaseClient) => {
      const elector = new LeaderElector({
        leases,
        namespace: 'tollgate-system',
        name: 'audit-stalled-leader',
        identity,
        timings,
      });
      const { writer, repo } = await openTestWriter(git, url, 'stalled', identity);
      writer.setFence(elector.fence);
      running.push(elector, { stop: () => writer.close().catch(() => undefined) });
      return { elector, writer, repo };
    };
    const netA = stallable(leaseClientFromKubeConfig(kc));
    const a = await replica('replica-a', netA);
    a.elector.start();
    await until(() => a.elector.isLeader(), 'replica-a leads');

    const sent = aDecision('Release', 'sent', 'stalled').obj();
    await a.writer.recordIntents([sent]);

    netA.stalled = true;
    const b = await replica('replica-b', leaseClientFromKubeConfig(kc));
    b.elector.start();
    await until(() => !a.elector.isLeader(), 'replica-a fenced');
    await until(() => b.elector.isLeader(), 'replica-b leads');
    // B's term start: reconcile, then close what is open (the pod state says: not applied).
    const source = await b.writer.reconcile();
    assert.ok(source);
    const open = await openIntents(source, 'stalled');
    assert.deepEqual(
      open.map((intent) => intent.id),
      [sent.id],
    );
    b.writer.record(open.map((intent) => recoveredOutcome(intent, { state: 'not-applied' }, 1)));
    await b.writer.flush();

    // A resumes (its network is back, B holds the lease): its late outcome and any new
    // intent are refused, and nothing of A's reaches the branch.
    netA.stalled = false;
    a.writer.record([outcomeOf(sent)]);
    await assert.rejects(a.writer.flush(), /not the leader/);
    await assert.rejects(
      a.writer.recordIntents([aDecision('Release', 'late', 'stalled').obj()]),
      /not the leader .* writes must not be sent/,
    );
    await a.elector.stop();
    await a.writer.close().catch(() => undefined);
    await b.elector.stop();
    await b.writer.close();

    const remote = await openAuditSource(url, 'tollgate/audit', { token: git.token });
    const history = await readAuditHistory(remote);
    remote.close();
    assert.deepEqual(
      history.flatMap((commit) =>
        commit.records.map(
          (record) => `${record.phase} ${record.target.name} ${record.outcome.result}`,
        ),
      ),
      ['intent sent pending', 'outcome sent cancelled'],
    );
    const verify = await new Promise<{ code: number; out: string }>((resolve) =>
      execFile(
        process.execPath,
        ['src/cli/main.ts', 'audit', 'verify', '--repo', url],
        { cwd: root, env: { ...process.env, TOLLGATE_GIT_TOKEN: git.token } },
        (error, stdout, stderr) =>
          resolve({
            code: error ? Number((error as { code?: number }).code) : 0,
            out: stdout + stderr,
          }),
      ),
    );
    assert.equal(verify.code, 0, verify.out);
  });
});
