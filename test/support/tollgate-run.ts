/**
 * `tollgate run` (src/cli/main.ts) as its own process against the real control plane, the
 * way the e2e files start it: one argument list built from named options (short lease
 * timings: runLeaseTimings), stdout and stderr appended to one log file.
 *
 *   const run = await startTollgateRun({ kubeconfig, identity: 'a', ... });
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, repoRoot } from '../e2e/deploy/tools.ts';
import { eventually } from './eventually.ts';

const cli = join(repoRoot, 'src/cli/main.ts');

export interface TollgateRunOptions {
  readonly kubeconfig: string;
  /** --identity: the Lease holder's name and the audit trail's replica. */
  readonly identity: string;
  /** The policy: a Git repository (and its ref, when not the default) or a folder. */
  readonly policy: { readonly url: string; readonly ref?: string } | { readonly dir: string };
  /** The policy repository's token: a file (--git-token-file) or a variable of `env` (--git-token-env). */
  readonly gitToken?: { readonly file: string } | { readonly env: string };
  readonly audit: {
    readonly url: string;
    readonly tokenFile?: string;
    readonly signingKeyFile?: string;
  };
  /** --git-cache-dir */
  readonly cacheDir: string;
  /** In tollgate-system. */
  readonly leaseName: string;
  /** The file the process's stdout and stderr are appended to. */
  readonly log: string;
  /** The process's whole environment. */
  readonly env: NodeJS.ProcessEnv;
  readonly logLevel?: 'debug' | 'info';
  /** --policy-resync and --audit-flush (cron expressions); tollgate's defaults when absent. */
  readonly policyResync?: string;
  readonly auditFlush?: string;
  /** --expiry-sweep (a cron expression); tollgate's default when absent. */
  readonly expirySweep?: string;
  /** More flags (SSH deploy keys, known_hosts). */
  readonly extraArgs?: readonly string[];
}

export interface TollgateRunProcess {
  readonly child: ChildProcess;
  /** http://127.0.0.1:<metrics port> */
  readonly url: string;
  /** The run's /metrics URL. */
  readonly metrics: string;
  readonly log: string;
  /** The exit code (null after a signal). */
  readonly exited: Promise<number | null>;
}

/** The lease timings every run started here uses, in ms (duration, renew deadline, retry period). */
export const runLeaseTimings = { lease: 3_000, renew: 2_000, retry: 500 } as const;

const policyArgs = (policy: TollgateRunOptions['policy']): string[] =>
  'dir' in policy
    ? ['--policy-dir', policy.dir]
    : ['--policy-repo', policy.url, ...(policy.ref ? ['--policy-ref', policy.ref] : [])];

/** The `tollgate run` arguments for `options`, served on `port`. */
export function tollgateRunArgs(options: TollgateRunOptions, port: number): string[] {
  const { policy, gitToken, audit } = options;
  return [
    ...['--kubeconfig', options.kubeconfig, '--identity', options.identity],
    ...policyArgs(policy),
    ...(gitToken === undefined
      ? []
      : 'file' in gitToken
        ? ['--git-token-file', gitToken.file]
        : ['--git-token-env', gitToken.env]),
    ...['--audit-repo', audit.url],
    ...(audit.tokenFile ? ['--audit-token-file', audit.tokenFile] : []),
    ...(audit.signingKeyFile ? ['--audit-signing-key-file', audit.signingKeyFile] : []),
    ...['--git-cache-dir', options.cacheDir],
    ...['--metrics-address', `127.0.0.1:${port}`],
    ...['--lease-namespace', 'tollgate-system', '--lease-name', options.leaseName],
    ...['--lease-duration', `${runLeaseTimings.lease}ms`],
    ...['--renew-deadline', `${runLeaseTimings.renew}ms`],
    ...['--retry-period', `${runLeaseTimings.retry}ms`],
    ...(options.policyResync ? ['--policy-resync', options.policyResync] : []),
    ...(options.auditFlush ? ['--audit-flush', options.auditFlush] : []),
    ...(options.expirySweep ? ['--expiry-sweep', options.expirySweep] : []),
    ...['--log-level', options.logLevel ?? 'info'],
    ...(options.extraArgs ?? []),
  ];
}

/** Starts `tollgate run` and returns at once (not waiting for it to be ready). */
export async function spawnTollgateRun(options: TollgateRunOptions): Promise<TollgateRunProcess> {
  const port = await freePort();
  const out = openSync(options.log, 'a');
  const child = spawn(process.execPath, [cli, 'run', ...tollgateRunArgs(options, port)], {
    env: options.env,
    stdio: ['ignore', out, out],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const url = `http://127.0.0.1:${port}`;
  return { child, url, metrics: `${url}/metrics`, log: options.log, exited };
}

/** Starts `tollgate run` and resolves once its /readyz answers 200 (60 s at most, alive). */
export async function startTollgateRun(options: TollgateRunOptions): Promise<TollgateRunProcess> {
  const run = await spawnTollgateRun(options);
  await eventually(
    'tollgate run ready',
    async () => {
      if (run.child.exitCode !== null) throw new Error(`exited ${run.child.exitCode}`);
      const ready = await fetch(`${run.url}/readyz`).catch(() => undefined);
      return ready?.status === 200;
    },
    { timeoutMs: 60_000, describe: () => readFileSync(run.log, 'utf8').slice(-2000) },
  );
  return run;
}
