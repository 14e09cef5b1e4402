/**
 * What a writer's cycle reads back from its own clone. A strict wave of 10,000 releases
 * commits and pushes a few hundred times (an outcome file every 200 ms), and each cycle
 * read back through isomorphic-git what it had just written: the tip's commit for its
 * tree, the new commit for the running `unpushed` answer, the commits again for the
 * push's pack, and (after the cycle released its cache) the trees on the tip's path. Git
 * objects never change, so what the writer wrote is known without reading it. Counted on
 * a real Git server, not timed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nodeFs from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import git from 'isomorphic-git';
import { commitContent, writeLooseObject } from '../../../src/audit/loose-objects.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { countingFs } from '../../support/counting-fs.ts';
import { gitServerPerFile } from '../../support/git-server.ts';

const server = gitServerPerFile();
const branch = 'tollgate/audit';
const tree = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
const parent = '0123456789abcdef0123456789abcdef01234567';
const person = { name: 'tollgate', email: 'tollgate@example.com', timestamp: 1_780_000_000 };

/** Commits as the writer makes them, and messages git would store differently from how they were given. */
const commits = [
  { case: 'the first commit, no parent', parent: [], message: 'tollgate: 1 intent\n' },
  { case: 'one parent', parent: [parent], message: 'tollgate: 3 outcomes\n\nbody\n' },
  { case: 'a message without its last newline', parent: [parent], message: 'no newline' },
  { case: 'newlines before and after', parent: [parent], message: '\n\nfirst\n\n\n' },
  { case: 'carriage returns', parent: [parent], message: 'a\r\nb\r\n' },
  { case: 'beyond ASCII', parent: [parent], message: 'écrit ✓ \u{1f600}\n' },
  { case: 'two parents, an offset west of UTC', parent: [parent, tree], message: 'm\n', zone: 90 },
  { case: 'an offset east of UTC', parent: [parent], message: 'm\n', zone: -330 },
  { case: 'minus zero', parent: [parent], message: 'm\n', zone: -0 },
];

for (const commit of commits) {
  test(`a commit written by tollgate is byte for byte the one isomorphic-git writes: ${commit.case}`, async () => {
    const gitdir = mkdtempSync(join(tmpdir(), 'tollgate-commit-bytes-'));
    await git.init({ fs: nodeFs, gitdir, bare: true });
    const object = {
      tree,
      parent: commit.parent,
      author: { ...person, timezoneOffset: commit.zone ?? 0 },
      committer: { ...person, timestamp: person.timestamp + 1, timezoneOffset: commit.zone ?? 0 },
      message: commit.message,
    };
    const theirs = await git.writeCommit({ fs: nodeFs, gitdir, commit: object });
    const { content, message } = commitContent(object);
    assert.equal(await writeLooseObject(gitdir, 'commit', content), theirs);
    const read = await git.readCommit({ fs: nodeFs, gitdir, oid: theirs });
    assert.equal(message, read.commit.message, 'the message as a read gives it back');
  });
}

async function cloneCountingReads(name: string) {
  const url = server.createRepo(name);
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 7));
  const counted = countingFs();
  const repo = new AuditRepo({
    dir: mkdtempSync(join(tmpdir(), `tollgate-cycle-reads-${name}-`)),
    url,
    branch,
    token: server.token,
    author: { name: 'a', email: 'a@t' },
    clock,
    fs: counted.fs,
  });
  await repo.open();
  await repo.fetch();
  let sequence = 0;
  const commit = () => {
    sequence += 1;
    clock.advance(200);
    const second = String(sequence).padStart(2, '0');
    return repo.commitFile(
      `audit/prod/2026/01/01/07/T0700${second}Z-a-${String(sequence).padStart(6, '0')}.jsonl`,
      `{"n":${sequence}}\n`,
      `tollgate: record ${sequence}\n`,
    );
  };
  return { url, repo, commit, objectReads: counted.objectReads, files: () => sequence };
}

test("a writer's cycles read none of the git objects it wrote back from disk: the tip's tree, its commits, the push's pack, the trees after its cache is released", async () => {
  const { url, repo, commit, objectReads, files } = await cloneCountingReads('cycles');
  await commit();
  await repo.push(); // the branch's first push (isomorphic-git's own)
  repo.releaseCache();
  const before = objectReads();
  for (let cycle = 0; cycle < 3; cycle++) {
    await commit();
    await commit();
    await repo.push();
    repo.releaseCache(); // the end of a cycle
  }
  assert.equal(objectReads() - before, 0, 'git objects read back from disk in three cycles');
  assert.equal(await repo.trackingTip(), await repo.localTip());
  const source = await openAuditSource(url, branch, { token: server.token });
  const history = await readAuditHistory(source);
  source.close();
  assert.equal(history.flatMap((c) => c.changes).length, files(), 'every file landed');
});

test('the running answer of `unpushed` after each commit is the one a fresh walk of the clone gives', async () => {
  const { repo, commit } = await cloneCountingReads('running');
  await commit();
  await repo.push();
  assert.deepEqual(await repo.unpushed(), []);
  for (let i = 0; i < 3; i++) await commit();
  const running = await repo.unpushed();
  const fresh = new AuditRepo({
    dir: repo.gitdir,
    url: repo.url,
    branch,
    token: server.token,
    author: { name: 'a', email: 'a@t' },
  });
  assert.equal(running.length, 3);
  assert.deepEqual(running, await fresh.unpushed());
});
