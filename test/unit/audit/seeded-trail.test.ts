/**
 * Issue 20: the long-trail bench synthesizes its first records with `git fast-import`
 * (bench/audit-seed.ts) instead of writing them through the Git library and the server
 * one push at a time. That history only counts if it is what the writer would write: the
 * same decisions, on the same clock, written once through the real writer (AuditRepo,
 * pushed to a real Git server) and once synthesized, must read back identically: the
 * same records in the same files and commits, the same checkpoints (open intents and
 * carried state), and in fact the same commits (the same tip), and `verify` passes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openAuditSource, readAuditHistory, type AuditCommit } from '../../../src/audit/reader.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { startGitServer } from '../../support/git-server.ts';
import {
  benchTrail,
  pushSeeded,
  seedTrail,
  trailWriter,
  writeRound,
} from '../../../bench/audit-seed.ts';

const branch = 'tollgate/audit';
const start = Date.UTC(2026, 0, 1);
/**
 * 300 records, 10 per commit, a checkpoint every 3 commits (after intents and after
 * outcomes): 30 commits, 10 checkpoints; a commit every 2 hours, so the 60 hours of the
 * trail pass the tip's 24-hour window (src/audit/window.ts) and its commits drop the
 * older folders from their trees.
 */
const shape = { ...benchTrail, perCommit: 10, checkpointEvery: 3, everyMs: 2 * 3_600_000 };
const records = 300;

/** What a reader sees of a commit: everything but nothing git-internal beyond its oid. */
const readBack = (commit: AuditCommit) => ({
  oid: commit.oid,
  message: commit.message,
  author: commit.author,
  committedAt: commit.committedAt,
  changes: commit.changes,
  records: commit.records,
  errors: commit.errors,
  checkpoint: commit.checkpoint,
});

/** The branch tip on the server (asynchronously: the server answers from this process). */
const tipOf = async (url: string): Promise<string> =>
  (await promisify(execFile)('git', ['ls-remote', url, `refs/heads/${branch}`])).stdout.split(
    '\t',
  )[0] as string;

test('a trail synthesized with git fast-import reads back exactly as the real writer wrote the same decisions', async () => {
  const server = await startGitServer();
  try {
    const withToken = (url: string): string => url.replace('://', `://x:${server.token}@`);
    // Through the real writer: AuditRepo, a push to the server after every cycle.
    const writtenUrl = server.createRepo('written');
    const clock = new ManualClock(start);
    const repo = new AuditRepo({
      dir: join(mkdtempSync(join(tmpdir(), 'tollgate-seed-test-')), 'audit.git'),
      url: writtenUrl,
      branch,
      token: server.token,
      author: shape.author,
      clock,
    });
    await repo.open();
    await repo.fetch();
    const writer = trailWriter(repo, shape, clock);
    writer.seedOpenIntents([]);
    for (let done = 0; done < records; done += 2 * shape.perCommit)
      await writeRound(writer, clock, done, shape);
    await writer.close();

    // Synthesized: the same decisions on the same clock, streamed into git fast-import.
    const seededUrl = server.createRepo('seeded');
    const gitdir = mkdtempSync(join(tmpdir(), 'tollgate-seed-test-bare-'));
    const seeded = await seedTrail({ gitdir, branch, records, start, ...shape });
    await pushSeeded(gitdir, branch, withToken(seededUrl));

    const written = await openAuditSource(writtenUrl, branch, { token: server.token });
    const synthesized = await openAuditSource(seededUrl, branch, { token: server.token });
    const writtenHistory = await readAuditHistory(written);
    const seededHistory = await readAuditHistory(synthesized);
    written.close();
    synthesized.close();

    const checkpoints = seededHistory.filter((commit) => commit.checkpoint !== undefined);
    assert.equal(seeded.commits, seededHistory.length, 'every synthesized commit is on the branch');
    assert.equal(checkpoints.length, 10, 'a checkpoint every 3 commits of records');
    assert.ok(
      checkpoints.some((commit) => (commit.checkpoint?.open.length ?? 0) > 0),
      'some checkpoints list open intents',
    );
    assert.deepEqual(seededHistory.map(readBack), writtenHistory.map(readBack));
    const seededTip = await tipOf(withToken(seededUrl));
    assert.match(seededTip, /^[0-9a-f]{40}$/);
    assert.equal(seededTip, await tipOf(withToken(writtenUrl)), 'the same tip commit');
    const report = verifyTrail(seededHistory);
    assert.equal(report.ok, true, JSON.stringify(report.problems.slice(0, 3)));
    assert.equal(report.records, records);
    // The tip's tree holds the last 24 hours of folders; the history holds all 60.
    const hoursAt = async (tree: string): Promise<string[]> => [
      ...new Set(
        (
          await promisify(execFile)('git', ['ls-tree', '-r', '--name-only', tree], { cwd: gitdir })
        ).stdout
          .split('\n')
          .filter((path) => path.endsWith('.jsonl'))
          .map((path) => path.split('/').slice(0, 6).join('/')),
      ),
    ];
    const tipHours = await hoursAt(`refs/heads/${branch}`);
    const newest = tipHours.at(-1) as string;
    assert.equal(newest, 'audit/bench/2026/01/03/12', "the newest folder is the last commit's");
    assert.deepEqual(
      tipHours,
      Array.from({ length: 13 }, (_, index) => {
        const at = new Date(Date.UTC(2026, 0, 2, 12 + 2 * index));
        return `audit/bench/${at.toISOString().slice(0, 13).replace(/[-T]/g, '/')}`;
      }),
      'the tip keeps the folders of the 24 hours before its newest file, no older',
    );
    assert.equal(
      new Set(
        seededHistory.flatMap((commit) =>
          commit.records.map((r) => r.file.split('/').slice(0, 6).join('/')),
        ),
      ).size,
      30,
      'the history keeps every folder',
    );
  } finally {
    await server.close();
  }
});
