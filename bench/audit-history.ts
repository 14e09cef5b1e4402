/**
 * The audit trail over a long history, against the real Git smart-HTTP server of the
 * tests, through the real writer (GitAuditWriter + AuditRepo, maintenance on):
 *
 *   node [--expose-gc] bench/audit-history.ts [--records 20000] [--per-commit 20] [--every 10s] [--keep-git-cache] [--heap-snapshots 2000,8000]
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
 * Memory of the bench itself stays bounded whatever `--records`: decisions are made per
 * commit and dropped once pushed; it keeps one number per commit (latencies) and reports
 * its own peak RSS, so a 1,000,000-record run (50,000 commits) needs no more than this one.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { writeHeapSnapshot } from 'node:v8';
import { AuditRepo } from '../src/audit/repo.ts';
import { GitAuditWriter, openIntentsDeepening } from '../src/audit/writer.ts';
import { timedStore } from './audit-lib.ts';
import type { Decision } from '../src/decide/decision.ts';
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
}

/** Child mode: one term start on a fresh cache; prints JSON TermStart. */
async function termStart(url: string): Promise<void> {
  let peak = 0;
  const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
  const started = performance.now();
  const { writer, repo } = await GitAuditWriter.open({
    url,
    token: process.env.BENCH_GIT_TOKEN ?? '',
    cacheDir: mkdtempSync(join(tmpdir(), 'tollgate-bench-term-')),
    cluster: 'bench',
    controller: 'bench-term',
    batch: { maxDecisions: 500, maxDelayMs: 200 },
    leftoversAtTermStart: true,
  });
  await writer.reconcile();
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
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await writer.close();
}

if (values['term-start']) {
  await termStart(values['term-start']);
  process.exit(0);
}

const total = Number(values.records);
const snapshots = values['heap-snapshots'].split(',').filter(Boolean).map(Number);
const perCommit = Number(values['per-commit']);
const everyMs = parseDuration(values.every);

const duKiB = async (dir: string): Promise<number> =>
  Number((await run('du', ['-sk', dir])).stdout.split('\t')[0]);

const server = await startGitServer();
const url = server.createRepo('history');
const bare = join(server.root, 'history.git');
const emptyKiB = await duKiB(bare);
const clock = new ManualClock(Date.UTC(2026, 0, 1));

const commitMs: number[] = [];
const pushMs: number[] = [];
const reads = countingFs();
const pushReads = { counts: [] as number[], objectReads: reads.objectReads };
/** The writer process's RSS and Buffer memory after each cycle, MiB. */
const rssMiB: number[] = [];
const buffersMiB: number[] = [];
const cacheDir = mkdtempSync(join(tmpdir(), 'tollgate-bench-history-'));
const repo = new AuditRepo({
  dir: join(cacheDir, 'audit.git'),
  url,
  branch: 'tollgate/audit',
  token: server.token,
  author: { name: 'tollgate bench', email: 'bench@tollgate.invalid' },
  clock,
  fs: reads.fs,
});
await repo.open();
await repo.fetch();
const store = timedStore(repo, { commitMs, pushMs, pushReads }, values['keep-git-cache']);
const writer = new GitAuditWriter({
  store,
  cluster: 'bench',
  controller: 'bench-0',
  batch: { maxDecisions: perCommit, maxDelayMs: 1_000 },
  clock,
});
writer.seedOpenIntents([]); // a new branch: nothing open (checkpoints from here on)

function decision(index: number): Decision {
  const name = `p${index}`;
  return {
    id: `gate-release:Release:uid-${name}:${1000 + index}:${clock.now()}`,
    at: clock.now(),
    loop: 'gate-release',
    kind: 'Release',
    tenant: `team-${index % 4}`,
    target: {
      namespace: `team-${index % 4}`,
      name,
      uid: `uid-${name}`,
      resourceVersion: String(1000 + index),
    },
    policy: { commit: 'f'.repeat(40), file: `tenants/team-${index % 4}.yaml`, name: 'batch-jobs' },
    inputs: [
      {
        condition: 'Budget',
        met: true,
        value: { cpuUsed: 1000 + (index % 5000), cpuLimit: 64_000, podsUsed: index % 50 },
      },
    ],
    reason: 'all conditions met',
    outcome: { result: 'pending' },
  };
}

/** A term start on a fresh cache against the branch as it is now, in a child process. */
const measureTermStart = (): Promise<TermStart> =>
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

let peakRss = 0;
const rssSample = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
let halfway: TermStart | undefined;
const started = performance.now();
for (let done = 0; done < total; done += 2 * perCommit) {
  if (halfway === undefined && done >= total / 2) halfway = await measureTermStart();
  const intents = Array.from({ length: perCommit }, (_, index) => decision(done + index));
  clock.advance(everyMs);
  await writer.recordIntents(intents);
  clock.advance(everyMs);
  writer.record(
    intents.map((item) => ({ ...item, at: clock.now(), outcome: { result: 'succeeded' } })),
  );
  await writer.flush();
  // With --expose-gc the sample is what stays reachable, not garbage awaiting collection.
  (globalThis as { gc?: () => void }).gc?.();
  const memory = process.memoryUsage();
  rssMiB.push(memory.rss / 2 ** 20);
  buffersMiB.push(memory.arrayBuffers / 2 ** 20);
  const written = done + 2 * perCommit;
  const snapshotAt = snapshots.find((at) => written >= at && written - 2 * perCommit < at);
  if (snapshotAt !== undefined)
    process.stderr.write(`heap snapshot at ${written} records: ${writeHeapSnapshot()}\n`);
}
await writer.close();
const writeSeconds = (performance.now() - started) / 1000;
await repo.maintain();
const commits = commitMs.length;
const serverKiB = (await duKiB(bare)) - emptyKiB;
const cloneKiB = await duKiB(join(cacheDir, 'audit.git'));

const term = await measureTermStart();
clearInterval(rssSample);
const half = halfway ?? term;

const verify = await run(
  '/usr/bin/time',
  [
    '-f',
    'TIME %e s %M KiB',
    process.execPath,
    join(root, 'src/cli/main.ts'),
    'audit',
    'verify',
    '--repo',
    cacheDir,
  ],
  { maxBuffer: 64 * 1024 * 1024 },
).catch((error: { stdout: string; stderr: string }) => error);
await server.close();

const slice = (values: number[], from: number, to: number): number[] =>
  values.slice(Math.floor(values.length * from), Math.ceil(values.length * to));
const median = (values: number[]): number => percentile(values, 50);
const firstCommit = median(slice(commitMs, 0, 0.05));
const lastCommit = median(slice(commitMs, 0.95, 1));
const firstPush = median(slice(pushMs, 0, 0.05));
const lastPush = median(slice(pushMs, 0.95, 1));
const firstReads = median(slice(pushReads.counts, 0, 0.05));
const lastReads = median(slice(pushReads.counts, 0.95, 1));
// Memory once the first maintenance packed the clone (after 10%), against the end.
const firstRss = median(slice(rssMiB, 0.1, 0.15));
const lastRss = median(slice(rssMiB, 0.95, 1));
const firstBuffers = median(slice(buffersMiB, 0.1, 0.15));
const lastBuffers = median(slice(buffersMiB, 0.95, 1));
const report = [
  `audit history bench: ${total} records, ${perCommit} per commit, ${commits} commits, one every ${values.every} (simulated ${((commits * everyMs) / 3_600_000).toFixed(1)} h), written in ${writeSeconds.toFixed(0)} s`,
  `commit median first 5% ${firstCommit.toFixed(1)} ms, last 5% ${lastCommit.toFixed(1)} ms (ratio ${(lastCommit / firstCommit).toFixed(2)})`,
  `push median first 5% ${firstPush.toFixed(1)} ms, last 5% ${lastPush.toFixed(1)} ms (ratio ${(lastPush / firstPush).toFixed(2)}); git objects read per push, median first 5% ${firstReads} / last 5% ${lastReads}, most ${Math.max(...pushReads.counts)}`,
  `disk: server repo ${(serverKiB / 1024).toFixed(1)} MiB (${((serverKiB * 1024) / total).toFixed(0)} B/record), writer clone after maintenance ${(cloneKiB / 1024).toFixed(1)} MiB (${((cloneKiB * 1024) / total).toFixed(0)} B/record)`,
  `term start (fresh cache: shallow fetch + reconcile + recovery read to the last checkpoint), half the history / all of it: ${half.ms.toFixed(0)} / ${term.ms.toFixed(0)} ms (ratio ${(term.ms / half.ms).toFixed(2)}), peak heap ${half.peakHeapMiB.toFixed(0)} / ${term.peakHeapMiB.toFixed(0)} MiB (ratio ${(term.peakHeapMiB / half.peakHeapMiB).toFixed(2)}), commits read ${half.commitsRead} / ${term.commitsRead}, open intents ${term.open}`,
  `writer RSS median at 10-15% / last 5% of the history ${firstRss.toFixed(0)} / ${lastRss.toFixed(0)} MiB (ratio ${(lastRss / firstRss).toFixed(2)}), Buffers ${firstBuffers.toFixed(1)} / ${lastBuffers.toFixed(1)} MiB (ratio ${(lastBuffers / firstBuffers).toFixed(2)})`,
  `bench process peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
  `verify over the clone: ${(verify.stderr.match(/TIME .*/)?.[0] ?? verify.stderr.slice(-200)).replace('TIME ', '')}; ${verify.stdout.split('\n')[0]}`,
];
process.stdout.write(`${report.join('\n')}\n`);
