/**
 * The tip's window (src/audit/window.ts): a commit drops from its tree the hour folders
 * of its cluster older than 24 hours before the file it adds; the history keeps them.
 * Trees are real git objects in a bare repository on disk.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import git from 'isomorphic-git';
import * as fs from 'node:fs';
import { addFile, lookup, pruneBefore } from '../../../src/audit/tree.ts';
import { windowCutoff, yearDepth } from '../../../src/audit/window.ts';
import { localClone } from '../../support/audit-clone.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { ManualClock } from '../../../src/lib/clock.ts';

describe("the tip's window cutoff", () => {
  for (const { path, hours, cutoff } of [
    {
      path: 'audit/prod/2026/11/29/07/T070000Z-c-000001.jsonl',
      hours: 24,
      cutoff: 'audit/prod/2026/11/28/07',
    },
    {
      path: 'audit/prod/2027/01/01/02/T020000Z-c-000001.jsonl',
      hours: 24,
      cutoff: 'audit/prod/2026/12/31/02',
    },
    {
      path: 'audit/prod/2028/03/01/00/T000000Z-c-000001.jsonl',
      hours: 1,
      cutoff: 'audit/prod/2028/02/29/23',
    },
    { path: 'audit/prod/2026/11/29/07/T070000Z-c-000001.jsonl', hours: 0, cutoff: undefined },
    { path: 'README.md', hours: 24, cutoff: undefined },
  ])
    it(`${path} with ${hours} h keeps from ${cutoff ?? 'everything'}`, () => {
      assert.equal(windowCutoff(path, hours)?.join('/'), cutoff);
    });
});

describe('pruning a tree before a cutoff', () => {
  async function treeOf(paths: readonly string[]) {
    const { repo } = await localClone();
    const blob = await git.writeBlob({ fs, gitdir: repo.gitdir, blob: Buffer.from('{}\n') });
    let tree: string | undefined;
    for (const path of paths) {
      const added = await addFile(repo, tree, path, blob);
      assert.ok('tree' in added);
      tree = added.tree;
    }
    const files = async (oid: string | undefined): Promise<string[]> => {
      const found: string[] = [];
      for (const path of paths) if ((await lookup(repo, oid, path)) !== undefined) found.push(path);
      return found;
    };
    return { repo, tree: tree as string, files };
  }

  it('drops older years, months, days and hours along the cutoff, keeps later ones and other clusters, and removes the folders it empties', async () => {
    const kept = [
      'audit/prod/2026/12/31/02/a.jsonl',
      'audit/prod/2026/12/31/23/b.jsonl',
      'audit/prod/2027/01/01/02/c.jsonl',
      'audit/staging/2025/06/01/00/d.jsonl',
    ];
    const dropped = [
      'audit/prod/2025/12/31/23/e.jsonl',
      'audit/prod/2026/11/30/23/f.jsonl',
      'audit/prod/2026/12/30/23/g.jsonl',
      'audit/prod/2026/12/31/01/h.jsonl',
    ];
    const { repo, tree, files } = await treeOf([...kept, ...dropped]);
    const cutoff = windowCutoff('audit/prod/2027/01/01/02/c.jsonl', 24) as string[];
    const pruned = await pruneBefore(repo, tree, cutoff, yearDepth);
    assert.deepEqual(await files(pruned), kept);
    const years = await git.readTree({
      fs,
      gitdir: repo.gitdir,
      oid: pruned as string,
      filepath: 'audit/prod',
    });
    assert.deepEqual(
      years.tree.map((entry) => entry.path),
      ['2026', '2027'],
      'the emptied 2025 folder is gone',
    );
    const months = await git.readTree({
      fs,
      gitdir: repo.gitdir,
      oid: pruned as string,
      filepath: 'audit/prod/2026',
    });
    assert.deepEqual(
      months.tree.map((entry) => entry.path),
      ['12'],
    );
  });

  it('gives the same tree back when nothing is older than the cutoff', async () => {
    const { repo, tree } = await treeOf([
      'audit/prod/2026/11/29/07/a.jsonl',
      'audit/prod/2026/11/29/08/b.jsonl',
    ]);
    const cutoff = windowCutoff('audit/prod/2026/11/29/08/b.jsonl', 24) as string[];
    assert.equal(await pruneBefore(repo, tree, cutoff, yearDepth), tree);
  });
});

describe("the unpushed commits, when the remote's tip dropped their base's folder from its window", () => {
  it('are only those after the base: the base, pushed and then dropped from the remote tip by a commit 30 hours later, is not taken for unpushed', async () => {
    const { repo, clock } = await localClone();
    const start = clock.now();
    const base = await repo.commitFile(
      'audit/prod/2026/11/29/07/T070000Z-c0-000001.jsonl',
      '{}\n',
      'base\n\nTollgate-Batch: intents\n',
    );
    // Another writer's commit on the base 30 hours later, which the remote holds: its
    // tree drops the base's hour folder.
    clock.set(start + 30 * 3_600_000);
    const remote = await repo.commitFile(
      'audit/prod/2026/11/30/13/T130000Z-c1-000001.jsonl',
      '{"n":1}\n',
      'other writer\n\nTollgate-Batch: intents\n',
    );
    await git.writeRef({
      fs,
      gitdir: repo.gitdir,
      ref: 'refs/remotes/origin/tollgate/audit',
      value: remote.oid,
      force: true,
    });
    // This clone's own commit on the base, not pushed.
    await git.writeRef({
      fs,
      gitdir: repo.gitdir,
      ref: 'refs/heads/tollgate/audit',
      value: base.oid,
      force: true,
    });
    clock.set(start + 31 * 3_600_000);
    const mine = await repo.commitFile(
      'audit/prod/2026/11/30/14/T140000Z-c0-000002.jsonl',
      '{"n":2}\n',
      'mine\n\nTollgate-Batch: intents\n',
    );
    assert.equal(
      await lookup(repo, await repo.treeOf(remote.oid), base.path),
      undefined,
      "the remote's tip no longer holds the base's file",
    );
    assert.deepEqual(
      (await repo.unpushed()).map((commit) => commit.oid),
      [mine.oid],
    );
  });
});

describe("the writer's window, from the policy's spec.audit.window", () => {
  /** Two files two hours apart through a writer opened with `windowHours`: is the first still in the tip's tree? */
  async function firstKept(windowHours: number | undefined): Promise<boolean> {
    const clock = new ManualClock(Date.UTC(2026, 10, 29, 7));
    const { writer, repo } = await GitAuditWriter.open({
      url: 'http://127.0.0.1:9/audit.git',
      cacheDir: mkdtempSync(join(tmpdir(), 'tollgate-window-writer-')),
      cluster: 'prod',
      controller: 'tollgate',
      mode: 'async',
      batch: { maxDecisions: 500, maxDelayMs: 1000 },
      clock,
      retry: { maxAttempts: 1 },
      ...(windowHours === undefined ? {} : { treeWindowHours: windowHours }),
    });
    const first = await repo.commitFile(
      'audit/prod/2026/11/29/07/T070000Z-c0-000001.jsonl',
      '{}\n',
      'first\n\nTollgate-Batch: intents\n',
    );
    clock.set(clock.now() + 2 * 3_600_000);
    const second = await repo.commitFile(
      'audit/prod/2026/11/29/09/T090000Z-c0-000002.jsonl',
      '{"n":2}\n',
      'second\n\nTollgate-Batch: intents\n',
    );
    await writer.close({ flush: false });
    return (await lookup(repo, await repo.treeOf(second.oid), first.path)) !== undefined;
  }
  it('1h drops the folder of two hours before; 0h and the default (a day) keep it', async () => {
    assert.equal(await firstKept(1), false);
    assert.equal(await firstKept(0), true);
    assert.equal(await firstKept(undefined), true);
  });
});
