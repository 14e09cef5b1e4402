/**
 * What the security e2e files share: the example policy as files, and a real Git server
 * plus temporary folders that live for one test file.
 */
import { after, before } from 'node:test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { eventually } from '../../support/eventually.ts';
import { freePort } from '../deploy/tools.ts';

const examplesDir = resolve(import.meta.dirname, '../../../policy-examples');
const cli = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/** policy-examples/ as `path -> content`. */
export function exampleFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else files[relative(examplesDir, full)] = readFileSync(full, 'utf8');
    }
  };
  walk(examplesDir);
  return files;
}

/** Registers before/after hooks: a Git server and temp folders, removed after the file. */
export function gitServerForFile(prefix: string): {
  server: () => GitServer;
  tempDir: () => string;
} {
  let server: GitServer | undefined;
  const dirs: string[] = [];
  before(async () => {
    server = await startGitServer();
  });
  after(async () => {
    await server?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    server: () => {
      if (!server) throw new Error('the Git server starts in before()');
      return server;
    },
    tempDir: () => {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
  };
}

export interface RunProcess {
  readonly child: ChildProcess;
  /** The run's /metrics URL. */
  readonly metrics: string;
  /** The file holding the run's stdout and stderr. */
  readonly log: string;
}

/**
 * `tollgate run` as a process against the real control plane, the tokens only as files
 * (`<work>/cache` is its Git cache), polling the policy and flushing the audit every
 * second; resolves once /readyz answers 200.
 */
export async function startTollgateRun(options: {
  kubeconfig: string;
  work: string;
  policy: { url: string; tokenFile: string };
  audit: { url: string; tokenFile: string };
  leaseName: string;
}): Promise<RunProcess> {
  const port = await freePort();
  const log = join(options.work, 'run.log');
  const out = openSync(log, 'a');
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  const child = spawn(
    process.execPath,
    [
      cli,
      'run',
      ...['--kubeconfig', options.kubeconfig, '--identity', options.leaseName],
      ...['--policy-repo', options.policy.url, '--git-token-file', options.policy.tokenFile],
      ...['--audit-repo', options.audit.url, '--audit-token-file', options.audit.tokenFile],
      ...['--git-cache-dir', join(options.work, 'cache')],
      ...['--metrics-address', `127.0.0.1:${port}`],
      ...['--lease-namespace', 'tollgate-system', '--lease-name', options.leaseName],
      ...['--lease-duration', '3s', '--renew-deadline', '2s', '--retry-period', '500ms'],
      ...['--policy-resync', '* * * * * *', '--audit-flush', '* * * * * *'],
      ...['--log-level', 'debug'],
    ],
    { env, stdio: ['ignore', out, out] },
  );
  await eventually(
    'tollgate run ready',
    async () => {
      if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}`);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      return ready?.status === 200;
    },
    { timeoutMs: 60_000, describe: () => readFileSync(log, 'utf8').slice(-2000) },
  );
  return { child, metrics: `http://127.0.0.1:${port}/metrics`, log };
}

/** A small valid policy: one tenant owning `namespace` and one gate without conditions. */
export function runPolicy(options: {
  namespace: string;
  gate: string;
  priority?: number;
  auditMode?: 'strict' | 'async';
}): Record<string, string> {
  const prefix = options.gate.slice(0, options.gate.indexOf('/') + 1);
  return {
    'tollgate.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: Settings',
      'metadata: { name: settings }',
      'spec:',
      `  cluster: ${options.namespace}`,
      `  audit: { mode: ${options.auditMode ?? 'strict'}, batch: { maxDecisions: 50, maxDelay: 100ms } }`,
      '  pacing: { maxInFlight: 100, releasesPerSecond: 50, batchSize: 50 }',
      '',
    ].join('\n'),
    'tenants/run.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: Tenant',
      'metadata: { name: run }',
      'spec:',
      `  namespaces: [${options.namespace}]`,
      `  gatePrefixes: [${prefix}]`,
      '  pacing: { maxInFlight: 100, releasesPerSecond: 50, batchSize: 50 }',
      '',
    ].join('\n'),
    'gates/ready.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: GatePolicy',
      'metadata: { name: ready }',
      'spec:',
      '  tenant: run',
      `  gate: ${options.gate}`,
      `  priority: ${options.priority ?? 0}`,
      '  conditions: []',
      '',
    ].join('\n'),
  };
}
