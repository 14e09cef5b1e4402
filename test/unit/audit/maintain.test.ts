/**
 * The writer's clone on disk. Maintenance: loose objects packed, unreachable ones pruned, the
 * history still readable and verifiable, and the clone still writable afterwards.
 * A real bare repository on disk (no remote is needed for local commits).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import git from 'isomorphic-git';
import { packsToMerge } from '../../../src/audit/repo.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import { intentsWithoutOutcome, openIntents } from '../../../src/audit/recover.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { localClone, type LocalClone } from '../../support/audit-clone.ts';

const looseCount = (gitdir: string): number =>
  readdirSync(join(gitdir, 'objects'))
    .filter((name) => /^[0-9a-f]{2}$/.test(name))
    .reduce((sum, name) => sum + readdirSync(join(gitdir, 'objects', name)).length, 0);

test('maintenance packs what the clone wrote, prunes what no branch reaches, and the trail stays readable and writable', async () => {
  const { dir, clock, repo } = await localClone();
  const write = async (index: number): Promise<void> => {
    const intent = aDecision('Release', `p${index}`).obj();
    clock.advance(10_000);
    await repo.commitFile(`audit/prod/i-${index}.jsonl`, serializeBatch([intent]), `i ${index}\n`);
    await repo.commitFile(
      `audit/prod/o-${index}.jsonl`,
      serializeBatch([outcomeOf(intent)]),
      `o ${index}\n`,
    );
  };
  for (let index = 0; index < 20; index += 1) await write(index);
  // A commit nothing points to (as a rebuild after a lost race leaves behind).
  const tip = await repo.localTip();
  await git.writeCommit({
    fs,
    gitdir: dir,
    commit: {
      message: 'replaced\n',
      tree: (await repo.treeOf(tip)) as string,
      parent: [],
      author: { name: 't', email: 't@t', timestamp: 0, timezoneOffset: 0 },
      committer: { name: 't', email: 't@t', timestamp: 0, timezoneOffset: 0 },
    },
  });
  const before = looseCount(dir);

  const first = await repo.maintain();
  assert.equal(looseCount(dir), 0, 'no loose object left');
  assert.equal(first.pruned, 1, 'the unreachable commit is pruned');
  assert.equal(first.packed, before - 1);

  for (let index = 20; index < 25; index += 1) await write(index);
  const second = await repo.maintain();
  assert.equal(looseCount(dir), 0);
  assert.ok(second.packed > 0 && second.packed < first.packed, 'only what was written since');

  const source = await openAuditSource(dir, 'tollgate/audit');
  const history = await readAuditHistory(source);
  assert.equal(history.length, 50);
  const report = verifyTrail(history);
  assert.deepEqual([report.ok, report.intents, report.outcomes], [true, 25, 25]);
});

test('recovery streams the open intents of its cluster from a real clone: the same answer as reading the whole history', async () => {
  const { dir, clock, repo } = await localClone();
  const [done, open, elsewhere, later] = ['done', 'open', 'elsewhere', 'later'].map((name) =>
    aDecision('Release', name).obj(),
  ) as [Decision, Decision, Decision, Decision];
  const files: [string, Decision[]][] = [
    ['audit/other/0.jsonl', [elsewhere]],
    ['audit/prod/1.jsonl', [done, open]],
    ['audit/other/2.jsonl', [outcomeOf(open)]],
    ['audit/prod/3.jsonl', [outcomeOf(done)]],
    ['audit/prod/4.jsonl', [later]],
  ];
  for (const [path, decisions] of files) {
    clock.advance(1_000);
    await repo.commitFile(path, serializeBatch(decisions), `${path}\n`);
  }
  const source = await openAuditSource(dir, 'tollgate/audit');
  const streamed = await openIntents(source, 'prod');
  assert.deepEqual(
    streamed.map((intent) => intent.target.name),
    ['open', 'later'],
  );
  assert.deepEqual(
    streamed.map((intent) => intent.id),
    intentsWithoutOutcome(await readAuditHistory(source), 'prod').map((intent) => intent.id),
  );
});

const packCount = (gitdir: string): number =>
  readdirSync(join(gitdir, 'objects', 'pack')).filter((name) => name.endsWith('.pack')).length;

/** `count` releases (intent and outcome in one file each) committed as round `round`. */
async function writeRound(
  { clock, repo }: Pick<LocalClone, 'clock' | 'repo'>,
  round: number,
  count: number,
  folder = 'audit/prod',
): Promise<void> {
  for (let index = 0; index < count; index += 1) {
    const intent = aDecision('Release', `p${round}-${index}`).obj();
    clock.advance(10_000);
    await repo.commitFile(
      `${folder}/${round}-${index}.jsonl`,
      serializeBatch([intent, outcomeOf(intent)]),
      `r ${round} ${index}
`,
    );
  }
}

test('maintenance merges small packs geometrically: after many rounds the clone holds a few packs, not one per round, and the trail stays whole', async () => {
  const { dir, clock, repo } = await localClone();
  const rounds = 24;
  const packs: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    await writeRound({ clock, repo }, round, 3);
    await repo.maintain();
    packs.push(packCount(dir));
  }
  // Each pack kept is at least twice as large as all smaller ones together: about log2(rounds).
  assert.ok(Math.max(...packs) <= 6, `packs after each round: ${packs.join(',')}`);
  assert.equal(looseCount(dir), 0);
  const source = await openAuditSource(dir, 'tollgate/audit');
  const report = verifyTrail(await readAuditHistory(source));
  assert.deepEqual([report.ok, report.commits, report.intents], [true, rounds * 3, rounds * 3]);
  // The clone stays writable and readable through the writer's own cache after merges.
  await repo.commitFile(
    'audit/prod/last.jsonl',
    serializeBatch([aDecision('Hold', 'x').obj()]),
    'x\n',
  );
  assert.equal(
    (await readAuditHistory(await openAuditSource(dir, 'tollgate/audit'))).length,
    rounds * 3 + 1,
  );
});

test('packsToMerge: every pack smaller than twice all smaller ones together is merged; a geometric set is left alone', async (t) => {
  const cases: { name: string; sizes: number[]; merged: number[] }[] = [
    { name: 'one pack: nothing to merge', sizes: [10], merged: [] },
    { name: 'two equal packs are merged', sizes: [10, 10], merged: [10, 10] },
    { name: 'a geometric set is left alone', sizes: [1, 2, 6, 20], merged: [] },
    {
      name: 'a big pack stays, the small ones are merged',
      sizes: [1000, 10, 10, 10],
      merged: [10, 10, 10],
    },
    {
      name: 'a pack that breaks the progression takes all smaller ones with it',
      sizes: [1, 2, 6, 10, 100],
      merged: [1, 2, 6, 10],
    },
  ];
  for (const c of cases)
    await t.test(c.name, () =>
      assert.deepEqual(
        packsToMerge(c.sizes.map((size) => ({ size }))).map((pack) => pack.size),
        c.merged,
      ),
    );
});

test('packsToMerge never merges more than its byte limit at once: merging reads every object of its packs into memory (the seed-3 and seed-4 soaks saw a leader RSS jump 362 -> 634 MB while its 57 MB clone was merged)', async (t) => {
  const MiB = 1024 * 1024;
  const cases: { name: string; sizes: number[]; limit: number; merged: number[] }[] = [
    {
      name: 'two big equal packs stay apart',
      sizes: [40 * MiB, 30 * MiB],
      limit: 16 * MiB,
      merged: [],
    },
    {
      name: 'small packs are merged up to the limit, the next one waits',
      sizes: [6 * MiB, 6 * MiB, 6 * MiB, 6 * MiB],
      limit: 16 * MiB,
      merged: [6 * MiB, 6 * MiB],
    },
    {
      name: 'under the limit the geometric rule is unchanged',
      sizes: [1, 2, 6, 10, 100],
      limit: 16 * MiB,
      merged: [1, 2, 6, 10],
    },
    {
      name: 'the default limit is 16 MiB',
      sizes: [20 * MiB, 20 * MiB],
      limit: Number.NaN,
      merged: [],
    },
  ];
  for (const c of cases)
    await t.test(c.name, () =>
      assert.deepEqual(
        (Number.isNaN(c.limit)
          ? packsToMerge(c.sizes.map((size) => ({ size })))
          : packsToMerge(
              c.sizes.map((size) => ({ size })),
              c.limit,
            )
        ).map((pack) => pack.size),
        c.merged,
      ),
    );
});

test('maintenance compresses with node:zlib as it goes, not with a CompressionStream per object (whose native buffers outlive the merge until a collection: a leader RSS +80% in the seed-7 30-minute soak, heap flat), and real git finds the packs and indexes sound', async () => {
  const { dir, clock, repo } = await localClone();
  for (let round = 0; round < 6; round += 1) {
    await writeRound({ clock, repo }, round, 4);
    const Native = globalThis.CompressionStream;
    let streams = 0;
    globalThis.CompressionStream = class extends Native {
      constructor(format: ConstructorParameters<typeof Native>[0]) {
        super(format);
        streams += 1;
      }
    };
    try {
      await repo.maintain();
    } finally {
      globalThis.CompressionStream = Native;
    }
    assert.equal(streams, 0, `round ${round}: ${streams} CompressionStreams made by maintenance`);
  }
  assert.equal(looseCount(dir), 0);
  const run = (args: string[]): string =>
    execFileSync('git', ['--git-dir', dir, ...args], { encoding: 'utf8' });
  run(['fsck', '--strict', '--no-dangling']);
  for (const name of readdirSync(join(dir, 'objects', 'pack')).filter((n) => n.endsWith('.idx')))
    run(['verify-pack', join(dir, 'objects', 'pack', name)]);
  const report = verifyTrail(await readAuditHistory(await openAuditSource(dir, 'tollgate/audit')));
  assert.deepEqual([report.ok, report.commits], [true, 24]);
});

test('maintenance merges packs holding deltas (as fetched packs do) without inflating them: a delta by offset is copied naming its base by id, and real git and the trail read the merged pack as before', async () => {
  const { dir, clock, repo } = await localClone();
  const git = (args: string[]): string =>
    execFileSync('git', ['--git-dir', dir, ...args], { encoding: 'utf8' });
  const deltas = (): number =>
    readdirSync(join(dir, 'objects', 'pack'))
      .filter((name) => name.endsWith('.idx'))
      .flatMap((name) => git(['verify-pack', '-v', join(dir, 'objects', 'pack', name)]).split('\n'))
      .filter((line) =>
        /^[0-9a-f]{40} (tree|blob|commit) +\d+ \d+ \d+ \d+ [0-9a-f]{40}$/.test(line),
      ).length;
  for (let round = 0; round < 2; round += 1) {
    // One hour folder that grows: each commit's tree is the last one plus a file (deltas).
    await writeRound({ clock, repo }, round, 12, 'audit/prod/2026/01/01/00');
    git(['repack', '-d', '--window=50', '--depth=50']); // the loose objects, as one pack with deltas
  }
  const before = deltas();
  assert.ok(before > 0, 'the packs to merge hold deltas');
  const history = async () =>
    (await readAuditHistory(await openAuditSource(dir, 'tollgate/audit'))).map((c) => ({
      oid: c.oid,
      records: c.records,
    }));
  const read = await history();
  repo.releaseCache();

  const { merged } = await repo.maintain();
  assert.equal(merged, 2);
  git(['fsck', '--strict', '--no-dangling']);
  assert.equal(deltas(), before, 'the deltas stay deltas (copied, not inflated)');
  repo.releaseCache();
  assert.deepEqual(await history(), read);
});
