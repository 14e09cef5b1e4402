/**
 * A recovery's outcome meets one another writer pushed after recovery read the trail, on
 * a real Git server (soak seed 5, 30 minutes: `audit verify` failed, "has two outcomes
 * (cancelled here, cancelled earlier)"). Replica A's push was under way when it lost the
 * lease and landed seconds later, holding A's own `cancelled` outcome for an intent it
 * had pushed. Replica B's term had already read the trail: the intent was open. Before
 * B's recovery committed its outcome, one of B's pushes found the remote moved and
 * rebuilt B's commits on its tip, A's outcome now below them: the push's replanning
 * looks back only to the base of the commits it pushes, so B's outcome went out as a
 * second one. Every outcome committed while recovery's outcomes are pending is checked
 * against what the remote recorded since recovery read it: the intent keeps one outcome,
 * and B's is kept as a confirmation record.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { gitServerPerFile } from '../../support/git-server.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { openIntents } from '../../../src/audit/recover.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { captureLogs, openTestWriter } from './support.ts';

const server = gitServerPerFile();

const cluster = 'prod';

const writerOn = (url: string, controller: string) =>
  openTestWriter(server, url, cluster, controller, {
    mode: 'strict',
    retry: { maxAttempts: 3, maxElapsedMs: 5_000, baseDelayMs: 5, maxDelayMs: 20 },
    logger: captureLogs().logger,
  });

describe("a recovery outcome for an intent another writer closed after recovery's read", () => {
  it('is not pushed as a second outcome, even when its commit lands on a tip that already holds the other', async () => {
    const url = server.createRepo('recovery-late-outcome');
    const { writer: a } = await writerOn(url, 'replica-a');
    a.setFence(() => true);
    const intent = aDecision('Release', 'pushed-then-cancelled').obj();
    await a.recordIntents([intent]);

    // B's term: reconcile, and recovery reads the intent as open.
    const { writer: b } = await writerOn(url, 'replica-b');
    b.setFence(() => true);
    b.beginTerm();
    const source = await b.reconcile();
    assert.ok(source);
    const open = await openIntents(source, cluster);
    source.close();
    assert.deepEqual(
      open.map((record) => record.id),
      [intent.id],
    );

    // A's late push lands: its own outcome for the intent.
    a.record([outcomeOf(intent, { result: 'cancelled', message: 'audit record not pushed' })]);
    await a.flush();
    await a.close();

    // One of B's pushes rebuilds its commits on the remote tip that holds A's outcome.
    b.record([{ ...aDecision('Hold', 'other').obj(), outcome: { result: 'recorded' } }]);
    await b.flush();

    // Then B's recovery commits what it decided from the cluster.
    b.record([outcomeOf(intent, { result: 'cancelled', message: 'not sent before restart' })]);
    b.endTerm();
    await b.flush();
    await b.close();

    const remote = await openAuditSource(url, 'tollgate/audit', { token: server.token });
    const history = await readAuditHistory(remote);
    remote.close();
    assert.deepEqual(verifyTrail(history).problems, [], 'verify passes');
    const records = history.flatMap((commit) => commit.records);
    assert.deepEqual(
      records.filter((r) => r.id === intent.id && r.phase === 'outcome').map((r) => r.outcome),
      [{ result: 'cancelled', message: 'audit record not pushed' }],
      "A's outcome is the intent's one outcome",
    );
    assert.equal(
      records.filter((r) => r.id === `${intent.id}:confirmation`).length,
      1,
      "B's outcome is kept as a confirmation record",
    );
  });
});
