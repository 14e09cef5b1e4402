/**
 * A checkpoint lists the cluster's open intents as the writer knows them, and a writer
 * knows them only for the term whose start read them from the branch. The soak's seed 29
 * (30 minutes) found replica-b, a standby, pushing what its earlier term had left
 * unpushed (its clone now at the remote tip, on top of replica-a's 11 open intents), then
 * leading again: before its term start read the trail, a cycle of its writer wrote a
 * checkpoint from the open intents of its own earlier term ("0 open intents"). Its
 * recovery read back to that checkpoint and found nothing open, and the 11 released pods
 * never got an outcome (`audit verify` exit 1).
 *
 * Here on a real Git server: replica-a's term ends in a Git outage with a record kept
 * local; replica-b leads and pushes an intent it never closes (its write sent, then the
 * lease lost; no checkpoint of its own after it); replica-a, a standby, pushes its
 * leftover on top; then replica-a leads again and a cycle runs before its term start.
 * Its recovery must still find replica-b's intent open and close it, and `verify` pass.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gitServerPerFile } from '../../support/git-server.ts';
import { openTestWriter, successorRecovers } from './support.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { ManualTimers } from '../../support/manual-timers.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

const server = gitServerPerFile();
const cluster = 'prod';
const standbyPushDelayMs = 1_000;

test("a replica that leads again checkpoints no open intents of its earlier term: the other leader's open intent is recovered", async () => {
  const url = server.createRepo('checkpoint-term');
  const timers = new ManualTimers(new ManualClock(Date.now()));
  const { writer: a, repo: repoA } = await openTestWriter(server, url, cluster, 'replica-a', {
    mode: 'strict',
    checkpointEvery: 1,
    standbyPushDelayMs,
    retry: { maxAttempts: 2, maxElapsedMs: 2_000, baseDelayMs: 5, maxDelayMs: 20 },
    clock: timers.clock,
    timers,
  });
  let termOfA: string | undefined = 'replica-a/1';
  const leading = (): boolean => termOfA !== undefined;
  a.setFence(leading, () => termOfA);

  // Term a/1: one release pushed with its outcome; the term ends in a Git outage with a
  // hold record committed and kept local.
  await a.reconcile();
  const first = aDecision('Release', 'first').obj();
  await a.recordIntents([first]);
  a.record([outcomeOf(first)]);
  await a.flush();
  server.refusePushes(503);
  const localTip = (): string =>
    readFileSync(join(repoA.gitdir, 'refs', 'heads', 'tollgate', 'audit'), 'utf8').trim();
  const tipBefore = localTip();
  a.setFence(
    () => leading() && localTip() === tipBefore,
    () => termOfA,
  );
  a.record([aDecision('Hold', 'held-in-a1').obj()]);
  await assert.rejects(a.flush(), /kept local, not pushed/);
  termOfA = undefined;
  a.setFence(leading, () => termOfA);
  server.refusePushes(undefined);

  // replica-b's term: an intent pushed, its write sent, the lease lost before its outcome
  // (its checkpoints far apart: none follows the intent).
  const { writer: b } = await openTestWriter(server, url, cluster, 'replica-b', {
    checkpointEvery: 200,
  });
  await b.reconcile();
  const leftOpen = aDecision('Release', 'left-open').obj();
  await b.recordIntents([leftOpen]);
  await b.close({ flush: false });

  // replica-a, a standby, pushes its leftover on top of replica-b's intent.
  await timers.advance(standbyPushDelayMs);
  for (let i = 0; i < 600 && a.backlog > 0; i += 1) await sleep(50);
  assert.equal(a.backlog, 0, "replica-a's standby push landed");

  // Term a/3: a cycle runs before the term start reads the branch.
  termOfA = 'replica-a/3';
  await a.flush();
  const recovered = await successorRecovers(a, cluster, [leftOpen], [{ state: 'unknown' }]);
  await a.close();

  assert.equal(
    recovered,
    1,
    "replica-b's open intent is found and closed at replica-a's term start",
  );
  const source = await openAuditSource(url, 'tollgate/audit', { token: server.token });
  try {
    assert.deepEqual(verifyTrail(await readAuditHistory(source)).problems, []);
  } finally {
    source.close();
  }
});
