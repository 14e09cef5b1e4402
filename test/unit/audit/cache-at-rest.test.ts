/**
 * Issue 24: a leader at rest kept the audit clone's pack indexes in memory. Soak seed 25's
 * leader held 69 MB of live heap for its quiet minutes after the chaos (45-47 MB during
 * it); heap snapshots (seed 102) found isomorphic-git's PackfileCache in the writer's
 * AuditRepo. The writer dropped that cache only at the end of a commit-and-push cycle,
 * so a read of the clone outside one (the open's fetch, a term start's reconcile, a
 * standby's push) left every pack it read in memory until the next cycle, which a quiet
 * leader may not run for hours.
 *
 * Over a real Git server: a first writer pushes a trail, a second clones it (the fetch
 * writes a pack) and reads it each of those ways; after each, the clone keeps no pack.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openIntents } from '../../../src/audit/recover.ts';
import type { AuditRepo } from '../../../src/audit/repo.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { packfileCache } from '../../../src/lib/git-pack-cache.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { eventually } from '../../support/eventually.ts';
import { gitServerPerFile } from '../../support/git-server.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const server = gitServerPerFile();

const cluster = 'prod';
const standbyPushDelayMs = 1_000;

/** Packs isomorphic-git holds for the clone right now. */
const packsHeld = (repo: AuditRepo): number => packfileCache(repo.cache)?.size ?? 0;

function openWriter(url: string, controller: string, timers: ManualTimers) {
  return GitAuditWriter.open({
    url,
    token: server.token,
    cacheDir: mkdtempSync(join(tmpdir(), `tollgate-cache-at-rest-${controller}-`)),
    cluster,
    controller,
    mode: 'strict',
    batch: { maxDecisions: 100, maxDelayMs: 20 },
    leftoversAtTermStart: true,
    standbyPushDelayMs,
    retry: { maxAttempts: 1, maxElapsedMs: 1_000, baseDelayMs: 5, maxDelayMs: 5 },
    clock: timers.clock,
    timers,
  });
}

/** A trail of `rounds` releases, each intent and outcome pushed, then one intent left open. */
async function pushedTrail(name: string, rounds: number): Promise<string> {
  const url = server.createRepo(name);
  const timers = new ManualTimers(new ManualClock(Date.now()));
  const { writer } = await openWriter(url, 'first', timers);
  writer.setFence(() => true);
  for (let round = 0; round < rounds; round += 1) {
    const intent = aDecision('Release', `${name}-${round}`).obj();
    await writer.recordIntents([intent]);
    writer.record([outcomeOf(intent)]);
    await writer.flush();
  }
  await writer.recordIntents([aDecision('Release', `${name}-open`).obj()]);
  await writer.close();
  return url;
}

test('opening a writer on a fetched trail keeps no pack of its clone in memory', async () => {
  const url = await pushedTrail('cache-open', 8);
  const { writer, repo } = await openWriter(url, 'second', new ManualTimers());
  assert.ok(await repo.localTip(), 'the clone holds the trail');
  assert.equal(packsHeld(repo), 0, 'packs held after the open');
  await writer.close({ flush: false });
});

test("a term start's reconcile keeps no pack of the clone once it returns; recovery reads through the source it returned", async () => {
  const url = await pushedTrail('cache-reconcile', 8);
  const { writer, repo } = await openWriter(url, 'second', new ManualTimers());
  writer.setFence(() => true);
  const source = await writer.reconcile();
  assert.ok(source, 'reconcile returns the clone to recover from');
  assert.equal(packsHeld(repo), 0, 'packs held after reconcile');
  assert.deepEqual(
    (await openIntents(source, cluster)).map((intent) => intent.id),
    [aDecision('Release', 'cache-reconcile-open').obj().id],
    'recovery reads the open intent through the source',
  );
  source.close();
  await writer.close({ flush: false });
});

test("a standby's push of what its term left unpushed keeps no pack of the clone once done", async () => {
  const url = await pushedTrail('cache-standby', 8);
  const timers = new ManualTimers(new ManualClock(Date.now()));
  const { writer, repo } = await openWriter(url, 'second', timers);
  let leading = true;
  writer.setFence(() => leading);
  await writer.reconcile();
  // Git refuses pushes as the lease is lost: an outcome is committed and kept local.
  const intent = aDecision('Release', 'standby-leftover').obj();
  await writer.recordIntents([intent]);
  server.refusePushes(503);
  const localTip = (): string =>
    readFileSync(join(repo.gitdir, 'refs', 'heads', 'tollgate', 'audit'), 'utf8').trim();
  const tipBefore = localTip();
  writer.setFence(() => leading && localTip() === tipBefore);
  writer.record([outcomeOf(intent)]);
  await assert.rejects(writer.flush(), /kept local, not pushed/);
  leading = false;
  assert.ok(writer.backlog > 0, 'the outcome is kept local');

  // Git is back; the standby pushes its leftover itself after its delay.
  server.refusePushes(undefined);
  await timers.advance(standbyPushDelayMs);
  // The push is real I/O to the Git server: waited for by its result, at most 30 s.
  await eventually(
    'the standby to push its leftover (backlog 0)',
    async () => writer.backlog === 0,
    {
      describe: () => `backlog ${writer.backlog}`,
    },
  );
  assert.equal(packsHeld(repo), 0, 'packs held after the standby push');
  await writer.close({ flush: false });
});
