/**
 * Tree surgery (src/audit/tree.ts) on real git objects in a bare repository on disk: what
 * a commit of the audit writer reads. Trees the writer has just written are known to it,
 * so adding the next file under the same folders reads none of them back from disk.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import git from 'isomorphic-git';
import { addFile, diffTrees, lookup, objectsAdded } from '../../../src/audit/tree.ts';
import { localClone } from '../../support/audit-clone.ts';
import { countingFs } from '../../support/counting-fs.ts';

async function repoCountingReads() {
  const { repo } = await localClone();
  const counted = countingFs();
  const counting = { gitdir: repo.gitdir, cache: {}, fs: counted.fs };
  const blob = await git.writeBlob({ fs, gitdir: repo.gitdir, blob: Buffer.from('{}\n') });
  return { counting, blob, objectReads: counted.objectReads };
}

const hour = 'audit/prod/2026/11/29/07';

describe('adding files to a tree', () => {
  it('a file added under folders the writer just wrote reads none of their trees back', async () => {
    const { counting, blob, objectReads } = await repoCountingReads();
    const first = await addFile(counting, undefined, `${hour}/a.jsonl`, blob);
    assert.ok('tree' in first);
    const before = objectReads();
    const second = await addFile(counting, first.tree, `${hour}/b.jsonl`, blob);
    assert.ok('tree' in second);
    assert.equal(objectReads() - before, 0, 'trees read back from disk');
    for (const file of ['a', 'b'])
      assert.equal(await lookup(counting, second.tree, `${hour}/${file}.jsonl`), blob);
  });

  it('trees known from their writing answer as trees read from disk do, in git order', async () => {
    const { counting, blob } = await repoCountingReads();
    let tree: string | undefined;
    const names = ['07/b.jsonl', '07/a.jsonl', '07/a-1', '07/a/x.jsonl', '08/c.jsonl'];
    // Beyond ASCII, git orders names by their UTF-8 bytes, not by UTF-16 units.
    names.push('07/\u00e9.jsonl', '07/\ue000.jsonl', '07/\u{1f600}.jsonl', '07/z.jsonl');
    for (const name of names) {
      const own = await git.writeBlob({ fs, gitdir: counting.gitdir, blob: Buffer.from(name) });
      const added = await addFile(counting, tree, `audit/prod/2026/11/29/${name}`, own);
      assert.ok('tree' in added);
      tree = added.tree;
    }
    const next = await addFile(counting, tree, `${hour}/d.jsonl`, blob);
    assert.ok('tree' in next);
    const fromDisk = { gitdir: counting.gitdir, cache: {} };
    assert.deepEqual(
      await objectsAdded(counting, undefined, next.tree),
      await objectsAdded(fromDisk, undefined, next.tree),
    );
    assert.deepEqual(
      await diffTrees(counting, tree, next.tree),
      await diffTrees(fromDisk, tree, next.tree),
    );
  });
});
