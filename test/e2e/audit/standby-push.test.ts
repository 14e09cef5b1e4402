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
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gitServerPerFile } from '../../support/git-server.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import type { GitAuditWriter } from '../../../src/audit/writer.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { ManualTimers } from '../../support/manual-timers.ts';
import { captureLogs, openTestWriter, successorRecovers } from './support.ts';

const server = gitServerPerFile();

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

/** Standby pushes that failed, by their log line. */
const failedStandbyPushesIn = (lines: readonly string[]): number =>
  lines.filter((line) => line.includes('a standby could not push')).length;

/** Waits (real time, at most 30 s) until `done`, else fails with `what`. */
async function until(what: string, done: () => boolean): Promise<void> {
  for (let i = 0; i < 600 && !done(); i += 1) await sleep(50);
  assert.ok(done(), what);
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
  it('start over after each term: a standby whose earlier standby pushes failed pushes within the first delay after its next term, not at the grown one', async () => {
    // Seed 14 (30 minutes, main 8e62e9f): replica-a's standby pushes failed while Git was
    // down, doubling their delay to 240 s; the timer stayed armed while replica-a led
    // again, and when it lost that lease (Git up) its 284 decisions waited for that old
    // timer, past the end of the soak.
    const url = server.createRepo('standby-backoff');
    const cache = mkdtempSync(join(tmpdir(), 'tollgate-standby-backoff-'));
    const timers = new ManualTimers(new ManualClock(Date.now()));
    const logs = captureLogs();
    const firstDelayMs = 1_000;
    const { writer: a, repo } = await openTestWriter(server, url, cluster, 'replica-a', {
      cacheDir: cache,
      mode: 'strict',
      standbyPushDelayMs: firstDelayMs,
      retry: { maxAttempts: 2, maxElapsedMs: 2_000, baseDelayMs: 5, maxDelayMs: 20 },
      logger: logs.logger,
      clock: timers.clock,
      timers,
    });
    const localTip = (): string =>
      readFileSync(join(repo.gitdir, 'refs', 'heads', 'tollgate', 'audit'), 'utf8').trim();
    const failedStandbyPushes = (): number => failedStandbyPushesIn(logs.lines);
    let leading = true;
    /** A term that ends while Git refuses pushes, an outcome committed and not pushed. */
    const termEndsInOutage = async (name: string): Promise<void> => {
      leading = true;
      a.setFence(() => leading);
      const release = aDecision('Release', name).obj();
      await a.recordIntents([release]);
      server.refusePushes(503);
      const tipBefore = localTip();
      a.setFence(() => leading && localTip() === tipBefore);
      a.record([outcomeOf(release)]);
      await assert.rejects(a.flush(), /kept local, not pushed/);
      leading = false;
      assert.ok(a.backlog > 0, `${name}: the outcome is kept local`);
    };

    // Term 1 ends in an outage; two standby pushes fail while Git stays down.
    await termEndsInOutage('first-term');
    await timers.advance(firstDelayMs);
    await until('a first standby push fails', () => failedStandbyPushes() === 1);
    await timers.advance(2 * firstDelayMs);
    await until('a second standby push fails', () => failedStandbyPushes() === 2);

    // Term 2: Git is back, the term start pushes everything.
    server.refusePushes(undefined);
    leading = true;
    a.setFence(() => leading);
    await a.reconcile();
    await a.flush();
    assert.equal(a.backlog, 0, 'term 2 pushed the backlog');

    // Term 2 ends in a short outage; Git is back at once. The standby pushes after the
    // first delay, as after any lease loss.
    await termEndsInOutage('second-term');
    server.refusePushes(undefined);
    await timers.advance(firstDelayMs);
    await until(
      `the standby pushed its second term's leftovers ${firstDelayMs} ms after losing the lease (backlog ${a.backlog}; pending timers ${timers.pending.join(', ')} ms)`,
      () => a.backlog === 0,
    );
    await a.close({ flush: false });
    assert.equal((await repo.unpushed()).length, 0, 'nothing left in the clone');
  });
  it("a strict standby whose pushes keep failing retries at least every 30 s, as a strict leader does, so its leftovers reach Git within 30 s of Git's return", async () => {
    // Seed 21 (30 minutes, main 00312d1): replica-b's standby pushes failed (refused as
    // not a fast-forward while the leader pushed, then Git down), doubling their delay to
    // 240 s; Git came back and the soak ended with its 113 decisions still local.
    const url = server.createRepo('standby-ceiling');
    const cache = mkdtempSync(join(tmpdir(), 'tollgate-standby-ceiling-'));
    const timers = new ManualTimers(new ManualClock(Date.now()));
    const logs = captureLogs();
    const { writer: a, repo } = await openTestWriter(server, url, cluster, 'replica-a', {
      cacheDir: cache,
      mode: 'strict',
      standbyPushDelayMs: 1_000,
      retry: { maxAttempts: 2, maxElapsedMs: 2_000, baseDelayMs: 5, maxDelayMs: 20 },
      logger: logs.logger,
      clock: timers.clock,
      timers,
    });
    const failedStandbyPushes = (): number => failedStandbyPushesIn(logs.lines);
    let leading = true;
    a.setFence(() => leading);
    const release = aDecision('Release', 'outage-term').obj();
    await a.recordIntents([release]);
    server.refusePushes(503);
    a.record([outcomeOf(release)]);
    await assert.rejects(a.flush());
    leading = false;
    assert.ok(a.backlog > 0, 'the outcome is kept local');

    // Git stays down for 8 rounds of 30 s: a push is tried in every round (the delay
    // doubles 1, 2, 4, 8, 16 s and then stays at 30 s).
    for (let round = 1; round <= 8; round += 1) {
      await timers.advance(30_000);
      await until(
        `round ${round} of 30 s: a standby push is tried and fails (${failedStandbyPushes()} so far; pending timers ${timers.pending.join(', ')} ms)`,
        () => failedStandbyPushes() >= round,
      );
    }
    server.refusePushes(undefined);
    await timers.advance(30_000);
    await until(
      `pushed within 30 s of Git's return (backlog ${a.backlog}; pending timers ${timers.pending.join(', ')} ms)`,
      () => a.backlog === 0,
    );
    await a.close({ flush: false });
    assert.equal((await repo.unpushed()).length, 0, 'nothing left in the clone');
  });
});
