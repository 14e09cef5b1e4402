/**
 * What the security e2e files share: the example policy as files, and a real Git server
 * plus temporary folders that live for one test file.
 */
import { after, before } from 'node:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { oneGatePolicy } from '../../builders/policy-files.ts';
import {
  startTollgateRun as startRun,
  type TollgateRunProcess,
} from '../../support/tollgate-run.ts';

const examplesDir = resolve(import.meta.dirname, '../../../policy-examples');

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

export type RunProcess = TollgateRunProcess;

/**
 * `tollgate run` as a process against the real control plane, the tokens only as files
 * (`<work>/cache` is its Git cache), polling the policy and flushing the audit every
 * second; resolves once /readyz answers 200.
 */
export function startTollgateRun(options: {
  kubeconfig: string;
  work: string;
  policy: { url: string; tokenFile?: string };
  audit: { url: string; tokenFile?: string };
  leaseName: string;
  /** More flags (SSH deploy keys, known_hosts). */
  args?: readonly string[];
}): Promise<RunProcess> {
  return startRun({
    kubeconfig: options.kubeconfig,
    identity: options.leaseName,
    policy: { url: options.policy.url },
    ...(options.policy.tokenFile === undefined
      ? {}
      : { gitToken: { file: options.policy.tokenFile } }),
    audit: options.audit,
    ...(options.args ? { extraArgs: options.args } : {}),
    cacheDir: join(options.work, 'cache'),
    leaseName: options.leaseName,
    log: join(options.work, 'run.log'),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    logLevel: 'debug',
    policyResync: '* * * * * *',
    auditFlush: '* * * * * *',
  });
}

/** A small valid policy: one tenant owning `namespace` and one gate without conditions. */
export function runPolicy(options: {
  namespace: string;
  gate: string;
  priority?: number;
  auditMode?: 'strict' | 'async';
}): Record<string, string> {
  return oneGatePolicy({
    cluster: options.namespace,
    tenant: 'run',
    namespace: options.namespace,
    gate: options.gate,
    audit: { mode: options.auditMode ?? 'strict', maxDecisions: 50, maxDelay: '100ms' },
    pacing: { maxInFlight: 100, releasesPerSecond: 50, batchSize: 50 },
    priority: options.priority ?? 0,
    conditions: '[]',
  });
}
