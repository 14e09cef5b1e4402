/**
 * Checkpoints of open intents on the audit branch: term start reads back only to the last
 * one, so what it reads does not grow with the history; the answer is the one a read of
 * the whole branch gives; `audit verify` checks each checkpoint against the history.
 * A real bare repository on disk, written through the real writer (no remote: pushes are
 * the e2e tests' part).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AuditRepo } from '../../../src/audit/repo.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { intentsWithoutOutcome, openIntents } from '../../../src/audit/recover.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { checkpointPath, serializeCheckpoint } from '../../../src/audit/checkpoint.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import type { ManualClock } from '../../../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { localClone } from '../../support/audit-clone.ts';

interface Trail {
  readonly dir: string;
  readonly repo: AuditRepo;
  readonly writer: GitAuditWriter;
  readonly clock: ManualClock;
}

/** A writer on a local bare clone (pushes succeed without a remote), checkpointing every `every` commits. */
async function aTrail(every: number): Promise<Trail> {
  const { dir, clock, repo, store } = await localClone();
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'c0',
    batch: { maxDecisions: 100, maxDelayMs: 1_000 },
    checkpointEvery: every,
    clock,
  });
  writer.seedOpenIntents([]);
  return { dir, repo, writer, clock };
}

/**
 * `rounds` rounds of one intent commit and one outcome commit; every third intent gets
 * no outcome (it stays open), so the checkpoints have something to carry.
 */
async function writeRounds(trail: Trail, from: number, rounds: number): Promise<Decision[]> {
  const left: Decision[] = [];
  for (let index = from; index < from + rounds; index += 1) {
    const intent = aDecision('Release', `p${index}`).id(`gate-release:Release:p${index}`).obj();
    trail.clock.advance(10_000);
    await trail.writer.recordIntents([intent]);
    trail.clock.advance(10_000);
    if (index % 3 === 0) left.push(intent);
    else trail.writer.record([outcomeOf(intent)]);
    await trail.writer.flush();
  }
  return left;
}

async function termStart(trail: Trail): Promise<{ open: string[]; commits: number }> {
  const stats = { commits: 0 };
  const source = await openAuditSource(trail.dir, 'tollgate/audit');
  const open = await openIntents(source, 'prod', { stats });
  return { open: open.map((intent) => intent.id), commits: stats.commits };
}

test('term start reads the trail back only to the last checkpoint: what it reads does not grow with the history', async () => {
  const trail = await aTrail(5);
  await writeRounds(trail, 0, 15);
  const shorter = await termStart(trail);
  await writeRounds(trail, 15, 30);
  const longer = await termStart(trail);
  assert.ok(shorter.commits <= 6, `read ${shorter.commits} commits`);
  assert.ok(longer.commits <= 6, `read ${longer.commits} commits`);
});

test('the open intents from the last checkpoint and the commits after it are those of a read of the whole branch', async () => {
  const trail = await aTrail(7);
  const left = await writeRounds(trail, 0, 25);
  // An intent the checkpoint lists is closed after it: no longer open.
  const closedLate = left[0] as Decision;
  trail.writer.record([outcomeOf(closedLate)]);
  await trail.writer.flush();
  const source = await openAuditSource(trail.dir, 'tollgate/audit');
  const whole = intentsWithoutOutcome(await readAuditHistory(source), 'prod');
  const { open } = await termStart(trail);
  assert.deepEqual(
    open,
    whole.map((intent) => intent.id),
  );
  assert.deepEqual(
    open,
    left.slice(1).map((intent) => intent.id),
  );
});

test('audit verify checks every checkpoint against the history: a true trail passes, a checkpoint that omits an open intent is named', async () => {
  const trail = await aTrail(5);
  const left = await writeRounds(trail, 0, 12);
  const source = await openAuditSource(trail.dir, 'tollgate/audit');
  const history = await readAuditHistory(source);
  assert.ok(history.filter((commit) => commit.checkpoint).length >= 3, 'checkpoints were written');
  const honest = verifyTrail(history, { graceMs: Number.MAX_SAFE_INTEGER, now: trail.clock.now() });
  assert.deepEqual(honest.problems, []);

  // A checkpoint that lost an open intent (written by hand, as a tamperer would).
  trail.clock.advance(10_000);
  const path = checkpointPath('audit/prod/2026/11/29/09/T090000Z-c0-999999.jsonl');
  const { oid } = await trail.repo.commitFile(
    path,
    serializeCheckpoint('prod', left.slice(1)),
    'checkpoint: forged\n',
  );
  const forged = verifyTrail(
    await readAuditHistory(source.tip ? { ...source, tip: oid } : source),
    {
      graceMs: Number.MAX_SAFE_INTEGER,
      now: trail.clock.now(),
    },
  );
  assert.deepEqual(
    forged.problems.map((p) => [p.check, p.commit, p.record]),
    [['checkpoint', oid, path]],
  );
  assert.match(
    forged.problems[0]?.message ?? '',
    /omits 1 open intent\(s\) \(gate-release:Release:p0\)/,
  );
});

/**
 * Term start seeds the writer's open intents from a read of its clone. A recovery retry
 * runs it while the loops already record: an outcome committed during that read must not
 * be lost when the read's result replaces the open intents (soak seed 1: a checkpoint
 * listed 10 intents closed two commits before it, and the next leader's recovery, reading
 * from that checkpoint, gave each a second outcome). The read is held, through the real
 * repository, right after it took its tip; the outcome is recorded meanwhile.
 */
test('an outcome committed while term start reads the open intents stays closed in the next checkpoint', async () => {
  const { dir, clock, repo } = await localClone();
  // The clone is its own remote: nothing to fetch, every commit counts as pushed.
  repo.sync = async () => undefined;
  repo.push = async () => 0;
  // reconcile asks for unpushed commits twice: before its flush, and right before it
  // reads the open intents; the next tip taken after the second is the read's.
  let unpushedCalls = 0;
  let armed = false;
  repo.unpushed = async () => {
    unpushedCalls += 1;
    if (unpushedCalls === 2) armed = true;
    return [];
  };
  let reached!: () => void;
  let release!: () => void;
  const readReached = new Promise<void>((resolve) => (reached = resolve));
  const readReleased = new Promise<void>((resolve) => (release = resolve));
  const localTip = repo.localTip.bind(repo);
  repo.localTip = async () => {
    const tip = await localTip();
    if (armed) {
      armed = false;
      reached();
      await readReleased;
    }
    return tip;
  };
  const writer = new GitAuditWriter({
    store: repo,
    cluster: 'prod',
    controller: 'c0',
    batch: { maxDecisions: 100, maxDelayMs: 1_000 },
    checkpointEvery: 1,
    clock,
  });
  writer.seedOpenIntents([]);
  const intent = aDecision('Release', 'p1').id('gate-release:Release:p1').obj();
  await writer.recordIntents([intent]);

  const reconciling = writer.reconcile();
  await readReached;
  clock.advance(10_000);
  writer.record([outcomeOf(intent)]);
  const flushed = writer.flush();
  // Without serialising, the flush commits the outcome now; with it, it waits for the read.
  await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, 2_000))]);
  release();
  await reconciling;
  await flushed;
  clock.advance(10_000);
  writer.record([aDecision('Hold', 'p2').id('gate-release:Hold:p2').obj()]);
  await writer.flush();

  const history = await readAuditHistory(await openAuditSource(dir, 'tollgate/audit'));
  const report = verifyTrail(history, { graceMs: Number.MAX_SAFE_INTEGER, now: clock.now() });
  assert.deepEqual(
    report.problems.map((p) => `${p.check}: ${p.message}`),
    [],
  );
  assert.deepEqual(
    (await openIntents(await openAuditSource(dir, 'tollgate/audit'), 'prod')).map((i) => i.id),
    [],
  );
});

test("after a term start's reconcile, the writer's open intents stand as a read of the trail would give them, as commits land", async () => {
  const trail = await aTrail(4);
  await writeRounds(trail, 0, 10);
  await trail.writer.reconcile();
  const asRead = async (): Promise<string[]> => (await termStart(trail)).open;
  assert.deepEqual(
    trail.writer.termState()?.open.map((d) => d.id),
    await asRead(),
  );
  const left = await writeRounds(trail, 10, 7);
  assert.ok(left.length > 0, 'the rounds leave intents open');
  assert.deepEqual(
    trail.writer.termState()?.open.map((d) => d.id),
    await asRead(),
  );
});

test('before any reconcile seeded them, the writer offers no term state (recovery reads the trail)', async () => {
  const { store, clock } = await localClone();
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'c0',
    batch: { maxDecisions: 100, maxDelayMs: 1_000 },
    clock,
  });
  assert.equal(writer.termState(), undefined);
});
