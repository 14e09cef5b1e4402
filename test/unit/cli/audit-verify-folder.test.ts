/**
 * `tollgate audit verify` keeps the digests it does not hold in memory in a folder of its
 * own under the system's temporary folder (src/audit/digest-set.ts), removed when it ends;
 * without a writable temporary folder it still verifies, every digest in memory, and says so.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchTrail, seedTrail } from '../../../bench/audit-seed.ts';
import { openAuditSource } from '../../../src/audit/reader.ts';
import { verifySource } from '../../../src/cli/audit.ts';

const cli = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));

/** A real trail of `records` records in a new bare repository. */
async function seededRepo(records: number): Promise<string> {
  const gitdir = mkdtempSync(join(tmpdir(), 'tollgate-verify-folder-'));
  await seedTrail({
    gitdir,
    branch: 'tollgate/audit',
    records,
    start: Date.UTC(2026, 0, 1),
    ...benchTrail,
  });
  return gitdir;
}

function verify(gitdir: string, temporary: string) {
  return spawnSync(process.execPath, [cli, 'audit', 'verify', '--repo', gitdir, '-o', 'json'], {
    encoding: 'utf8',
    env: { ...process.env, TMPDIR: temporary },
  });
}

describe('audit verify and its folder of digests', () => {
  it('leaves nothing behind in the temporary folder', async () => {
    const gitdir = await seededRepo(400);
    const temporary = mkdtempSync(join(tmpdir(), 'tollgate-verify-tmp-'));
    try {
      const run = verify(gitdir, temporary);
      assert.equal(run.status, 0, run.stderr);
      const report = JSON.parse(run.stdout) as { ok: boolean; records: number };
      assert.equal(report.ok, true);
      assert.equal(report.records, 400);
      assert.deepEqual(readdirSync(temporary), []);
      assert.doesNotMatch(run.stderr, /kept in memory/);
    } finally {
      rmSync(gitdir, { recursive: true, force: true });
      rmSync(temporary, { recursive: true, force: true });
    }
  });

  it('without a writable temporary folder verifies all the same, every digest in memory, and says so', async () => {
    const gitdir = await seededRepo(400);
    try {
      const run = verify(gitdir, '/nonexistent/tollgate-tmp');
      assert.equal(run.status, 0, run.stderr);
      assert.equal((JSON.parse(run.stdout) as { ok: boolean }).ok, true);
      assert.match(
        run.stderr,
        /no folder for its digests under \/nonexistent\/tollgate-tmp \(.*ENOENT.*\); every digest is kept in memory \(set TMPDIR to a writable folder\)/,
      );
    } finally {
      rmSync(gitdir, { recursive: true, force: true });
    }
  });

  it('a folder that fails while verify walks stops it with an error naming the folder, not a verdict about the trail', async () => {
    const gitdir = await seededRepo(400);
    const source = await openAuditSource(gitdir, 'tollgate/audit', { systemGit: true });
    try {
      await assert.rejects(
        verifySource(source, 'tollgate/audit', {
          now: 0,
          spill: { dir: '/nonexistent/tollgate-digests', digestsInMemory: 8 },
        }),
        /cannot keep the (intents|lines) digests in \/nonexistent\/tollgate-digests: ENOENT/,
      );
    } finally {
      source.close();
      rmSync(gitdir, { recursive: true, force: true });
    }
  });
});
