/**
 * The clone's loose objects read straight from disk (maintenance's walk and pack), against
 * what the system git says of the same objects in a real repository.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { parseCommit, parseTree } from '../../../src/audit/cat-file.ts';
import {
  forgetWrittenLately,
  looseObjects,
  objectWrittenLately,
  readLooseObject,
  treeContent,
  writeLooseObject,
  writtenLatelyBytes,
} from '../../../src/audit/loose-objects.ts';

/** A commit's tree and parents, read from its loose file. */
function commitLinks(path: string): { tree: string; parents: string[] } {
  const { tree, parent } = parseCommit(readLooseObject(path).object, path);
  return { tree, parents: parent };
}

/** A tree's entries, read from its loose file: each one's id and whether it is a tree. */
function treeEntries(path: string): { oid: string; tree: boolean }[] {
  return parseTree(readLooseObject(path).object, path).map(({ oid, type }) => ({
    oid,
    tree: type === 'tree',
  }));
}

function gitRepoWithTwoCommits(): { dir: string; git: (...args: string[]) => string } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-loose-'));
  const git = (...args: string[]): string =>
    execFileSync('git', ['-C', dir, ...args], {
      encoding: 'utf8',
      env: { ...process.env, GIT_AUTHOR_DATE: '@0 +0000', GIT_COMMITTER_DATE: '@0 +0000' },
    }).trim();
  git('init', '-q', '-b', 'main');
  git('config', 'user.name', 't');
  git('config', 'user.email', 't@t');
  mkdirSync(join(dir, 'audit', 'prod'), { recursive: true });
  writeFileSync(join(dir, 'audit', 'prod', 'a.jsonl'), '{"id":"a"}\n');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  writeFileSync(join(dir, 'audit', 'prod', 'b.jsonl'), '{"id":"b"}\n');
  writeFileSync(join(dir, 'README'), 'trail\n');
  git('add', '.');
  git('commit', '-q', '-m', 'second');
  return { dir, git };
}

test("every loose object reads as git's own type and content, and commits and trees give their links", () => {
  const { dir, git } = gitRepoWithTwoCommits();
  const loose = looseObjects(join(dir, '.git'));
  assert.equal(loose.size, Number(/count: (\d+)/.exec(git('count-objects', '-v'))?.[1]));
  for (const [oid, path] of loose) {
    const { type, object } = readLooseObject(path);
    assert.equal(type, git('cat-file', '-t', oid), oid);
    assert.equal(object.length, Number(git('cat-file', '-s', oid)), oid);
  }
  const head = git('rev-parse', 'HEAD');
  const links = commitLinks(loose.get(head) as string);
  assert.deepEqual(links, {
    tree: git('rev-parse', 'HEAD^{tree}'),
    parents: [git('rev-parse', 'HEAD~1')],
  });
  const entries = treeEntries(loose.get(links.tree) as string);
  assert.deepEqual(
    entries,
    git('ls-tree', 'HEAD')
      .split('\n')
      .map((line) => {
        const [mode, , oid] = line.split(/\s+/);
        return { oid: oid as string, tree: mode === '040000' };
      }),
  );
  assert.equal(commitLinks(loose.get(links.parents[0] as string) as string).parents.length, 0);
});

test('a file in the objects folder that is not a git object is an error naming it', () => {
  const { dir } = gitRepoWithTwoCommits();
  mkdirSync(join(dir, '.git', 'objects', 'ab'), { recursive: true });
  const path = join(dir, '.git', 'objects', 'ab', 'c'.repeat(38));
  const named = (message: string): RegExp =>
    new RegExp(`${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ${message}`);
  writeFileSync(path, 'not compressed');
  assert.throws(() => readLooseObject(path), named('not a zlib stream'));
  writeFileSync(path, deflateSync('blob 99\0short'));
  assert.throws(() => readLooseObject(path), named('not a loose git object'));
  writeFileSync(path, deflateSync('wisp 5\0short'));
  assert.throws(() => readLooseObject(path), named('not a loose git object'));
});

test("blobs and trees the writer writes are git's own: the same ids as git's, read back by git, fsck clean", async () => {
  const { dir, git } = gitRepoWithTwoCommits();
  const gitdir = join(dir, '.git');
  const record = '{"id":"c"}\n';
  const blob = await writeLooseObject(gitdir, 'blob', Buffer.from(record));
  const hashed = execFileSync('git', ['-C', dir, 'hash-object', '--stdin'], { input: record });
  assert.equal(blob, hashed.toString().trim());
  assert.equal(git('cat-file', '-p', blob), record.trimEnd());
  // Names that sort differently as bytes, as UTF-16 units and with a folder's slash.
  const entries = [
    { mode: '100644', path: 'z.jsonl', oid: blob },
    { mode: '100644', path: 'a-1', oid: blob },
    { mode: '040000', path: 'a', oid: git('rev-parse', 'HEAD^{tree}') },
    { mode: '100644', path: 'a.jsonl', oid: blob },
    { mode: '100644', path: '\ue000.jsonl', oid: blob },
    { mode: '100644', path: '\u{1f600}.jsonl', oid: blob },
  ];
  const tree = await writeLooseObject(gitdir, 'tree', treeContent(entries));
  const listed = git('ls-tree', '-z', tree)
    .split('\0')
    .filter((line) => line !== '')
    .map((line) => line.split('\t')[1]);
  assert.deepEqual(listed, ['a-1', 'a.jsonl', 'a', 'z.jsonl', '\ue000.jsonl', '\u{1f600}.jsonl']);
  // git writes the same tree under the same id.
  const mktree = execFileSync('git', ['-C', dir, 'mktree', '-z'], {
    input: entries
      .map((e) => `${e.mode} ${e.mode === '040000' ? 'tree' : 'blob'} ${e.oid}\t${e.path}\0`)
      .join(''),
    encoding: 'utf8',
  }).trim();
  assert.equal(tree, mktree);
  git('fsck', '--strict', '--no-dangling');
  assert.deepEqual(
    readdirSync(join(gitdir, 'objects', tree.slice(0, 2))).filter((f) => f.startsWith('tmp')),
    [],
    'no temporary file left',
  );
});

test('an object already on disk is left as it is; a tree entry that is not one name is refused', async () => {
  const { dir } = gitRepoWithTwoCommits();
  const gitdir = join(dir, '.git');
  const oid = await writeLooseObject(gitdir, 'blob', Buffer.from('x\n'));
  const path = join(gitdir, 'objects', oid.slice(0, 2), oid.slice(2));
  const before = statSync(path).mtimeMs;
  assert.equal(await writeLooseObject(gitdir, 'blob', Buffer.from('x\n')), oid);
  assert.equal(statSync(path).mtimeMs, before);
  for (const bad of ['', 'a/b', 'a\0b'])
    assert.throws(
      () => treeContent([{ mode: '100644', path: bad, oid }]),
      /is not one path segment/,
    );
  assert.throws(
    () => treeContent([{ mode: '100644', path: 'a', oid: 'x' }]),
    /tree entry a: oid x/,
  );
});

test('the objects written lately are kept up to a bound, oldest dropped first, and forgotten per clone', async () => {
  const one = join(gitRepoWithTwoCommits().dir, '.git');
  const other = join(gitRepoWithTwoCommits().dir, '.git');
  const small = await writeLooseObject(one, 'blob', Buffer.from('small\n'));
  const elsewhere = await writeLooseObject(other, 'blob', Buffer.from('small\n'));
  assert.equal(small, elsewhere, 'the same content, the same id');
  assert.deepEqual(objectWrittenLately(one, small), {
    type: 'blob',
    object: Buffer.from('small\n'),
  });
  forgetWrittenLately(one);
  assert.equal(objectWrittenLately(one, small), undefined, 'forgotten for that clone');
  assert.ok(objectWrittenLately(other, small), 'kept for the other');
  // Past the bound, the oldest go first.
  const half = Buffer.alloc(writtenLatelyBytes / 2 + 1, 'a');
  const first = await writeLooseObject(one, 'blob', half);
  const second = await writeLooseObject(one, 'blob', Buffer.concat([half, Buffer.from('b')]));
  assert.equal(objectWrittenLately(other, small), undefined, 'the oldest dropped');
  assert.equal(objectWrittenLately(one, first), undefined);
  assert.ok(objectWrittenLately(one, second), 'the newest kept');
  forgetWrittenLately(one);
  forgetWrittenLately(other);
});
