/**
 * Audit trail benchmark against the real Git smart-HTTP server of the tests.
 *
 *   node bench/audit.ts [--decisions 10000] [--pass 100] [--writers 1]
 *
 * Each writer runs reconcile "passes": `--pass` Release intents recorded in strict
 * mode (committed and pushed before they resolve), then their outcomes (batched by
 * time and size). Reported: decisions per second into pushed commits, per-commit
 * commit and push latency (median, p90), strict intent latency, and the growth of the
 * server's bare repository per 10,000 decisions (du, as pushed and after `git gc`).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { AuditRepo } from '../src/audit/repo.ts';
import { GitAuditWriter } from '../src/audit/writer.ts';
import { timedStore } from './audit-lib.ts';
import { trailDecision } from './audit-seed.ts';
import type { Decision } from '../src/decide/decision.ts';
import { startGitServer } from '../test/support/git-server.ts';
import { percentile } from './lib.ts';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    decisions: { type: 'string', default: '10000' },
    pass: { type: 'string', default: '100' },
    writers: { type: 'string', default: '1' },
  },
});
const total = Number(values.decisions);
const perPass = Number(values.pass);
const writers = Number(values.writers);

const duKiB = async (dir: string): Promise<number> =>
  Number((await run('du', ['-sk', dir])).stdout.split('\t')[0]);

const server = await startGitServer();
const url = server.createRepo('bench');
const bare = join(server.root, 'bench.git');
const emptyKiB = await duKiB(bare);

const commitMs: number[] = [];
const pushMs: number[] = [];
const intentMs: number[] = [];

/** A bench trail's intent (audit-seed.ts), named per writer, with a second input. */
function intent(writer: number, index: number): Decision {
  const name = `w${writer}-p${index}`;
  const decision = trailDecision(index, Date.now());
  return {
    ...decision,
    id: `gate-release:Release:uid-${name}:1`,
    target: { ...decision.target, name, uid: `uid-${name}` },
    inputs: [
      {
        condition: 'Budget',
        met: true,
        value: { cpuUsed: 1000 + index, cpuLimit: 64_000, podsUsed: index % 50, podsLimit: 200 },
      },
      { condition: 'ImagePresent', met: true, value: { nodes: 3, minNodes: 1 } },
    ],
  };
}

async function drive(writerIndex: number, decisions: number): Promise<void> {
  const repo = new AuditRepo({
    dir: join(mkdtempSync(join(tmpdir(), 'tollgate-bench-audit-')), 'audit.git'),
    url,
    branch: 'tollgate/audit',
    token: server.token,
    author: { name: `tollgate bench-${writerIndex}`, email: 'bench@tollgate.invalid' },
    retry: { maxAttempts: 50, maxElapsedMs: 120_000, baseDelayMs: 10, maxDelayMs: 500 },
  });
  await repo.open();
  await repo.fetch();
  const writer = new GitAuditWriter({
    store: timedStore(repo, { commitMs, pushMs }),
    cluster: 'bench',
    controller: `bench-${writerIndex}`,
    batch: { maxDecisions: 500, maxDelayMs: 200 },
  });
  for (let done = 0; done < decisions / 2; done += perPass) {
    const intents = Array.from({ length: perPass }, (_, index) =>
      intent(writerIndex, done + index),
    );
    const start = performance.now();
    await writer.recordIntents(intents);
    intentMs.push(performance.now() - start);
    writer.record(
      intents.map((item) => ({
        ...item,
        at: Date.now(),
        outcome: { result: 'succeeded', resourceVersion: '2000' },
      })),
    );
  }
  await writer.close();
}

const started = performance.now();
await Promise.all(Array.from({ length: writers }, (_, index) => drive(index, total / writers)));
const seconds = (performance.now() - started) / 1000;
const pushedKiB = (await duKiB(bare)) - emptyKiB;
const commits = Number(
  (await run('git', ['-C', bare, 'rev-list', '--count', 'tollgate/audit'])).stdout.trim(),
);
await run('git', ['-C', bare, 'gc', '--quiet']);
const gcKiB = (await duKiB(bare)) - emptyKiB;
await server.close();

const ms = (values: number[], p: number): string => percentile(values, p).toFixed(1);
const per10k = (kib: number): string => ((kib * 10_000) / total / 1024).toFixed(2);
const report = [
  `audit bench: ${total} decisions (${total / 2} intents + ${total / 2} outcomes), ${writers} writer(s), ${perPass} intents per pass`,
  `throughput: ${(total / seconds).toFixed(0)} decisions/s into pushed commits (${seconds.toFixed(1)} s, ${commits} commits)`,
  `commit (local, per commit): median ${ms(commitMs, 50)} ms, p90 ${ms(commitMs, 90)} ms`,
  `push (incl. fetch-and-retry rounds): median ${ms(pushMs, 50)} ms, p90 ${ms(pushMs, 90)} ms`,
  `strict recordIntents (commit + push): median ${ms(intentMs, 50)} ms, p90 ${ms(intentMs, 90)} ms`,
  `repository growth per 10,000 decisions: ${per10k(pushedKiB)} MiB as pushed, ${per10k(gcKiB)} MiB after git gc`,
];
process.stdout.write(`${report.join('\n')}\n`);
