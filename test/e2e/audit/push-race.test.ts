/**
 * Two writers racing on one branch (the soak's `audit-push-race`: a second writer's push
 * was refused as not a fast-forward 8 times in 29.6 s with Git up, under load 15 while
 * the leader pushed). Is a refused push retried on a stale remote tip? Counted on a real
 * Git server, no timing: writer S commits, then writer L pushes a commit before S's
 * attempts (the first, and right after S's re-reads of the remote, so the order is
 * fixed). If S re-reads the remote after every refusal, it is refused exactly once per
 * push L landed in its way and its next attempt lands; a stale tip would be refused again
 * with L idle. A push of L during S's backoff, before S re-reads, is no refusal at all.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { commitMessage } from '../../../src/audit/message.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { auditFilePath } from '../../../src/audit/writer.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aDecision } from '../../builders/decision.ts';
import { gitServerForFile } from '../security/support.ts';

const branch = 'tollgate/audit';
const git = gitServerForFile('tollgate-audit-push-race-');
const clock = new ManualClock(Date.UTC(2026, 11, 2, 4, 0, 0));

/** A clone whose `afterFetch` runs after each of its reads of the remote. */
class RacedRepo extends AuditRepo {
  afterFetch: (() => Promise<void>) | undefined;
  override async fetch(): Promise<string | undefined> {
    const tip = await super.fetch();
    await this.afterFetch?.();
    return tip;
  }
}

async function cloneOf(url: string, sleep?: () => Promise<void>): Promise<RacedRepo> {
  const repo = new RacedRepo({
    dir: git.tempDir(),
    url,
    branch,
    token: git.server().token,
    author: { name: 'tollgate', email: 'tollgate@tollgate.invalid' },
    clock,
    retry: { maxAttempts: 8, maxElapsedMs: 60_000, baseDelayMs: 1, maxDelayMs: 1 },
    ...(sleep ? { sleep } : {}),
  });
  await repo.open();
  await repo.fetch();
  return repo;
}

let sequence = 0;
async function commitOne(repo: AuditRepo, cluster: string, controller: string): Promise<void> {
  sequence += 1;
  clock.advance(1_000);
  const decision = aDecision('Hold', `${controller}-${sequence}`, cluster).recorded().obj();
  await repo.commitFile(
    auditFilePath(cluster, controller, clock.now(), sequence),
    serializeBatch([decision]),
    commitMessage([decision], { batch: 'records', controller, cluster }),
  );
}

async function refusals(): Promise<number> {
  const line = (await registry.metrics())
    .split('\n')
    .find((item) => item.startsWith('tollgate_audit_push_failures_total{reason="rejected"}'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('a push refused because another writer pushed first', () => {
  for (const inTheWay of [1, 3]) {
    it(`is refused once per push that landed in its way (${inTheWay}), then lands on the fresh tip`, async () => {
      const url = git.server().createRepo(`race-${inTheWay}`);
      const leader = await cloneOf(url);
      await commitOne(leader, 'prod', 'leader');
      await leader.push();
      let sleeps = 0;
      let fetches = 0;
      const second = await cloneOf(url, async () => {
        sleeps += 1;
        // During S's backoff, before it re-reads the remote: not in S's way.
        await commitOne(leader, 'prod', 'leader');
        await leader.push();
      });
      // L pushes before S's first attempt (below) and right after S's next `inTheWay - 1`
      // re-reads of the remote; then L pushes only during S's backoff.
      second.afterFetch = async () => {
        fetches += 1;
        if (fetches < inTheWay) {
          await commitOne(leader, 'prod', 'leader');
          await leader.push();
        }
      };
      await commitOne(second, 'other', 'second');
      await commitOne(leader, 'prod', 'leader');
      await leader.push();

      const before = await refusals();
      await second.push();
      assert.equal((await refusals()) - before, inTheWay, 'refusals of this push');
      assert.equal(sleeps, inTheWay, 'one backoff per refusal, none after it landed');

      const source = await openAuditSource(url, branch, { token: git.server().token });
      const history = await readAuditHistory(source);
      source.close();
      // L: its first, the one before S's first attempt, one per backoff and one per re-read in S's way.
      assert.equal(history.length, 2 + 2 * inTheWay, 'every commit of both landed once');
    });
  }
});
