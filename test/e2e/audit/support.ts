/** Helpers for the audit e2e tests: the real git CLI (async: the git server runs in this process), log capture. */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino, type Logger } from 'pino';
import type { CountingFs } from '../../support/counting-fs.ts';
import type { GitServer } from '../../support/git-server.ts';
import { recover, type IntentState } from '../../../src/audit/recover.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { systemClock, type Clock } from '../../../src/lib/clock.ts';

const run = promisify(execFile);

export async function gitCli(cwd: string, ...args: string[]): Promise<string> {
  return (
    await run('git', ['-C', cwd, ...args], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
  ).stdout;
}

/** A fresh clone of one branch with the real git CLI; credentials are removed from the clone's config afterwards. */
export async function freshClone(
  server: GitServer,
  repoUrl: string,
  branch: string,
): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-clone-'));
  const authed = repoUrl.replace('http://', `http://x:${server.token}@`);
  await run('git', ['clone', '--quiet', '--branch', branch, '--single-branch', authed, dir], {
    encoding: 'utf8',
  });
  await gitCli(dir, 'remote', 'set-url', 'origin', repoUrl);
  return dir;
}

export function captureLogs(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
  return { logger, lines };
}

/** Every file under a folder, as text (binary is fine: we only search for a string). */
export function allFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push(path);
    }
  };
  walk(root);
  return out;
}

export function filesContaining(root: string, needle: string): string[] {
  return allFiles(root).filter((path) => readFileSync(path).includes(needle));
}

/** A writer on a fresh cache folder, as a leader's term would open it (leftovers pushed by reconcile). */
export function openTestWriter(
  server: GitServer,
  url: string,
  cluster: string,
  controller: string,
  options: Partial<Parameters<typeof GitAuditWriter.open>[0]> = {},
): ReturnType<typeof GitAuditWriter.open> {
  return GitAuditWriter.open({
    url,
    token: server.token,
    cacheDir: mkdtempSync(join(tmpdir(), `tollgate-${cluster}-${controller}-`)),
    cluster,
    controller,
    batch: { maxDecisions: 100, maxDelayMs: 20 },
    leftoversAtTermStart: true,
    ...options,
  });
}

/**
 * A successor's term start: its writer reconciles, then recovery closes the open intents
 * with what the cluster shows (`states[i]` for `intents[i]`), recorded through the same
 * writer, pushed before it returns unless `awaitPush` is false (a term start's own
 * recovery: its outcomes go behind the backlog). Returns how many intents recovery closed.
 */
export async function successorRecovers(
  writer: GitAuditWriter,
  cluster: string,
  intents: readonly Decision[],
  states: readonly IntentState[],
  options: { readonly awaitPush?: boolean } = {},
): Promise<number> {
  const source = await writer.reconcile();
  if (!source) throw new Error('reconcile gave no audit source to recover from');
  const byId = new Map(intents.map((intent, i) => [intent.id, states[i]]));
  const recovered = await recover({
    source,
    cluster,
    lookup: (intent) => byId.get(intent.id) ?? { state: 'unknown' },
    sink: writer,
    clock: systemClock,
    ...options,
  });
  return recovered.length;
}

/** The writer's clone of `url` in `dir`, whole (not shallow), its git object reads counted by `counter`. */
export async function countedClone(
  server: GitServer,
  url: string,
  dir: string,
  counter: CountingFs,
  clock: Clock,
): Promise<AuditRepo> {
  const repo = new AuditRepo({
    dir,
    url,
    branch: 'tollgate/audit',
    token: server.token,
    author: { name: 'tollgate', email: 'tollgate@tollgate.invalid' },
    clock,
    shallowDepth: 0,
    fs: counter.fs,
  });
  await repo.open();
  await repo.fetch();
  return repo;
}

/** The environment of a `tollgate run` child: this process's, without TOLLGATE_*, KUBERNETES_* or KUBECONFIG. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('TOLLGATE_') && !key.startsWith('KUBERNETES_') && key !== 'KUBECONFIG')
      env[key] = value;
  return { ...env, ...extra };
}
