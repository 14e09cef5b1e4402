/**
 * A term start rebuilds the commits an earlier term left unpushed on the remote tip
 * (leftovers.ts, GitAuditWriter.reconcile). Each commit rewrites its hour folder's tree,
 * so rebuilding them one for one costs leftovers × folder size (soak seed 3: 770
 * leftovers in a folder of 667 files, 51 s before the loops started). Consecutive
 * leftovers are rebuilt as files of at most `batch.maxDecisions` records, the size of a
 * commit the writer makes itself: every record kept, in order, and what verify and
 * recovery read means the same. Over a real bare repository on disk (OfflineRepo).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { commitMessage } from '../../../src/audit/message.ts';
import { readAuditHistory, repoSource } from '../../../src/audit/reader.ts';
import { parseBatch, phaseOf, serializeBatch } from '../../../src/audit/record.ts';
import { openIntents, recoveredOutcomes } from '../../../src/audit/recover.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { auditFilePath, GitAuditWriter } from '../../../src/audit/writer.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { countingFs } from '../../support/counting-fs.ts';
import { leftoverClone, leftoverCluster as cluster } from '../../support/leftover-clone.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const line = (decision: Decision): string => `${phaseOf(decision)} ${decision.id}`;

const rows = [
  {
    name: '36 leftover commits of 67 records on a moved remote, nothing planned away, are rebuilt as ceil(67/10) commits',
    rounds: 16,
    remoteRecovered: false,
    chunk: 10,
  },
  {
    name: "leftovers whose first outcomes the other leader's recovery closed keep those as corrections after the rebuilt records",
    rounds: 16,
    remoteRecovered: true,
    chunk: 10,
  },
  {
    name: 'a chunk larger than all leftovers rebuilds them as one commit',
    rounds: 7,
    remoteRecovered: false,
    chunk: 500,
  },
];

for (const { name, rounds, remoteRecovered, chunk } of rows) {
  test(`term start: ${name}; verify passes and recovery decides each open intent once`, async () => {
    const clone = await leftoverClone({ rounds, remoteCommits: 3, remoteRecovered });
    const { repo, clock } = clone;
    const kept = clone.leftovers
      .flat()
      .filter(
        (decision) =>
          !(remoteRecovered && phaseOf(decision) === 'outcome' && /r1-/.test(decision.id)),
      );
    const corrections = remoteRecovered
      ? [
          'record gate-release:Release:uid-team-a-r1-a:1:correction',
          'record gate-release:Release:uid-team-a-r1-b:1:correction',
        ]
      : [];
    const writer = new GitAuditWriter({
      store: repo,
      cluster,
      controller: 'new',
      batch: { maxDecisions: chunk, maxDelayMs: 1_000 },
      clock,
      timers: new ManualTimers(clock),
    });

    await writer.reconcile();

    const rebuilt = await repo.unpushed();
    assert.equal(rebuilt[0]?.parent, await repo.trackingTip(), 'rebuilt on the remote tip');
    const files = await Promise.all(
      rebuilt.map(async (commit) => parseBatch(await repo.readText(commit.blob), commit.path)),
    );
    assert.deepEqual(
      files.flat().map(line),
      [...kept.map(line), ...corrections],
      'every record kept, in its order, the corrections after them',
    );
    assert.equal(
      rebuilt.length,
      Math.ceil(kept.length / chunk) + (corrections.length > 0 ? 1 : 0),
      `${clone.leftovers.length} leftover commits of ${kept.length} records rebuilt in chunks of ${chunk}`,
    );
    for (const [index, commit] of rebuilt.entries())
      assert.match(
        commit.message,
        new RegExp(`Tollgate-Decisions: ${files[index]?.length}\\n`),
        'the decisions trailer counts the file',
      );

    const open = await openIntents(await repoSource(repo), cluster);
    assert.deepEqual(open.map(line), clone.open.map(line), 'recovery finds the open intents');
    const outcomes = await recoveredOutcomes(open, () => ({ state: 'not-applied' }), clock.now());
    clock.advance(1_000);
    await repo.commitFile(
      auditFilePath(cluster, 'new', clock.now(), 1),
      serializeBatch(outcomes),
      commitMessage(outcomes, { batch: 'outcomes', controller: 'new', cluster }),
    );
    assert.deepEqual(await openIntents(await repoSource(repo), cluster), [], 'each decided once');

    const report = verifyTrail(await readAuditHistory(await repoSource(repo)));
    assert.deepEqual(report.problems, []);
    assert.equal(report.ok, true);
    await writer.close({ flush: false });
  });
}

test('finding the leftovers parses each of their trees once: a walk of 59 leftover commits reads at most 12 git objects per commit, not two of each tree on its path', async (t) => {
  const clone = await leftoverClone({ rounds: 26, remoteCommits: 3 });
  const counter = countingFs();
  const fresh = new AuditRepo({
    dir: clone.repo.gitdir,
    url: 'http://127.0.0.1:9/audit.git',
    branch: 'tollgate/audit',
    author: { name: 't', email: 't@t' },
    clock: clone.clock,
    fs: counter.fs,
  });
  const found = await fresh.unpushed();
  assert.equal(found.length, clone.leftovers.length);
  const perCommit = counter.objectReads() / found.length;
  t.diagnostic(`${counter.objectReads()} objects for ${found.length} commits`);
  assert.ok(
    perCommit <= 12,
    `${counter.objectReads()} git objects read for ${found.length} commits (${perCommit.toFixed(1)} each)`,
  );
});
