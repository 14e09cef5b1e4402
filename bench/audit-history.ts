/**
 * The audit trail over a long history, against the real Git smart-HTTP server of the
 * tests, through the real writer (GitAuditWriter + AuditRepo, maintenance on):
 *
 *   node [--expose-gc] bench/audit-history.ts [--records 20000] [--per-commit 20] [--every 10s] [--keep-git-cache] [--heap-snapshots 2000,8000]
 *   node bench/audit-history.ts --seed-records 1000000 --records 4000 [--skip-verify]
 *
 * Writes `--records` decision records (intent + outcome pairs, `--per-commit` records
 * per commit) at a simulated pace of one commit every `--every` (an injected clock, so
 * file paths spread over hours and days as in production; wall time is the machine's).
 * Reported, side by side:
 * - commit and push latency of the first and the last 5% of commits (their ratio must
 *   stay near 1: the cost of a commit must not grow with history), and the git objects
 *   each push reads (counted, so the load of the machine does not blur it);
 * - disk of the server's bare repository and of the writer's clone after maintenance,
 *   bytes per record;
 * - term start on a fresh cache (open = shallow fetch, reconcile, recovery read back to
 *   the last checkpoint): time, peak heap and commits read, in a child process, at half
 *   the history and at all of it (their ratio must stay near 1: term start must not
 *   grow with history);
 * - `tollgate audit verify` over the writer's clone: time and peak RSS (/usr/bin/time).
 *
 * With `--seed-records N`, the first N records are synthesized (bench/audit-seed.ts: the
 * real writer's commits streamed into `git fast-import`, pushed in one push), and
 * `--records` become a tail written through the real writer on top, after a term start
 * on a fresh cache (shallow fetch, reconcile), beside a tail of the same size on an
 * empty history in the same run. Reported as ratios of the two: commit and push latency,
 * git objects read per push, term start (time, heap, commits read), and verify (time,
 * peak RSS) over all of each history.
 *
 * Memory of the bench itself stays bounded whatever `--records`: decisions are made per
 * commit and dropped once pushed; it keeps one number per commit (latencies) and reports
 * its own peak RSS, so a 1,000,000-record run (50,000 commits) needs no more than this one.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { writeHeapSnapshot } from 'node:v8';
import { AuditRepo } from '../src/audit/repo.ts';
import { GitAuditWriter, openIntentsDeepening, realTimers } from '../src/audit/writer.ts';
import { timedStore } from './audit-lib.ts';
import {
  benchTrail,
  pushSeeded,
  seedTrail,
  trailWriter,
  writeRound,
  type TrailShape,
} from './audit-seed.ts';
import { parseDuration, ManualClock } from '../src/lib/clock.ts';
import { countingFs } from '../test/support/counting-fs.ts';
import { startGitServer } from '../test/support/git-server.ts';
import { percentile } from './lib.ts';

const run = promisify(execFile);
const root = new URL('../', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '20000' },
    'per-commit': { type: 'string', default: '20' },
    every: { type: 'string', default: '10s' },
    'term-start': { type: 'string' },
    // Records synthesized with git fast-import before the ones written through the writer.
    'seed-records': { type: 'string', default: '0' },
    // Leave out the verify runs (minutes at a million records).
    'skip-verify': { type: 'boolean', default: false },
    // The writer keeps isomorphic-git's cache for its whole life (as before releaseCache).
    'keep-git-cache': { type: 'boolean', default: false },
    // Record counts at which to write a V8 heap snapshot (bench/audit-heap-diff.ts compares them).
    'heap-snapshots': { type: 'string', default: '' },
  },
});

interface TermStart {
  readonly ms: number;
  readonly peakHeapMiB: number;
  readonly open: number;
  readonly commitsRead: number;
  /** Its parts: open (the clone's shallow fetch), reconcile, recovery's read. */
  readonly fetchMs: number;
  readonly reconcileMs: number;
  readonly readMs: number;
  /** The peak heap before reconcile (the fetch's). */
  readonly fetchPeakHeapMiB: number;
  /** The fresh clone on disk after the fetch. */
  readonly clonedKiB: number;
}

async function duKiB(dir: string): Promise<number> {
  return Number((await run('du', ['-sk', dir])).stdout.split('\t')[0]);
}

/** The parts of a term start, for the report. */
const termParts = (term: TermStart): string =>
  `fetch ${term.fetchMs.toFixed(0)} ms (heap ${term.fetchPeakHeapMiB.toFixed(0)} MiB, clone ${(term.clonedKiB / 1024).toFixed(1)} MiB), reconcile ${term.reconcileMs.toFixed(0)} ms, recovery read ${term.readMs.toFixed(0)} ms`;

/** Child mode: one term start on a fresh cache; prints JSON TermStart. */
async function termStart(url: string): Promise<void> {
  let peak = 0;
  const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
  const started = performance.now();
  const cacheDir = mkdtempSync(join(tmpdir(), 'tollgate-bench-term-'));
  const { writer, repo } = await GitAuditWriter.open({
    url,
    token: process.env.BENCH_GIT_TOKEN ?? '',
    cacheDir,
    cluster: 'bench',
    controller: 'bench-term',
    batch: { maxDecisions: 500, maxDelayMs: 200 },
    leftoversAtTermStart: true,
  });
  const fetched = performance.now();
  const fetchPeak = Math.max(peak, process.memoryUsage().heapUsed);
  await writer.reconcile();
  const reconciled = performance.now();
  // The read recovery does (reconcile did it once to seed the writer's open intents).
  const stats = { commits: 0 };
  const open = await openIntentsDeepening(repo, 'bench', stats);
  const ms = performance.now() - started;
  clearInterval(sample);
  peak = Math.max(peak, process.memoryUsage().heapUsed);
  const result: TermStart = {
    ms,
    peakHeapMiB: peak / 2 ** 20,
    open: open.length,
    commitsRead: stats.commits,
    fetchMs: fetched - started,
    reconcileMs: reconciled - fetched,
    readMs: performance.now() - reconciled,
    fetchPeakHeapMiB: fetchPeak / 2 ** 20,
    clonedKiB: await duKiB(cacheDir),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await writer.close();
}

if (values['term-start']) {
  await termStart(values['term-start']);
  process.exit(0);
}

const total = Number(values.records);
const seedRecords = Number(values['seed-records']);
const snapshots = values['heap-snapshots'].split(',').filter(Boolean).map(Number);
const shape: TrailShape = {
  ...benchTrail,
  perCommit: Number(values['per-commit']),
  everyMs: parseDuration(values.every),
};
const branch = 'tollgate/audit';
const load = async (): Promise<string> =>
  (await run('uptime')).stdout.trim().replace(/.*load average/, 'load average');

const server = await startGitServer();
const withToken = (url: string): string => url.replace('://', `://x:${server.token}@`);

/** Latencies and memory of one run of the real writer, one number per commit or cycle. */
interface WriterRun {
  readonly commitMs: number[];
  readonly pushMs: number[];
  readonly pushReads: number[];
  /** The writer process's RSS and Buffer memory after each cycle, MiB. */
  readonly rssMiB: number[];
  readonly buffersMiB: number[];
  readonly seconds: number;
  /** The writer's clone (its cache folder). */
  readonly cacheDir: string;
}

/**
 * `records` records through the real writer (AuditRepo over the counting fs, maintenance
 * on) onto the branch at `url`, from record `first` on, at the clock `clock`. A branch
 * the server already holds is taken up as a new term does: a fresh cache (shallow
 * clone), then reconcile (open intents and checkpoint cadence from the trail).
 * `beforeRound` runs before each round (the half-history term start).
 */
async function writeWithWriter(
  url: string,
  options: {
    readonly first: number;
    readonly records: number;
    readonly clock: ManualClock;
    readonly controller: string;
    readonly beforeRound?: (done: number) => Promise<void>;
  },
): Promise<WriterRun> {
  const times = { commitMs: [] as number[], pushMs: [] as number[] };
  const reads = countingFs();
  const pushReads = { counts: [] as number[], objectReads: reads.objectReads };
  const rssMiB: number[] = [];
  const buffersMiB: number[] = [];
  const cacheDir = mkdtempSync(join(tmpdir(), 'tollgate-bench-history-'));
  const repo = new AuditRepo({
    dir: join(cacheDir, 'audit.git'),
    url,
    branch,
    token: server.token,
    author: shape.author,
    clock: options.clock,
    fs: reads.fs,
  });
  await repo.open();
  await repo.fetch();
  const store = timedStore(repo, { ...times, pushReads }, values['keep-git-cache']);
  const writer = trailWriter(
    store,
    { ...shape, controller: options.controller },
    options.clock,
    realTimers,
  );
  await writer.reconcile();
  const started = performance.now();
  for (let done = 0; done < options.records; done += 2 * shape.perCommit) {
    await options.beforeRound?.(done);
    await writeRound(writer, options.clock, options.first + done, shape);
    // With --expose-gc the sample is what stays reachable, not garbage awaiting collection.
    (globalThis as { gc?: () => void }).gc?.();
    const memory = process.memoryUsage();
    rssMiB.push(memory.rss / 2 ** 20);
    buffersMiB.push(memory.arrayBuffers / 2 ** 20);
    const written = done + 2 * shape.perCommit;
    const snapshotAt = snapshots.find((at) => written >= at && written - 2 * shape.perCommit < at);
    if (snapshotAt !== undefined)
      process.stderr.write(`heap snapshot at ${written} records: ${writeHeapSnapshot()}\n`);
  }
  await writer.close();
  const seconds = (performance.now() - started) / 1000;
  await repo.maintain();
  return { ...times, pushReads: pushReads.counts, rssMiB, buffersMiB, seconds, cacheDir };
}

/** A term start on a fresh cache against the branch as it is now, in a child process. */
const measureTermStart = (url: string): Promise<TermStart> =>
  new Promise<TermStart>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(root, 'bench/audit-history.ts'), '--term-start', url],
      {
        env: { ...process.env, BENCH_GIT_TOKEN: server.token },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(out.trim().split('\n').at(-1) as string) as TermStart)
        : reject(new Error(`term start exited ${code}`)),
    );
  });

/** `tollgate audit verify` over a repository folder: time, peak RSS and its first line. */
async function measureVerify(
  dir: string,
): Promise<{ seconds: number; rssMiB: number; says: string }> {
  if (values['skip-verify']) return { seconds: NaN, rssMiB: NaN, says: 'not run (--skip-verify)' };
  const verify = await run(
    '/usr/bin/time',
    [
      '-f',
      'TIME %e %M',
      process.execPath,
      // As users start it: bin/tollgate.js sets verify's memory flags (src/cli/memory-flags.ts).
      join(root, 'bin/tollgate.js'),
      'audit',
      'verify',
      '--repo',
      dir,
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  ).catch((error: { stdout: string; stderr: string }) => error);
  const [seconds, kib] = (verify.stderr.match(/TIME (\S+) (\S+)/)?.slice(1) ?? ['NaN', 'NaN']).map(
    Number,
  ) as [number, number];
  return { seconds, rssMiB: kib / 1024, says: verify.stdout.split('\n')[0] ?? '' };
}

const slice = (list: number[], from: number, to: number): number[] =>
  list.slice(Math.floor(list.length * from), Math.ceil(list.length * to));
const median = (list: number[]): number => percentile(list, 50);
const ratio = (after: number, before: number): string => (after / before).toFixed(2);
const mib = (kib: number): string => (kib / 1024).toFixed(1);

let peakRss = 0;
const rssSample = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
const report: string[] = [`start: ${await load()}`];

if (seedRecords === 0) {
  // One trail through the real writer from empty; term start at half of it and at all.
  const url = server.createRepo('history');
  const bare = join(server.root, 'history.git');
  const emptyKiB = await duKiB(bare);
  let halfway: TermStart | undefined;
  const written = await writeWithWriter(url, {
    first: 0,
    records: total,
    clock: new ManualClock(Date.UTC(2026, 0, 1)),
    controller: shape.controller,
    beforeRound: async (done) => {
      if (halfway === undefined && done >= total / 2) halfway = await measureTermStart(url);
    },
  });
  const serverKiB = (await duKiB(bare)) - emptyKiB;
  const cloneKiB = await duKiB(join(written.cacheDir, 'audit.git'));
  const term = await measureTermStart(url);
  const half = halfway ?? term;
  const verify = await measureVerify(written.cacheDir);
  const { commitMs, pushMs, pushReads, rssMiB, buffersMiB } = written;
  const firstCommit = median(slice(commitMs, 0, 0.05));
  const lastCommit = median(slice(commitMs, 0.95, 1));
  const firstPush = median(slice(pushMs, 0, 0.05));
  const lastPush = median(slice(pushMs, 0.95, 1));
  // Memory once the first maintenance packed the clone (after 10%), against the end.
  const firstRss = median(slice(rssMiB, 0.1, 0.15));
  const lastRss = median(slice(rssMiB, 0.95, 1));
  const firstBuffers = median(slice(buffersMiB, 0.1, 0.15));
  const lastBuffers = median(slice(buffersMiB, 0.95, 1));
  report.push(
    `audit history bench: ${total} records, ${shape.perCommit} per commit, ${commitMs.length} commits, one every ${values.every} (simulated ${((commitMs.length * shape.everyMs) / 3_600_000).toFixed(1)} h), written in ${written.seconds.toFixed(0)} s`,
    `commit median first 5% ${firstCommit.toFixed(1)} ms, last 5% ${lastCommit.toFixed(1)} ms (ratio ${ratio(lastCommit, firstCommit)})`,
    `push median first 5% ${firstPush.toFixed(1)} ms, last 5% ${lastPush.toFixed(1)} ms (ratio ${ratio(lastPush, firstPush)}); git objects read per push, median first 5% ${median(slice(pushReads, 0, 0.05))} / last 5% ${median(slice(pushReads, 0.95, 1))}, most ${Math.max(...pushReads)}`,
    `disk: server repo ${mib(serverKiB)} MiB (${((serverKiB * 1024) / total).toFixed(0)} B/record), writer clone after maintenance ${mib(cloneKiB)} MiB (${((cloneKiB * 1024) / total).toFixed(0)} B/record)`,
    `term start (fresh cache: shallow fetch + reconcile + recovery read to the last checkpoint), half the history / all of it: ${half.ms.toFixed(0)} / ${term.ms.toFixed(0)} ms (ratio ${ratio(term.ms, half.ms)}), peak heap ${half.peakHeapMiB.toFixed(0)} / ${term.peakHeapMiB.toFixed(0)} MiB (ratio ${ratio(term.peakHeapMiB, half.peakHeapMiB)}), commits read ${half.commitsRead} / ${term.commitsRead}, open intents ${term.open}`,
    `term start parts, half / all: ${termParts(half)}; ${termParts(term)}`,
    `writer RSS median at 10-15% / last 5% of the history ${firstRss.toFixed(0)} / ${lastRss.toFixed(0)} MiB (ratio ${ratio(lastRss, firstRss)}), Buffers ${firstBuffers.toFixed(1)} / ${lastBuffers.toFixed(1)} MiB (ratio ${ratio(lastBuffers, firstBuffers)})`,
    `verify over the clone: ${verify.seconds} s, peak RSS ${verify.rssMiB.toFixed(0)} MiB; ${verify.says}`,
  );
} else {
  // A synthesized history of seedRecords, then a tail through the real writer on it,
  // beside the same tail on an empty history: every figure as the ratio of the two.
  const seededUrl = server.createRepo('seeded');
  const emptyUrl = server.createRepo('empty');
  const seededBare = join(server.root, 'seeded.git');
  const emptyBare = join(server.root, 'empty.git');
  const emptyKiB = await duKiB(emptyBare);
  const seedDir = mkdtempSync(join(tmpdir(), 'tollgate-bench-seed-'));
  const seedStarted = performance.now();
  const start = Date.UTC(2026, 0, 1);
  const seeded = await seedTrail({
    ...shape,
    gitdir: seedDir,
    branch,
    records: seedRecords,
    start,
  });
  const seedSeconds = (performance.now() - seedStarted) / 1000;
  const pushStarted = performance.now();
  await pushSeeded(seedDir, branch, withToken(seededUrl));
  const seedPushSeconds = (performance.now() - pushStarted) / 1000;
  const seedServerKiB = (await duKiB(seededBare)) - emptyKiB;
  const seedLocalKiB = await duKiB(seedDir);
  report.push(
    `seed: ${seedRecords} records, ${seeded.commits} commits (${shape.perCommit} records per commit, a checkpoint every ${shape.checkpointEvery}), synthesized by the writer into git fast-import in ${seedSeconds.toFixed(1)} s, pushed in one push in ${seedPushSeconds.toFixed(1)} s; server repo ${mib(seedServerKiB)} MiB (${((seedServerKiB * 1024) / seedRecords).toFixed(0)} B/record, as one pushed pack), fast-import's repo ${mib(seedLocalKiB)} MiB; ${await load()}`,
  );
  rmSync(seedDir, { recursive: true, force: true });
  // The same tail, on the empty history first, then on the seeded one (a new writer).
  const tails = new Map<string, WriterRun>();
  for (const [name, url] of [
    ['empty', emptyUrl],
    ['seeded', seededUrl],
  ] as const) {
    const clock = new ManualClock(seeded.clock.now());
    tails.set(
      name,
      await writeWithWriter(url, {
        first: seedRecords,
        records: total,
        clock,
        controller: 'bench-1',
      }),
    );
    report.push(`tail on the ${name} history written; ${await load()}`);
  }
  const onEmpty = tails.get('empty') as WriterRun;
  const onSeeded = tails.get('seeded') as WriterRun;
  const termEmpty = await measureTermStart(emptyUrl);
  const termSeeded = await measureTermStart(seededUrl);
  report.push(`term starts measured; ${await load()}`);
  const verifyEmpty = await measureVerify(emptyBare);
  const verifySeeded = await measureVerify(seededBare);
  report.push(`verify measured; ${await load()}`);
  const both = (pick: (tail: WriterRun) => number[]): [number, number] => [
    median(pick(onEmpty)),
    median(pick(onSeeded)),
  ];
  const [commitEmpty, commitOnSeeded] = both((tail) => tail.commitMs);
  const [pushEmpty, pushOnSeeded] = both((tail) => tail.pushMs);
  const [readsEmpty, readsSeeded] = both((tail) => tail.pushReads);
  const serverSeededKiB = (await duKiB(seededBare)) - emptyKiB;
  const serverEmptyKiB = (await duKiB(emptyBare)) - emptyKiB;
  const cloneEmptyKiB = await duKiB(join(onEmpty.cacheDir, 'audit.git'));
  const cloneSeededKiB = await duKiB(join(onSeeded.cacheDir, 'audit.git'));
  const all = seedRecords + total;
  report.push(
    `tail: ${total} records (${onSeeded.commitMs.length} commits) through the real writer, on an empty history / on ${seedRecords} records: written in ${onEmpty.seconds.toFixed(0)} / ${onSeeded.seconds.toFixed(0)} s`,
    `commit median ${commitEmpty.toFixed(1)} / ${commitOnSeeded.toFixed(1)} ms (ratio ${ratio(commitOnSeeded, commitEmpty)}); first 5% / last 5% of the tail on the seeded history ${median(slice(onSeeded.commitMs, 0, 0.05)).toFixed(1)} / ${median(slice(onSeeded.commitMs, 0.95, 1)).toFixed(1)} ms`,
    `push median ${pushEmpty.toFixed(1)} / ${pushOnSeeded.toFixed(1)} ms (ratio ${ratio(pushOnSeeded, pushEmpty)}); first 5% / last 5% of the tail on the seeded history ${median(slice(onSeeded.pushMs, 0, 0.05)).toFixed(1)} / ${median(slice(onSeeded.pushMs, 0.95, 1)).toFixed(1)} ms`,
    `git objects read per push, median ${readsEmpty} / ${readsSeeded} (ratio ${ratio(readsSeeded, readsEmpty)}), most ${Math.max(...onEmpty.pushReads)} / ${Math.max(...onSeeded.pushReads)}`,
    `term start (fresh cache: shallow fetch + reconcile + recovery read to the last checkpoint) at ${total} / ${all} records: ${termEmpty.ms.toFixed(0)} / ${termSeeded.ms.toFixed(0)} ms (ratio ${ratio(termSeeded.ms, termEmpty.ms)}), peak heap ${termEmpty.peakHeapMiB.toFixed(0)} / ${termSeeded.peakHeapMiB.toFixed(0)} MiB (ratio ${ratio(termSeeded.peakHeapMiB, termEmpty.peakHeapMiB)}), commits read ${termEmpty.commitsRead} / ${termSeeded.commitsRead}, open intents ${termEmpty.open} / ${termSeeded.open}`,
    `term start parts, ${total} records: ${termParts(termEmpty)}; ${all} records: ${termParts(termSeeded)}`,
    `verify over the server repo, ${total} / ${all} records: ${verifyEmpty.seconds} / ${verifySeeded.seconds} s (ratio ${ratio(verifySeeded.seconds, verifyEmpty.seconds)}), peak RSS ${verifyEmpty.rssMiB.toFixed(0)} / ${verifySeeded.rssMiB.toFixed(0)} MiB (ratio ${ratio(verifySeeded.rssMiB, verifyEmpty.rssMiB)}); ${verifyEmpty.says} / ${verifySeeded.says}`,
    `disk: server repo ${mib(serverEmptyKiB)} / ${mib(serverSeededKiB)} MiB (${((serverSeededKiB * 1024) / all).toFixed(0)} B/record on the seeded one); writer clone after maintenance (shallow: a fresh cache) ${mib(cloneEmptyKiB)} / ${mib(cloneSeededKiB)} MiB`,
    `writer RSS median over the tail ${median(onEmpty.rssMiB).toFixed(0)} / ${median(onSeeded.rssMiB).toFixed(0)} MiB`,
  );
}
clearInterval(rssSample);
await server.close();
report.push(`bench process peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB; end: ${await load()}`);
process.stdout.write(`${report.join('\n')}\n`);
