/**
 * Issue 20: `audit verify` must walk a million records in bounded memory, and
 * isomorphic-git holds every pack it reads whole. The readers of whole histories read
 * objects through the system git instead (src/audit/cat-file.ts): the same history must
 * read back exactly as isomorphic-git reads it, with nothing of the pack held in the
 * process, and a missing object must be an error that names it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  openAuditSource,
  readAuditHistory,
  walkAuditHistory,
  type AuditCommit,
} from '../../../src/audit/reader.ts';
import { CatFileObjects, parseCommit, parseTree } from '../../../src/audit/cat-file.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { packfileCache } from '../../../src/lib/git-pack-cache.ts';
import { benchTrail, pushSeeded, seedTrail } from '../../../bench/audit-seed.ts';
import { startGitServer } from '../../support/git-server.ts';

const git = promisify(execFile);
const branch = 'tollgate/audit';
const start = Date.UTC(2026, 0, 1);
const shape = { ...benchTrail, perCommit: 10, checkpointEvery: 3, everyMs: 3_600_000 };

/** A trail of `records` in one pack, as a server or a maintained clone holds it. */
async function packedTrail(records: number): Promise<string> {
  const gitdir = mkdtempSync(join(tmpdir(), 'tollgate-cat-file-test-'));
  await seedTrail({ gitdir, branch, records, start, ...shape });
  await git('git', ['--git-dir', gitdir, 'repack', '-adq']);
  return gitdir;
}

const readBack = (commit: AuditCommit) => ({ ...commit });

describe('reading the audit history through the system git', () => {
  it('reads every commit, change, record and checkpoint exactly as isomorphic-git reads them', async () => {
    const gitdir = await packedTrail(200);
    const library = await openAuditSource(gitdir, branch);
    const system = await openAuditSource(gitdir, branch, { systemGit: true });
    try {
      assert.ok(system.objects, 'the system git is there, so objects are read through it');
      const expected = await readAuditHistory(library);
      const got = await readAuditHistory(system);
      assert.ok(expected.length >= 20, `${expected.length} commits`);
      assert.ok(got.some((commit) => commit.checkpoint !== undefined));
      assert.deepEqual(got.map(readBack), expected.map(readBack));
      assert.equal(verifyTrail(got).ok, true);
    } finally {
      library.close();
      system.close();
    }
  });

  it('walks the whole history holding no pack in the process, where isomorphic-git holds it whole', async () => {
    const gitdir = await packedTrail(400);
    const packsHeld = async (systemGit: boolean): Promise<number> => {
      const source = await openAuditSource(gitdir, branch, { systemGit });
      try {
        let records = 0;
        for await (const commit of walkAuditHistory(source)) records += commit.records.length;
        assert.equal(records, 400);
        return packfileCache(source.cache)?.size ?? 0;
      } finally {
        source.close();
      }
    };
    assert.equal(await packsHeld(false), 1, 'isomorphic-git keeps the pack it read');
    assert.equal(await packsHeld(true), 0, 'read through the system git: no pack in the process');
  });

  it('a URL is fetched by the system git with the token in its environment: the same history, a refused token said without the token, a missing branch has no tip', async () => {
    const server = await startGitServer();
    try {
      const url = server.createRepo('trail');
      const gitdir = await packedTrail(200);
      await pushSeeded(gitdir, branch, url.replace('://', `://x:${server.token}@`));
      const library = await openAuditSource(url, branch, { token: server.token });
      const system = await openAuditSource(url, branch, { token: server.token, systemGit: true });
      try {
        assert.ok(existsSync(join(system.gitdir, 'FETCH_HEAD')), 'fetched by the system git');
        assert.ok(!existsSync(join(library.gitdir, 'FETCH_HEAD')), 'fetched by isomorphic-git');
        assert.deepEqual(
          (await readAuditHistory(system)).map(readBack),
          (await readAuditHistory(library)).map(readBack),
        );
      } finally {
        library.close();
        system.close();
      }
      const refusedBefore = server.unauthorized;
      const wrong = 'tg-wrong-token-123';
      const error = await openAuditSource(url, branch, { token: wrong, systemGit: true }).then(
        () => assert.fail('a refused token must fail the read'),
        (caught: Error) => caught,
      );
      assert.match(error.message, /cannot read audit branch tollgate\/audit/);
      assert.doesNotMatch(error.message, new RegExp(wrong));
      assert.ok(server.unauthorized > refusedBefore, 'the server refused the token');
      const none = await openAuditSource(url, 'no/such-branch', {
        token: server.token,
        systemGit: true,
      });
      assert.equal(none.tip, undefined);
      none.close();
    } finally {
      await server.close();
    }
  });

  it('a missing object is an error naming the object and the repository; a closed reader refuses', async () => {
    const gitdir = await packedTrail(20);
    const objects = new CatFileObjects(gitdir);
    const missing = 'f'.repeat(40);
    await assert.rejects(objects.commit(missing), new RegExp(`${missing} not found in ${gitdir}`));
    const tip = (await git('git', ['--git-dir', gitdir, 'rev-parse', branch])).stdout.trim();
    const commit = await objects.commit(tip);
    await assert.rejects(objects.blob(commit.tree), /is a tree, not a blob/);
    objects.close();
    await assert.rejects(objects.commit(tip), /closed/);
  });

  it('parses a commit as git reads it: parents in their run after the tree, a signature over lines, the message', () => {
    const raw = [
      'tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904',
      `parent ${'a'.repeat(40)}`,
      `parent ${'b'.repeat(40)}`,
      'author tollgate <tollgate@example.com> 1767225600 +0000',
      'committer tollgate <tollgate@example.com> 1767225660 +0100',
      `parent ${'c'.repeat(40)}`,
      'gpgsig -----BEGIN SSH SIGNATURE-----',
      ' U1NIU0lH',
      ' -----END SSH SIGNATURE-----',
      '',
      '',
      'audit: 2 intents',
      '',
      'Tollgate-Cluster: prod',
      '',
      '',
    ].join('\n');
    const commit = parseCommit(Buffer.from(raw), 'x');
    assert.deepEqual(commit.parent, ['a'.repeat(40), 'b'.repeat(40)]);
    assert.deepEqual(commit.author, {
      name: 'tollgate',
      email: 'tollgate@example.com',
      timestamp: 1767225600,
    });
    assert.equal(commit.committer.timestamp, 1767225660);
    assert.equal(
      commit.gpgsig,
      '-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----',
    );
    assert.equal(commit.message, 'audit: 2 intents\n\nTollgate-Cluster: prod\n');
    assert.throws(() => parseCommit(Buffer.from('author x <y> 1 +0000\n\nm'), 'c0ffee'), /c0ffee/);
  });

  it('parses a tree: a folder is 040000, a truncated entry is an error naming the tree', () => {
    const entry = (mode: string, name: string, hex: string) =>
      Buffer.concat([Buffer.from(`${mode} ${name}\0`), Buffer.from(hex, 'hex')]);
    const tree = Buffer.concat([
      entry('40000', 'audit', '1'.repeat(40)),
      entry('100644', 'a.jsonl', '2'.repeat(40)),
    ]);
    assert.deepEqual(parseTree(tree, 't'), [
      { mode: '040000', path: 'audit', oid: '1'.repeat(40), type: 'tree' },
      { mode: '100644', path: 'a.jsonl', oid: '2'.repeat(40), type: 'blob' },
    ]);
    assert.throws(() => parseTree(tree.subarray(0, tree.length - 3), 'beef'), /beef/);
  });
});
