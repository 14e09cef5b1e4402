/**
 * Part 2 of `tollgate run`: the policy source (src/policy/source.ts) for a folder or a
 * Git repository, and the Git token it (and the audit) authenticate with.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../cli/run-config.ts';
import type { ControllerEvents } from './writes.ts';
import type { Logger } from '../observe/log.ts';
import { tokenFromFile, type TokenSource } from '../policy/credentials.ts';
import { formatPolicyError } from '../policy/errors.ts';
import type { Policy } from '../policy/model.ts';
import { PolicySource } from '../policy/source.ts';

/** What `tollgate run` needs from a policy source. */
export interface PolicyFeed {
  /** The snapshot in force: the newest valid one, undefined before the first. */
  current(): Policy | undefined;
  /** Called with each new valid snapshot. */
  onPolicy(listener: (policy: Policy) => void): void;
  /** Fetch and compile now; an invalid result keeps the last good snapshot. */
  refresh(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The Git token from its named variable or file; undefined when none is configured. An
 * empty one is an error (a Secret mounted without its key), not anonymous access.
 */
export function readToken(
  config: Pick<RunConfig, 'git'>,
  read: { env: NodeJS.ProcessEnv; file: (path: string) => string } = {
    env: process.env,
    file: (path) => readFileSync(path, 'utf8'),
  },
  which: 'token' | 'auditToken' = 'token',
): string | undefined {
  const source = config.git[which];
  if (!source) return undefined;
  const value = source.from === 'env' ? read.env[source.name] : read.file(source.path);
  const token = value?.trim();
  if (!token) {
    throw new Error(
      source.from === 'env'
        ? `the Git token variable ${source.name} is empty`
        : `the Git token file ${source.path} is empty`,
    );
  }
  return token;
}

/**
 * A token as its users should hold it: a file becomes a function that reads it again at
 * each use (a rotated Secret is picked up without a restart), read once here so an empty
 * or unreadable file still stops the start; a variable is read once.
 */
export function tokenSource(
  config: Pick<RunConfig, 'git'>,
  which: 'token' | 'auditToken' = 'token',
): TokenSource | undefined {
  const token = readToken(config, undefined, which);
  const location = config.git[which];
  return location?.from === 'file' ? tokenFromFile(location.path) : token;
}

/**
 * The policy source, polled by the policy-resync sweep rather than its own timer. The
 * first poll must yield a valid policy: its errors are logged one per line and the
 * caller stops start-up when `current()` is still undefined.
 */
export async function openPolicySource(
  config: RunConfig,
  token: string | undefined,
  log: Logger,
): Promise<PolicyFeed> {
  // A token file is handed over as a file: the source reads it again at every fetch,
  // so a rotated Secret is used without a restart.
  const tokenFile = config.git.token?.from === 'file' ? config.git.token.path : undefined;
  const source = new PolicySource({
    location: config.policy.source === 'git' ? config.policy.url : config.policy.dir,
    ...(config.policy.source === 'git' ? { ref: config.policy.ref } : {}),
    ...(config.policy.path ? { path: config.policy.path } : {}),
    ...(tokenFile !== undefined ? { tokenFile } : token === undefined ? {} : { token }),
    allowInsecureHttp: config.git.allowInsecureHttp === true,
    cacheDir: join(config.git.cacheDir, 'policy'),
    logger: log,
  });
  const first = await source.poll();
  if (first.kind === 'rejected') {
    for (const error of first.errors)
      log.error({ commit: first.commit, policyError: formatPolicyError(error) }, 'invalid policy');
  } else if (first.kind === 'fetch-failed') {
    log.error({ err: first.error.message, kind: first.error.kind }, 'policy could not be fetched');
  }
  return {
    current: () => source.current(),
    onPolicy: (listener) => void source.onPolicy(listener),
    refresh: async () => void (await source.poll()),
    stop: async () => source.stop(),
  };
}

/**
 * A refused restart-only setting as a Warning Event on tollgate's Lease (its own Events,
 * beside the leader election), written like every Event: by the leader, through the
 * dispatcher.
 */
export function restartRequiredEvent(
  selfEvents: Pick<ControllerEvents, 'record'>,
): (note: string) => void {
  return (note) =>
    selfEvents.record({
      type: 'Warning',
      reason: 'RestartRequired',
      action: 'RefuseSettings',
      note,
    });
}
