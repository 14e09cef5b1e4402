/**
 * A standby's leftovers reach Git without it leading again, on a real Git server. The
 * soak (seeds 3 and 4, 30 minutes) ended with 7,794 and 8,225 decisions in a standby's
 * clone: commits its earlier terms could not push (Git down, then the lease lost). Until
 * that process led again they reached no trail, and they go with the pod's emptyDir.
 *
 * Replica A (strict) leads: one intent and its outcome pushed; an outcome committed while
 * Git refuses pushes; then it loses the lease with a strict intent committed and not
 * pushed (its write never sent). Replica B leads and its recovery closes A's pushed open
 * intent from cluster state. Git comes back while A stays a standby: A pushes its
 * leftovers itself, planned against what B recorded (no second outcome), and closes the
 * intent that never reached Git as `cancelled` (never sent, in strict mode); `verify`
 * passes and nothing is left in A's clone.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import type { GitAuditWriter } from '../../../src/audit/writer.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { captureLogs, openTestWriter, successorRecovers } from './support.ts';

let server: GitServer;
before(async () => {
  server = await startGitServer();
});
after(async () => {
  await server.close();
});

const cluster = 'prod';

function writerOn(
  cacheDir: string,
  url: string,
  controller: string,
  logger = captureLogs().logger,
) {
  return openTestWriter(server, url, cluster, controller, {
    cacheDir,
    mode: 'strict',
    standbyPushDelayMs: 50,
    retry: { maxAttempts: 2, maxElapsedMs: 2_000, baseDelayMs: 5, maxDelayMs: 20 },
    logger,
  });
}

/** The writer's own count: the clone is not read while the writer may be rewriting it. */
async function untilPushed(writer: GitAuditWriter, what: string): Promise<void> {
  for (let i = 0; i < 600; i += 1) {
    if (writer.backlog === 0) return;
    await sleep(50);
  }
  assert.fail(`${what}: still ${writer.backlog} decisions unpushed after 30 s`);
}

describe("a standby's leftover audit commits", () => {
  it('are pushed by the standby itself once Git is back: planned against the leader, never-pushed strict intents closed as not sent', async () => {
    const url = server.createRepo('standby-push');
    const cacheA = mkdtempSync(join(tmpdir(), 'tollgate-standby-a-'));
    const logs = captureLogs();
    const { writer: a, repo: repoA } = await writerOn(cacheA, url, 'replica-a', logs.logger);
    let leading = true;
    a.setFence(() => leading);

    // A's term: one release pushed with its outcome; a second intent pushed.
    const done = aDecision('Release', 'done').obj();
    const pushedOpen = aDecision('Release', 'pushed-outcome-local').obj();
    await a.recordIntents([done, pushedOpen]);
    a.record([outcomeOf(done)]);
    await a.flush();

    // With Git refusing pushes, the lease is lost while the second intent's outcome and a
    // strict intent are committed in one cycle and not pushed: the fence closes the moment
    // the first of them moves A's branch, so no push is tried and the loop is told not to
    // send its write. (A strict intent asked while a refused push waits for its retry is
    // refused uncommitted: writer.test.ts.)
    server.refusePushes(503);
    const neverSent = aDecision('Release', 'never-sent').obj();
    const localTip = (): string =>
      readFileSync(join(repoA.gitdir, 'refs', 'heads', 'tollgate', 'audit'), 'utf8').trim();
    const tipBefore = localTip();
    a.setFence(() => leading && localTip() === tipBefore);
    a.record([outcomeOf(pushedOpen)]);
    const intent = a.recordIntents([neverSent]);
    await assert.rejects(a.flush(), /kept local, not pushed/);
    await assert.rejects(intent, /kept local, not pushed/);
    leading = false;
    assert.ok((await repoA.unpushed()).length >= 2, 'A holds leftovers');

    // B leads; its recovery closes A's pushed open intent from the cluster (gate removed).
    server.refusePushes(undefined);
    const cacheB = mkdtempSync(join(tmpdir(), 'tollgate-standby-b-'));
    const { writer: b } = await writerOn(cacheB, url, 'replica-b');
    b.setFence(() => true);
    assert.equal(
      await successorRecovers(
        b,
        cluster,
        [pushedOpen],
        [{ state: 'applied', detail: 'gate removed' }],
      ),
      1,
    );
    await b.close();

    // A stays a standby; with Git back it pushes its leftovers by itself.
    await untilPushed(a, 'the standby');
    await a.close({ flush: false });
    assert.equal((await repoA.unpushed()).length, 0, "nothing left in A's clone");

    const remote = await openAuditSource(url, 'tollgate/audit', { token: server.token });
    const history = await readAuditHistory(remote);
    remote.close();
    assert.deepEqual(verifyTrail(history).problems, [], 'verify passes');
    const records = history.flatMap((commit) => commit.records);
    const outcomesOf = (id: string) =>
      records.filter((r) => r.id === id && r.phase === 'outcome').map((r) => r.outcome.result);
    assert.deepEqual(outcomesOf(pushedOpen.id), ['succeeded'], "B's outcome is the one outcome");
    assert.deepEqual(outcomesOf(neverSent.id), ['cancelled'], 'the never-pushed intent is closed');
    const closing = records.find((r) => r.id === neverSent.id && r.phase === 'outcome');
    assert.match(
      closing?.outcome.result === 'cancelled' ? closing.outcome.message : '',
      /^not sent: its intent never reached Git while its term led/,
    );
    assert.ok(
      logs.lines.some((line) =>
        line.includes('a standby pushed the commits its earlier terms left unpushed'),
      ),
      'the standby push is logged',
    );
  });
});
