/**
 * `tollgate run` as a child process for the benchmarks: spawned as the image starts it
 * (`node bin/tollgate.js run`, the deployment's NODE_OPTIONS) with the flags a
 * deployment would use, its JSON log lines collected (and written to a file at exit),
 * waited on by message, stopped by signal with a SIGKILL backstop.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import type { ControlPlane } from '../test/support/control-plane.ts';
import type { GitServer } from '../test/support/git-server.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'bin/tollgate.js');

/** NODE_OPTIONS of the shipped deployment, read from deploy/base/deployment.yaml. */
export const IMAGE_NODE_OPTIONS = shippedNodeOptions();

function shippedNodeOptions(): string {
  const deployment = parse(readFileSync(join(root, 'deploy/base/deployment.yaml'), 'utf8')) as {
    spec: { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } };
  };
  const env = deployment.spec.template.spec.containers[0]?.env ?? [];
  const value = env.find((e) => e.name === 'NODE_OPTIONS')?.value;
  if (value === undefined) throw new Error('deploy/base/deployment.yaml sets no NODE_OPTIONS');
  return value;
}
const say = (line: string): void => void process.stderr.write(`# bench: ${line}\n`);

/** Lease timings as flags of `tollgate run`. */
export interface LeaseTimings {
  readonly name: string;
  readonly lease: string;
  readonly renew: string;
  readonly retry: string;
}
export const SHIPPED_LEASE: LeaseTimings = {
  name: 'shipped',
  lease: '15s',
  renew: '10s',
  retry: '2s',
};
export const SHIPPED_RESYNC = '*/30 * * * * *';

export interface LogLine {
  time: number;
  msg: string;
  [key: string]: unknown;
}

export interface Replica {
  readonly identity: string;
  readonly child: ChildProcess;
  readonly spawnedAt: number;
  readonly lines: LogLine[];
  readonly exited: Promise<number | null>;
  readonly url: string;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('TOLLGATE_') || key.startsWith('KUBERNETES_') || key === 'KUBECONFIG')
      continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

export interface Spawn {
  identity: string;
  cp: ControlPlane;
  git: GitServer;
  policyUrl: string;
  auditUrl: string;
  leaseName: string;
  timings: LeaseTimings;
  policyResync?: string;
  cpuProfDir?: string;
  /** NODE_OPTIONS of the process; default the shipped deployment's. */
  nodeOptions?: string;
  /** The `bin/tollgate.js` to start; default this checkout's (another checkout's: a same-run baseline). */
  cli?: string;
  /** More environment of the process (e.g. glibc's malloc tunables of a control row). */
  env?: Record<string, string>;
  work: string;
}

export async function spawnTollgate(s: Spawn): Promise<Replica> {
  const port = await freePort();
  const cacheDir = mkdtempSync(join(s.work, `${s.identity}-`));
  const logFile = join(s.work, `${s.identity}-${Date.now()}.log`);
  const nodeArgs = s.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', s.cpuProfDir] : [];
  const args = [
    ...nodeArgs,
    s.cli ?? cli,
    'run',
    '--kubeconfig',
    s.cp.tollgateKubeconfig,
    '--policy-repo',
    s.policyUrl,
    '--git-token-env',
    'BENCH_GIT_TOKEN',
    '--git-cache-dir',
    cacheDir,
    '--audit-repo',
    s.auditUrl,
    '--identity',
    s.identity,
    '--metrics-address',
    `127.0.0.1:${port}`,
    '--lease-namespace',
    'tollgate-system',
    '--lease-name',
    s.leaseName,
    '--lease-duration',
    s.timings.lease,
    '--renew-deadline',
    s.timings.renew,
    '--retry-period',
    s.timings.retry,
    '--policy-resync',
    s.policyResync ?? SHIPPED_RESYNC,
    '--log-level',
    // BENCH_TOLLGATE_LOG_LEVEL=debug: every pass's pacing in the process's log file.
    process.env.BENCH_TOLLGATE_LOG_LEVEL ?? 'info',
  ];
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, args, {
    env: cleanEnv({
      BENCH_GIT_TOKEN: s.git.token,
      NODE_OPTIONS: s.nodeOptions ?? IMAGE_NODE_OPTIONS,
      ...s.env,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  let raw = '';
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    raw += text;
    buffered += text;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const part of parts) {
      try {
        const line = JSON.parse(part) as Omit<LogLine, 'time'> & { time: string | number };
        lines.push({
          ...line,
          time: typeof line.time === 'number' ? line.time : Date.parse(line.time),
        } as LogLine);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => (raw += chunk.toString()));
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      writeFileSync(logFile, raw);
      r(code);
    }),
  );
  return { identity: s.identity, child, spawnedAt, lines, exited, url: `http://127.0.0.1:${port}` };
}

export function lineAt(replica: Replica, msg: string, after = 0): LogLine | undefined {
  return replica.lines.find((l) => l.msg === msg && l.time >= after);
}

export async function waitLine(
  replica: Replica,
  msg: string,
  timeoutMs: number,
  after = 0,
): Promise<LogLine> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = lineAt(replica, msg, after);
    if (line) return line;
    if (replica.child.exitCode !== null)
      throw new Error(`${replica.identity} exited ${replica.child.exitCode} before "${msg}"`);
    if (Date.now() > deadline)
      throw new Error(`${replica.identity}: no "${msg}" within ${timeoutMs} ms`);
    await sleep(5);
  }
}

export async function stopReplica(
  replica: Replica,
  signal: NodeJS.Signals,
  timeoutMs = 30_000,
): Promise<void> {
  if (replica.child.exitCode !== null || replica.child.signalCode !== null) return;
  const signalled = Date.now();
  replica.child.kill(signal);
  const code = await Promise.race([
    replica.exited,
    sleep(timeoutMs).then(() => 'timeout' as const),
  ]);
  if (code !== 'timeout')
    say(`${replica.identity} exited ${Date.now() - signalled} ms after ${signal}`);
  else {
    say(`${replica.identity} did not exit within ${timeoutMs} ms of ${signal}; SIGKILL`);
    replica.child.kill('SIGKILL');
    await replica.exited;
  }
}
