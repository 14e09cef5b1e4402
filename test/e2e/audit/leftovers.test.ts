/**
 * Leftover commits after another leader's recovery (soak finding 1), on a real Git server:
 * replica A pushed its intents, then could not push its outcome commits (pushes refused:
 * Git down for it) and was killed with them in its cache; replica B led and its recovery
 * closed A's open intents from cluster state; then A leads again on the same cache. A's
 * term start must replay only what the remote does not already close: one outcome per
 * intent (`verify` passes), nothing true lost (an outcome that contradicts recovery's
 * becomes a correction record), and the drop is logged.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitServerPerFile } from '../../support/git-server.ts';
import { openAuditSource, readAuditHistory, repoSource } from '../../../src/audit/reader.ts';
import type { IntentState } from '../../../src/audit/recover.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { Decision, Outcome } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { captureLogs, successorRecovers } from './support.ts';

const server = gitServerPerFile();

const cluster = 'prod';

/** What A learned from the API, what B's recovery saw in the cluster, and what the trail must say. */
const rows: {
  pod: string;
  a: Outcome;
  b: IntentState;
  outcome: string;
  correction?: RegExp;
}[] = [
  {
    pod: 'released-but-recovery-saw-it-unchanged',
    a: { result: 'succeeded', resourceVersion: '9' },
    b: { state: 'not-applied', detail: 'resourceVersion 1 unchanged since the decision' },
    outcome: 'cancelled',
    correction:
      /^correction: the outcome recorded for .* is cancelled \(not sent before restart .*\), from recovery's reading of the cluster; the write's outcome was succeeded \(the API's answer to the write/,
  },
  {
    pod: 'released-and-recovered-released',
    a: { result: 'succeeded' },
    b: { state: 'applied', detail: 'gate removed' },
    outcome: 'succeeded',
  },
  {
    pod: 'conflict-but-pod-gone',
    a: { result: 'conflict', message: '409' },
    b: { state: 'gone' },
    outcome: 'unknown',
    correction:
      /^correction: the outcome recorded for .* is unknown \(pod gone before recovery.*; the write's outcome was conflict \(409\) \(the API's answer to the write/,
  },
  {
    pod: 'conflict-and-recovered-not-sent',
    a: { result: 'conflict', message: '409' },
    b: { state: 'not-applied' },
    outcome: 'cancelled',
  },
];

function writerOn(
  cacheDir: string,
  url: string,
  controller: string,
  logger = captureLogs().logger,
) {
  return GitAuditWriter.open({
    url,
    token: server.token,
    cacheDir,
    cluster,
    controller,
    mode: 'async',
    batch: { maxDecisions: 100, maxDelayMs: 20 },
    leftoversAtTermStart: true,
    retry: { maxAttempts: 3, maxElapsedMs: 5_000, baseDelayMs: 5, maxDelayMs: 20 },
    logger,
  });
}

describe('leftover audit commits after another leader closed their intents', () => {
  it('are replayed only where the remote does not close them: one outcome per intent, corrections for contradictions', async () => {
    const url = server.createRepo('leftovers');
    const cacheA = mkdtempSync(join(tmpdir(), 'tollgate-leftovers-a-'));
    const intents = rows.map((row) => aDecision('Release', row.pod).obj());
    // An intent and its outcome that A alone knows (both left unpushed): replayed as they are.
    const onlyA = aDecision('Release', 'only-in-a').obj();

    // A's term: intents pushed; then Git refuses A's pushes; outcomes stay in A's cache.
    const { writer: a } = await writerOn(cacheA, url, 'replica-a');
    await a.recordIntents(intents);
    await a.flush();
    server.refusePushes(503);
    await a.recordIntents([onlyA]);
    a.record([...rows.map((row, i) => outcomeOf(intents[i] as Decision, row.a)), outcomeOf(onlyA)]);
    await assert.rejects(a.flush());
    // A is killed here: that writer records and pushes nothing more (its fence stays closed).
    a.setFence(() => false);
    await a.flush().catch(() => undefined); // after any cycle already under way
    server.refusePushes(undefined);

    // B's term: its recovery closes A's pushed intents from what the cluster shows.
    const cacheB = mkdtempSync(join(tmpdir(), 'tollgate-leftovers-b-'));
    const { writer: b } = await writerOn(cacheB, url, 'replica-b');
    assert.equal(
      await successorRecovers(
        b,
        cluster,
        intents,
        rows.map((row) => row.b),
      ),
      rows.length,
    );
    await b.close();

    // A leads again on the same cache: its term start reconciles the leftovers.
    const logs = captureLogs();
    const { writer: again, repo } = await writerOn(cacheA, url, 'replica-a', logs.logger);
    await again.reconcile();
    await again.close();
    assert.equal((await repo.unpushed()).length, 0, 'nothing left unpushed');

    const remote = await openAuditSource(url, 'tollgate/audit', { token: server.token });
    const history = await readAuditHistory(remote);
    remote.close();
    const report = verifyTrail(history);
    assert.deepEqual(report.problems, []);
    const records = history.flatMap((commit) => commit.records);
    for (const [i, row] of rows.entries()) {
      const id = (intents[i] as Decision).id;
      const outcomes = records.filter((r) => r.id === id && r.phase === 'outcome');
      assert.deepEqual(
        outcomes.map((r) => r.outcome.result),
        [row.outcome],
        `${row.pod}: exactly one outcome, the remote's`,
      );
      const corrections = records.filter(
        (r) => r.phase === 'record' && r.id === `${id}:correction`,
      );
      if (row.correction) {
        assert.equal(corrections.length, 1, `${row.pod}: one correction`);
        assert.match(corrections[0]?.reason ?? '', row.correction);
      } else assert.equal(corrections.length, 0, `${row.pod}: no correction`);
    }
    assert.deepEqual(
      records.filter((r) => r.id === onlyA.id).map((r) => r.phase),
      ['intent', 'outcome'],
      'what only A knew is replayed',
    );
    const dropped = logs.lines.find((line) => line.includes('leftover audit records dropped'));
    assert.ok(dropped, 'the drop is logged');
    assert.match(dropped, /"dropped":4/);

    // The clone A reads from holds the same trail (no second copy of the dropped outcomes).
    const local = await readAuditHistory(await repoSource(repo));
    assert.equal(local.at(-1)?.oid, history.at(-1)?.oid);
  });
});
