/**
 * What a leader's term start costs when an earlier term left commits unpushed on a base
 * the remote has moved past (a 30-minute seed-3 soak: 770 leftover commits, the
 * term start asked "which commits are unpushed?" eight times, each a walk of all 770
 * reading their trees, and had not pushed when the process was stopped 3.6 minutes
 * later). Counted, not timed: git objects read from the clone during `reconcile` and the
 * push of the leftovers that follows it (in bounded pushes, behind the term start), against
 * a real Git server (git http-backend), in units of one walk of the leftovers. One walk
 * finds them; every later step reuses what it found while neither branch tip moved, and
 * the rebuild on the remote tip knows what it wrote. Besides the walk, the term start reads
 * the trees the rebuild extends, the objects it packs and the trail back to a checkpoint.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { countingFs, type CountingFs } from '../../support/counting-fs.ts';
import { commitMessage } from '../../../src/audit/message.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import type { AuditRepo } from '../../../src/audit/repo.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { auditFilePath, GitAuditWriter } from '../../../src/audit/writer.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aDecision } from '../../builders/decision.ts';
import { gitServerForFile } from '../security/support.ts';
import { countedClone, gitCli } from './support.ts';

const branch = 'tollgate/audit';
const cluster = 'prod';
const git = gitServerForFile('tollgate-term-start-cost-');
const clock = new ManualClock(Date.UTC(2026, 11, 2, 4, 0, 0));

/** A clone of `url` in `dir` (a new one when `dir` is absent), reading through `counter`. */
function cloneOf(url: string, counter: CountingFs, dir = git.tempDir()): Promise<AuditRepo> {
  return countedClone(git.server(), url, dir, counter, clock);
}

/** `count` commits of one record each, by `controller`, all in one hour folder (a busy hour). */
async function commitRecords(repo: AuditRepo, controller: string, count: number): Promise<void> {
  for (let seq = 1; seq <= count; seq += 1) {
    clock.advance(1_000);
    const decision = aDecision('Hold', `${controller}-${seq}`).recorded().obj();
    await repo.commitFile(
      auditFilePath(cluster, controller, clock.now(), seq),
      serializeBatch([decision]),
      commitMessage([decision], { batch: 'records', controller, cluster }),
    );
  }
}

/**
 * A's clone after its term ended: one commit pushed, then `leftovers` commits not pushed;
 * meanwhile B pushed `moved` commits on top of the one A pushed.
 */
async function leftoversBehindTheRemote(leftovers: number, moved: number) {
  const url = git.server().createRepo(`leftovers-${leftovers}-${moved}`);
  const counter = countingFs();
  const repo = await cloneOf(url, counter);
  await commitRecords(repo, 'base', 1);
  await repo.push();
  await commitRecords(repo, 'a', leftovers);
  const other = await cloneOf(url, countingFs());
  await commitRecords(other, 'b', moved);
  await other.push();
  return { url, repo, counter };
}

describe("a term start's cost with commits left unpushed behind a moved remote", () => {
  it('reconcile and the push behind it read at most three walks of the leftovers in git objects, and push them all', async (t) => {
    const leftovers = 60;
    const moved = 5;
    const { url, repo, counter } = await leftoversBehindTheRemote(leftovers, moved);
    // One walk of the leftovers, by a clone of its own on the same folder (nothing remembered).
    const probe = countingFs();
    const walked = await (await cloneOf(url, probe, repo.gitdir)).unpushed();
    assert.equal(walked.length, leftovers, 'the walk finds every leftover');
    const walk = probe.objectReads();

    const writer = new GitAuditWriter({
      store: repo,
      cluster,
      controller: 'a',
      batch: { maxDecisions: 100, maxDelayMs: 20 },
      clock,
    });
    const before = counter.objectReads();
    await writer.reconcile();
    await writer.flush(); // the leftovers are pushed behind the term start
    const reads = counter.objectReads() - before;
    t.diagnostic(
      `${leftovers} leftovers, remote moved by ${moved}: one walk ${walk} objects, reconcile ${reads} (${(reads / walk).toFixed(1)} walks)`,
    );
    await writer.close({ flush: false });

    const bare = `${git.server().root}/leftovers-${leftovers}-${moved}.git`;
    // The term start rebuilt the leftovers in files of at most maxDecisions (100) records.
    assert.equal(
      (await gitCli(bare, 'rev-list', '--count', `refs/heads/${branch}`)).trim(),
      String(1 + moved + Math.ceil(leftovers / 100)),
      'the remote holds the leftovers rebuilt as one commit',
    );
    const source = await openAuditSource(url, branch, { token: git.server().token });
    const history = await readAuditHistory(source).finally(() => source.close());
    assert.deepEqual(verifyTrail(history).problems, []);
    assert.deepEqual(
      history.flatMap((commit) => commit.records.map((record) => record.target.name)),
      [
        'base-1',
        ...Array.from({ length: moved }, (_, i) => `b-${i + 1}`),
        ...Array.from({ length: leftovers }, (_, i) => `a-${i + 1}`),
      ],
      'every record once, in order',
    );
    assert.ok(walk > 0, 'the count sees a walk read objects');
    assert.ok(
      reads <= 3 * walk,
      `reconcile read ${reads} objects: more than three walks of ${walk}`,
    );
  });
});
