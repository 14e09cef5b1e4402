/**
 * A leader's push that lands after its successor's recovery (soak seed 3, 30 min: 9
 * Release intents with two `succeeded` outcomes). Replica A, still leading, commits the
 * outcomes of its writes, but its pushes fail for a while (Git faults); meanwhile
 * replica B leads and its term-start recovery closes A's open intents from the cluster
 * and pushes; then A's push goes through, rebased on B's commits. Nothing A recorded may
 * be lost and no intent may get a second outcome: A's outcome for an intent B already
 * closed is pushed as a marked record naming B's outcome (a confirmation when the two
 * agree about whether the write was applied, a correction when not), and
 * `tollgate audit verify` passes. On a real Git server.
 *
 * And the other order: A's outcomes land while B's recovery is under way (after its read
 * of the open intents, before its push); then A's are the outcomes and B's recovered ones
 * are pushed as the marked records naming them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitServerPerFile } from '../../support/git-server.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { recover, type IntentState } from '../../../src/audit/recover.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { Decision, Outcome } from '../../../src/decide/decision.ts';
import { systemClock } from '../../../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { captureLogs, successorRecovers } from './support.ts';

const server = gitServerPerFile();

const cluster = 'prod';

/** A's own outcome, what B's recovery saw, and the record A's late outcome becomes. */
const rows: { pod: string; a: Outcome; b: IntentState; recorded: string; marked: string }[] = [
  {
    pod: 'released-and-recovered-released',
    a: { result: 'succeeded', resourceVersion: '9' },
    b: { state: 'applied', detail: 'gate removed' },
    recorded: 'succeeded',
    marked: 'confirmation',
  },
  {
    pod: 'released-but-recovery-saw-it-unchanged',
    a: { result: 'succeeded', resourceVersion: '9' },
    b: { state: 'not-applied', detail: 'resourceVersion 1 unchanged since the decision' },
    recorded: 'cancelled',
    marked: 'correction',
  },
];

/** A's retry timer never fires during the test: its late push is the explicit flush below. */
function writerOn(cacheDir: string, url: string, controller: string, retryIntervalMs = 1_000) {
  return GitAuditWriter.open({
    retryIntervalMs,
    url,
    token: server.token,
    cacheDir,
    cluster,
    controller,
    mode: 'async',
    batch: { maxDecisions: 100, maxDelayMs: 20 },
    leftoversAtTermStart: true,
    retry: { maxAttempts: 3, maxElapsedMs: 5_000, baseDelayMs: 5, maxDelayMs: 20 },
    logger: captureLogs().logger,
  });
}

/** A leads: its intents are pushed, then its pushes fail; the outcomes stay in its clone. */
async function aLeaderWhosePushesFail(url: string) {
  const intents = rows.map((row) => aDecision('Release', row.pod).obj());
  const { writer: a } = await writerOn(
    mkdtempSync(join(tmpdir(), 'tollgate-late-a-')),
    url,
    'replica-a',
    600_000,
  );
  await a.recordIntents(intents);
  await a.flush();
  server.refusePushes(503);
  a.record(rows.map((row, i) => outcomeOf(intents[i] as Decision, row.a)));
  await assert.rejects(a.flush());
  await assert.rejects(a.flush()); // after any cycle its batch timer started meanwhile
  return { a, intents };
}

/** The remote trail's records, once `verifyTrail` finds no problem in it. */
async function verifiedRecords(url: string) {
  const remote = await openAuditSource(url, 'tollgate/audit', { token: server.token });
  const history = await readAuditHistory(remote);
  remote.close();
  assert.deepEqual(verifyTrail(history).problems, []);
  return history.flatMap((commit) => commit.records);
}

describe("a leader's outcomes pushed after its successor's recovery closed their intents", () => {
  it('are pushed as records naming the recovered outcome: one outcome per intent, nothing lost, verify passes', async () => {
    const url = server.createRepo('late-push');
    const { a, intents } = await aLeaderWhosePushesFail(url);

    // B leads (A has not noticed yet): its recovery closes A's intents and pushes.
    const { writer: b } = await writerOn(
      mkdtempSync(join(tmpdir(), 'tollgate-late-b-')),
      url,
      'replica-b',
    );
    server.refusePushes(undefined);
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

    // A's push goes through at last, rebased on B's commits.
    await a.flush();
    await a.close();

    const records = await verifiedRecords(url);
    for (const [i, row] of rows.entries()) {
      const id = (intents[i] as Decision).id;
      assert.deepEqual(
        records.filter((r) => r.id === id && r.phase === 'outcome').map((r) => r.outcome.result),
        [row.recorded],
        `${row.pod}: exactly one outcome, the recovered one`,
      );
      const marked = records.filter((r) => r.id.startsWith(`${id}:`));
      assert.deepEqual(
        marked.map((r) => [r.id, r.phase]),
        [[`${id}:${row.marked}`, 'record']],
        `${row.pod}: A's outcome kept, marked`,
      );
      const value = marked[0]?.inputs[0]?.value as { recorded: Outcome; actual: Outcome };
      assert.equal(value.recorded.result, row.recorded, `${row.pod}: names the recovered outcome`);
      assert.deepEqual(value.actual, row.a, `${row.pod}: holds A's own outcome`);
    }
  });

  it("when they land while the successor's recovery is under way instead, they stay the intents' outcomes; the recovery's are pushed as records naming them; verify passes", async () => {
    const url = server.createRepo('outcome-first');
    const { a, intents } = await aLeaderWhosePushesFail(url);

    // B leads: its recovery reads A's intents as open; while it looks the pods up, Git is
    // back and A's outcomes land first.
    const { writer: b } = await writerOn(
      mkdtempSync(join(tmpdir(), 'tollgate-first-b-')),
      url,
      'replica-b',
    );
    const source = await b.reconcile();
    assert.ok(source, 'reconcile gives the audit source to recover from');
    const byId = new Map(intents.map((intent, i) => [intent.id, rows[i]!.b]));
    let aLanded = false;
    const recovered = await recover({
      source,
      cluster,
      lookup: async (intent) => {
        if (!aLanded) {
          server.refusePushes(undefined);
          await a.flush();
          aLanded = true;
        }
        return byId.get(intent.id) ?? { state: 'unknown' };
      },
      sink: b,
      clock: systemClock,
    });
    assert.equal(recovered.length, rows.length, "B's recovery judged every intent A left open");
    assert.ok(aLanded, "A's outcomes landed before B's recovery pushed");
    await b.close();
    await a.close();

    const records = await verifiedRecords(url);
    for (const [i, row] of rows.entries()) {
      const id = (intents[i] as Decision).id;
      assert.deepEqual(
        records.filter((r) => r.id === id && r.phase === 'outcome').map((r) => r.outcome),
        [row.a],
        `${row.pod}: exactly one outcome, A's`,
      );
      const marked = records.filter((r) => r.id.startsWith(`${id}:`));
      assert.deepEqual(
        marked.map((r) => [r.id, r.phase]),
        [[`${id}:${row.marked}`, 'record']],
        `${row.pod}: B's recovered outcome kept, marked`,
      );
      const value = marked[0]?.inputs[0]?.value as { recorded: Outcome; actual: Outcome };
      assert.deepEqual(value.recorded, row.a, `${row.pod}: names A's outcome`);
      assert.equal(value.actual.result, row.recorded, `${row.pod}: holds B's recovered outcome`);
    }
  });
});
