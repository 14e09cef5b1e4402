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
