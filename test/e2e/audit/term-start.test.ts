/**
 * Term start on a fresh cache against a long audit branch on the real git server: the
 * clone is shallow (it fetches the recent commits, not the history), recovery reads back
 * only to the last checkpoint of open intents, deepening the clone when the checkpoint
 * lies deeper, and finds exactly the intents a read of the whole branch finds. The new
 * leader then pushes on top of the shallow clone, and `verify` over a full clone passes.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { intentsWithoutOutcome } from '../../../src/audit/recover.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { openIntentsDeepening, type GitAuditWriter } from '../../../src/audit/writer.ts';
import { openTestWriter } from './support.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

let server: GitServer;
let url: string;
const clock = new ManualClock(Date.UTC(2026, 10, 29, 7));

before(async () => {
  server = await startGitServer();
  url = server.createRepo('term-start');
});
after(() => server.close());

async function leader(
  name: string,
  options: { shallowDepth?: number; checkpointEvery?: number } = {},
) {
  const { writer, repo } = await openTestWriter(server, url, 'prod', name, {
    batch: { maxDecisions: 100, maxDelayMs: 1_000 },
    checkpointEvery: options.checkpointEvery ?? 8,
    clock,
    ...(options.shallowDepth ? { shallowDepth: options.shallowDepth } : {}),
  });
  return { writer, repo };
}

/** One intent commit and (for two of three) one outcome commit per round. */
async function rounds(writer: GitAuditWriter, from: number, count: number): Promise<Decision[]> {
  const left: Decision[] = [];
  for (let index = from; index < from + count; index += 1) {
    const intent = aDecision('Release', `p${index}`).id(`gate-release:Release:p${index}`).obj();
    clock.advance(10_000);
    await writer.recordIntents([intent]);
    if (index % 3 === 0) left.push(intent);
    else writer.record([outcomeOf(intent)]);
    await writer.flush();
  }
  return left;
}

test('a new leader on a fresh cache fetches only recent history, recovers the open intents of the whole branch, and writes on', async () => {
  const first = await leader('c0');
  await first.writer.reconcile();
  const left = await rounds(first.writer, 0, 40);
  await first.writer.close();

  const second = await leader('c1', { shallowDepth: 4, checkpointEvery: 2 });
  const stats = { commits: 0 };
  await second.writer.reconcile();
  const open = await openIntentsDeepening(second.repo, 'prod', stats);
  assert.ok(second.repo.shallowCommits().length > 0, 'the clone is shallow');
  assert.ok(stats.commits <= 9, `recovery read ${stats.commits} commits`);
  // Recovery read further back than checkpointEvery: the term's first cycle writes a
  // checkpoint, and pushes it though it carries no decision.
  const before = await second.repo.localTip();
  await second.writer.flush();
  assert.notEqual(await second.repo.localTip(), before, 'a checkpoint was committed');
  assert.deepEqual(await second.repo.unpushed(), []);

  const full = await openAuditSource(url, 'tollgate/audit', { token: server.token });
  try {
    const whole = intentsWithoutOutcome(await readAuditHistory(full), 'prod');
    assert.deepEqual(
      open.map((intent) => intent.id),
      whole.map((intent) => intent.id),
    );
    assert.deepEqual(
      whole.map((intent) => intent.id),
      left.map((intent) => intent.id),
    );
  } finally {
    full.close();
  }

  // The new leader closes them and writes on, on top of its shallow clone.
  second.writer.record(open.map((intent) => ({ ...outcomeOf(intent), at: clock.now() })));
  await rounds(second.writer, 40, 3);
  await second.writer.close();
  const after = await openAuditSource(url, 'tollgate/audit', { token: server.token });
  try {
    const report = verifyTrail(await readAuditHistory(after), {
      graceMs: Number.MAX_SAFE_INTEGER,
      now: clock.now(),
    });
    assert.deepEqual(report.problems, []);
    assert.ok(report.commits > 60);
  } finally {
    after.close();
  }
});
