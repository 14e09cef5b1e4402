/**
 * `tollgate queue [--tenant T] [--policy P]`: the pods tollgate holds, per tenant in
 * release order, with what each waits for and the estimate (src/decide/explain.ts says how
 * it is made). Paged: `--limit N` entries from `--continue OFFSET` (the previous page's
 * `next`). Read-only, like `tollgate explain`. Exit codes: 0 listed, 2 usage or I/O.
 */
import type { Command } from 'commander';
import { queuePage, type QueuePage } from '../decide/explain.ts';
import { explainCluster, UsageError, type ClusterReadOptions, type ExplainIo } from './explain.ts';
import { withCluster } from './cluster-options.ts';
import { formatOutput, withOutput } from './output.ts';

export interface QueueOptions extends ClusterReadOptions {
  readonly tenant?: string;
  readonly policy?: string;
  readonly limit: string;
  readonly continue?: string;
}

const columns = ['#', 'POD', 'TENANT', 'POLICY', 'WAITING', 'ESTIMATE', 'REASON'] as const;

/** A fixed-width table, columns as wide as their widest cell. */
export function formatQueue(page: QueuePage, offset: number): string {
  const rows = page.items.map((e, i) => [
    `${offset + i + 1}`,
    e.pod,
    e.tenant,
    e.policy ?? '-',
    e.waiting,
    e.estimate.releaseAt ?? 'unknown',
    e.reason,
  ]);
  const widths = columns.map((c, i) =>
    Math.max(c.length, ...rows.map((r) => (r[i] as string).length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] as number)))
      .join('  ');
  const footer =
    page.next === null
      ? `${page.total} held pod(s)`
      : `${page.total} held pod(s); next page: --continue ${page.next}`;
  return `${[line(columns), ...rows.map(line)].join('\n')}\n${footer}\n`;
}

function count(text: string | undefined, flag: string, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(`${flag} must be a whole number, got "${text}"`);
  return n;
}

export async function runQueue(options: QueueOptions, io: ExplainIo): Promise<number> {
  try {
    const limit = count(options.limit, '--limit', 50);
    if (limit === 0) throw new UsageError('--limit must be at least 1');
    const offset = count(options.continue, '--continue', 0);
    const { policy, explanations } = await explainCluster(options, io);
    if (options.tenant !== undefined && !policy.tenants.has(options.tenant))
      throw new UsageError(`no Tenant named "${options.tenant}" in the policy`);
    if (options.policy !== undefined && !policy.gatePolicies.some((g) => g.name === options.policy))
      throw new UsageError(`no GatePolicy named "${options.policy}" in the policy`);
    const page = queuePage(explanations, {
      limit,
      offset,
      ...(options.tenant !== undefined ? { tenant: options.tenant } : {}),
      ...(options.policy !== undefined ? { policy: options.policy } : {}),
    });
    io.stdout(formatOutput(options.output, page, () => formatQueue(page, offset)));
    return 0;
  } catch (error) {
    io.stderr(`tollgate queue: ${(error as Error).message}\n`);
    return 2;
  }
}

export function registerQueue(program: Command): void {
  const command = program
    .command('queue')
    .description('The pods tollgate holds, in release order, with what they wait for (read-only)')
    .option('--tenant <name>', 'only this Tenant')
    .option('--policy <name>', 'only this GatePolicy')
    .option('--limit <n>', 'entries per page', '50')
    .option('--continue <offset>', "the previous page's next offset")
    .option('--policy-dir <dir>', 'a checkout of the policy repository', '.');
  withOutput(withCluster(command)).action(async (options: QueueOptions) => {
    process.exitCode = await runQueue(options, {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
      now: () => Date.now(),
    });
  });
}
