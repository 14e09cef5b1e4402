/**
 * A checkpoint lists the intents open at its place on the branch. Another writer (a
 * standby pushing what its earlier term left unpushed) can close one of this leader's
 * open intents on the remote; this leader's next push then lands after that outcome, and
 * its next checkpoint must not list the intent as open. The soak's seed 12 (30 minutes)
 * found replica-a's checkpoint listing 23 intents, 11 of them closed 10 s earlier on the
 * branch by replica-b's standby push; replica-b's next term read back to that checkpoint
 * and closed them a second time ("unknown"): `audit verify` exit 1.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { openTestWriter } from './support.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

let git: GitServer;
const clock = new ManualClock(Date.UTC(2026, 10, 29, 7));
before(async () => {
  git = await startGitServer();
});
after(async () => {
  await git?.close();
});

test("a checkpoint does not list an intent another writer's outcome closed before it on the branch", async () => {
  const url = git.createRepo('checkpoint-race');
  const options = { checkpointEvery: 3, clock, batch: { maxDecisions: 100, maxDelayMs: 1_000 } };
  const leader = await openTestWriter(git, url, 'prod', 'replica-a', options);
  await leader.writer.reconcile();
  const closedElsewhere = aDecision('Release', 'closed-elsewhere').obj();
  await leader.writer.recordIntents([closedElsewhere]);

  // The other replica, a standby, pushes an outcome for it (its earlier term sent the write).
  const standby = await openTestWriter(git, url, 'prod', 'replica-b', options);
  await standby.writer.reconcile();
  standby.writer.record([outcomeOf(closedElsewhere)]);
  await standby.writer.flush();
  await standby.writer.close();

  // The leader writes on: its next push finds the remote moved; checkpoints follow.
  for (let index = 0; index < 6; index += 1) {
    const intent = aDecision('Release', `p${index}`).obj();
    clock.advance(10_000);
    await leader.writer.recordIntents([intent]);
    leader.writer.record([outcomeOf(intent)]);
    await leader.writer.flush();
  }
  await leader.writer.close();

  const source = await openAuditSource(url, 'tollgate/audit', { token: git.token });
  try {
    const history = await readAuditHistory(source);
    const checkpoints = history.filter((commit) => /^checkpoint/.test(commit.summary));
    assert.ok(checkpoints.length > 0, 'the leader wrote checkpoints');
    assert.deepEqual(verifyTrail(history).problems, []);
  } finally {
    source.close();
  }
});
