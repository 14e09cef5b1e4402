/**
 * What one push of the audit writer costs, counted (not timed) in git objects read from
 * its clone, against a real Git server (git http-backend): a push sends what was
 * committed since the remote tip, so its cost must not grow with the history the clone
 * holds, neither with its commits nor with its hour folders. The history is written by
 * the real git CLI (fast-import: one commit per hour folder, as a busy trail has, each
 * dropping the folders older than the tip's 24-hour window as the writer's commits do),
 * the clone holds all of it (not shallow), and the server checks the pushed branch (fsck).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { countingFs } from '../../support/counting-fs.ts';
import { auditPushFailuresTotal } from '../../../src/audit/metrics.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { defaultTreeWindowHours, hourKey, windowCutoff } from '../../../src/audit/window.ts';
import { gitServerForFile } from '../security/support.ts';
import { countedClone, gitCli } from './support.ts';

const branch = 'tollgate/audit';
const git = gitServerForFile('tollgate-push-cost-');

const hour = 3_600_000;
const start = Date.UTC(2026, 0, 1);

/** The path of the audit file committed at `at`, in its hour folder. */
function auditPath(at: number, seq: number): string {
  const iso = new Date(at).toISOString();
  const [date, time] = [iso.slice(0, 10).replaceAll('-', '/'), iso.slice(11, 19)];
  return `audit/prod/${date}/${time.slice(0, 2)}/T${time.replaceAll(':', '')}Z-history-${seq}.jsonl`;
}

/**
 * A fast-import stream of `commits` commits on the audit branch, each adding one file in
 * its own hour folder and dropping the folders older than the tip's window before it, as
 * the writer's commits do (src/audit/window.ts): the history holds every folder, the tip
 * the last 24 hours'.
 */
function historyStream(commits: number, windowed = true): string {
  const data = (text: string): string => `data ${Buffer.byteLength(text)}\n${text}\n`;
  const parts: string[] = [];
  const kept: string[] = [];
  for (let index = 0; index < commits; index += 1) {
    const at = start + index * hour;
    const path = auditPath(at, index);
    const cutoff = windowCutoff(path, defaultTreeWindowHours)?.join('/') ?? '';
    const dropped = windowed ? kept.filter((folder) => folder < cutoff) : [];
    kept.splice(0, dropped.length);
    kept.push(hourKey(path) as string);
    parts.push(
      `commit refs/heads/${branch}\n`,
      `committer history <history@tollgate.invalid> ${at / 1000} +0000\n`,
      data(`records ${index}\n\nTollgate-Decisions: 1\n`),
      ...dropped.map((folder) => `D ${folder}\n`),
      `M 100644 inline ${path}\n`,
      data(`{"v":1,"phase":"record","id":"history-${index}"}`),
    );
  }
  return parts.join('');
}

/** A repo on the server whose audit branch holds `commits` commits. */
async function repoWithHistory(
  name: string,
  commits: number,
  windowed = true,
): Promise<{ url: string; bare: string }> {
  const server = git.server();
  const url = server.createRepo(name);
  const bare = join(server.root, `${name}.git`);
  await new Promise<void>((resolve, reject) => {
    const child = execFile('git', ['-C', bare, 'fast-import', '--quiet'], (error) =>
      error ? reject(error) : resolve(),
    );
    child.stdin?.end(historyStream(commits, windowed));
  });
  return { url, bare };
}

/** The writer's clone of a repo with `commits` commits of history, all of it fetched (not shallow). */
async function cloneWithHistory(name: string, commits: number, windowed = true) {
  const { url, bare } = await repoWithHistory(name, commits, windowed);
  const counter = countingFs();
  const clock = new ManualClock(start + (commits + 24) * hour);
  const dir = git.tempDir();
  const repo = await countedClone(git.server(), url, dir, counter, clock);
  /** Commits one record file; returns its commit. */
  const commitRecord = async (seq: number): Promise<string> => {
    clock.advance(hour);
    const message = `record ${seq}\n\nTollgate-Decisions: 1\n`;
    const content = `{"v":1,"phase":"record","id":"new-${seq}"}\n`;
    return (await repo.commitFile(auditPath(clock.now(), commits + seq), content, message)).oid;
  };
  const remoteTip = async (): Promise<string> =>
    (await gitCli(bare, 'rev-parse', `refs/heads/${branch}`)).trim();
  /** The server's own check of the branch: every object there and connected. */
  const fsck = () => gitCli(bare, 'fsck', '--strict', '--no-dangling');
  return { url, bare, dir, repo, counter, commitRecord, remoteTip, fsck };
}

/** Objects read by one push of one new record, from a clone holding the whole history. */
async function objectsReadByOnePush(commits: number): Promise<number> {
  const { repo, counter, commitRecord, remoteTip, fsck } = await cloneWithHistory(
    `history-${commits}`,
    commits,
  );
  const oid = await commitRecord(0);
  const before = counter.objectReads();
  assert.equal(await repo.push(), 1, 'the one decision landed');
  const reads = counter.objectReads() - before;
  assert.equal(await remoteTip(), oid);
  await fsck();
  return reads;
}

describe('the cost of an audit push', () => {
  it('one push reads as many git objects after 2,980 commits (2,980 hour folders) of history as after 100', async (t) => {
    // Tips at the same hour of the day (03:00) and windows inside one month, so the
    // folders each commit adds and drops have the same shape.
    const table = [100, 2_980];
    const reads: number[] = [];
    for (const commits of table) reads.push(await objectsReadByOnePush(commits));
    t.diagnostic(
      `objects read per push, by history of ${table.join(' / ')} commits: ${reads.join(' / ')}`,
    );
    assert.ok((reads[0] as number) > 0, 'the count sees the push read objects');
    assert.deepEqual(
      reads,
      table.map(() => reads[0]),
      `objects read per push, by history of ${table.join(' / ')} commits`,
    );
  });

  it('a trail written before the window (every folder at its tip): the first push after it reads the folders it drops once, the next as many as on a trail written with it', async (t) => {
    /** Objects read by two pushes of one record each, an hour apart, on a clone of `commits`. */
    const twoPushes = async (name: string, windowed: boolean): Promise<[number, number]> => {
      const { repo, counter, commitRecord, fsck } = await cloneWithHistory(name, 2_980, windowed);
      const reads: number[] = [];
      for (const seq of [0, 1]) {
        await commitRecord(seq);
        const before = counter.objectReads();
        assert.equal(await repo.push(), 1);
        reads.push(counter.objectReads() - before);
      }
      await fsck();
      return reads as [number, number];
    };
    const windowed = await twoPushes('history-windowed', true);
    const before = await twoPushes('history-before-window', false);
    t.diagnostic(
      `objects read by two pushes: on a trail written before the window ${before.join(', ')}; on one written with it ${windowed.join(', ')}`,
    );
    assert.ok(before[0] > 2_980, `the first push reads the folders it drops (${before[0]})`);
    assert.equal(before[1], windowed[1], 'the next push reads as many as on a windowed trail');
  });

  const lostAnswers = [
    { landed: 'the first of its two commits', landedCount: 1 },
    { landed: 'both of its commits', landedCount: 2 },
  ];
  for (const { landed, landedCount } of lostAnswers)
    it(`a push whose answer was lost after ${landed} landed: the next push sends the rest on top, nothing twice`, async () => {
      const { url, bare, dir, repo, commitRecord, remoteTip, fsck } = await cloneWithHistory(
        `lost-answer-${landedCount}`,
        10,
      );
      const commits = [await commitRecord(0), await commitRecord(1)];
      // The push reached the server, its answer never reached the writer (its tracking ref stays).
      const authed = url.replace('http://', `http://x:${git.server().token}@`);
      const landedTip = commits[landedCount - 1] as string;
      await gitCli(dir, 'push', '--quiet', authed, `${landedTip}:refs/heads/${branch}`);

      const failures = async (): Promise<number> =>
        (await auditPushFailuresTotal.get()).values.reduce((sum, item) => sum + item.value, 0);
      const failedBefore = await failures();
      await repo.push();
      assert.equal(await failures(), failedBefore, 'no attempt refused: it pushed on what landed');
      assert.equal(await remoteTip(), commits[1], 'the branch ends at the last commit');
      assert.equal(
        (await gitCli(bare, 'rev-list', '--count', `refs/heads/${branch}`)).trim(),
        '12',
        'the history and each new commit once',
      );
      assert.deepEqual(await repo.unpushed(), [], 'nothing left to push');
      await fsck();
    });
});
