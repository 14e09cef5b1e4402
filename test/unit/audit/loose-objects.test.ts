/**
 * The clone's loose objects read straight from disk (maintenance's walk and pack), against
 * what the system git says of the same objects in a real repository.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { parseCommit, parseTree } from '../../../src/audit/cat-file.ts';
import { looseObjects, readLooseObject } from '../../../src/audit/loose-objects.ts';

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
