/**
 * Part 2 of `tollgate run`: the policy source (src/policy/source.ts) for a folder or a
 * Git repository, and the Git token it (and the audit) authenticate with.
 *
 * Start-up never exits for want of a policy: the source falls back to the newest valid
 * commit of history, then to the last good policy saved in the Git cache folder; with
 * none of them the replica stays up, not ready (/readyz says why), and polls again with
 * backoff (`waitForPolicy`) until a valid commit can be read. What it started from is
 * announced as Events on tollgate's Lease (`announcePolicyState`): StartedFromLastGoodPolicy,
 * PolicyUnavailable, and PolicyCommitRefused for every rejected commit.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../cli/run-config.ts';
import type { ControllerEvents } from './writes.ts';
import type { EventRecord } from '../cluster/events.ts';
import type { Logger } from '../observe/log.ts';
import { tokenFromFile, type TokenSource } from '../policy/credentials.ts';
import { isSshUrl, type SshAccess } from '../policy/git-ssh.ts';
import { formatPolicyError } from '../policy/errors.ts';
import type { Policy } from '../policy/model.ts';
import type { PolicyError } from '../policy/errors.ts';
import { PolicySource, type PolicyState } from '../policy/source.ts';
import { systemTimers, type Timers } from '../lib/timers.ts';

/** What `tollgate run` needs from a policy source. */
export interface PolicyFeed {
  /** The snapshot in force: the newest valid one, undefined before the first. */
  current(): Policy | undefined;
  /** Called with each new valid snapshot. */
  onPolicy(listener: (policy: Policy) => void): void;
  /** Fetch and compile now; an invalid result keeps the last good snapshot. */
  refresh(): Promise<void>;
  /** Where the snapshot in force came from, or why there is none. */
  state(): PolicyState;
  /** Called with each rejected commit (the last good snapshot stays in force). */
  onRejected(listener: (commit: string, errors: readonly PolicyError[]) => void): void;
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
 * How an SSH remote is reached (`url` undefined or http(s): undefined): the policy
 * repository with --git-ssh-key-file, the audit repository with --audit-ssh-key-file
 * or else the same key; the known_hosts file and the insecure flag shared.
 */
export function sshAccess(
  config: Pick<RunConfig, 'git'>,
  url: string | undefined,
  which: 'policy' | 'audit',
): SshAccess | undefined {
  if (url === undefined || !isSshUrl(url)) return undefined;
  const { git } = config;
  const own = which === 'audit' ? git.auditSshKeyFile : undefined;
  const keyFile = own ?? git.sshKeyFile;
  if (keyFile === undefined) return undefined;
  return {
    keyFile,
    keyFlag: own !== undefined ? '--audit-ssh-key-file' : '--git-ssh-key-file',
    ...(git.sshKnownHostsFile === undefined ? {} : { knownHostsFile: git.sshKnownHostsFile }),
    ...(git.sshInsecureIgnoreHostKey ? { insecureIgnoreHostKey: true } : {}),
  };
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
  const ssh = sshAccess(
    config,
    config.policy.source === 'git' ? config.policy.url : undefined,
    'policy',
  );
  const source = new PolicySource({
    location: config.policy.source === 'git' ? config.policy.url : config.policy.dir,
    ...(config.policy.source === 'git' ? { ref: config.policy.ref } : {}),
    ...(config.policy.path ? { path: config.policy.path } : {}),
    ...(tokenFile !== undefined ? { tokenFile } : token === undefined ? {} : { token }),
    allowInsecureHttp: config.git.allowInsecureHttp === true,
    ...(ssh ? { ssh } : {}),
    cacheDir: join(config.git.cacheDir, 'policy'),
    savedPolicyFile: join(config.git.cacheDir, 'policy-last-good.json'),
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
    state: () => source.state(),
    onRejected: (listener) => void source.onRejected(listener),
    stop: async () => source.stop(),
  };
}

/** Delays between polls while there is no policy: doubling from `firstMs` up to `maxMs`. */
export interface PolicyBackoff {
  readonly firstMs: number;
  readonly maxMs: number;
}
export const policyBackoff: PolicyBackoff = { firstMs: 1_000, maxMs: 60_000 };

/** The n-th delay (0-based) of the backoff. */
export function backoffDelay(backoff: PolicyBackoff, attempt: number): number {
  return Math.min(backoff.maxMs, backoff.firstMs * 2 ** Math.min(attempt, 30));
}

/**
 * The first policy: at once when the source has one, else polled again with backoff until
 * it has (each failed attempt logged with why and when the next is); undefined when
 * `signal` aborts first (a shutdown while waiting).
 */
export async function waitForPolicy(
  feed: Pick<PolicyFeed, 'current' | 'refresh' | 'state'>,
  options: {
    signal: AbortSignal;
    log: Logger;
    timers?: Timers;
    backoff?: PolicyBackoff;
    onWaiting?: (why: string) => void;
  },
): Promise<Policy | undefined> {
  const timers = options.timers ?? systemTimers;
  const backoff = options.backoff ?? policyBackoff;
  for (let attempt = 0; !feed.current(); attempt += 1) {
    if (options.signal.aborted) return undefined;
    const state = feed.state();
    const why = 'why' in state ? state.why : 'no policy yet';
    const delayMs = backoffDelay(backoff, attempt);
    options.log.error(
      { why, attempt: attempt + 1, nextAttemptMs: delayMs },
      'no valid policy to run: staying up, not ready, and reading the policy again',
    );
    if (attempt === 0) options.onWaiting?.(why);
    if (!(await sleep(timers, delayMs, options.signal))) return undefined;
    await feed.refresh();
  }
  return feed.current();
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function sleep(timers: Timers, ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const onAbort = (): void => {
      timers.clear(handle);
      resolve(false);
    };
    const handle = timers.set(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Events on tollgate's Lease about the policy in force: PolicyUnavailable when a replica
 * had to wait without one, StartedFromLastGoodPolicy when it runs on a saved copy or an
 * older commit of history, PolicyCommitRefused once per rejected commit (the last good
 * policy keeps running). Written like every Event of tollgate's own, by the leader
 * through the dispatcher: what happened at start is recorded when the replica's first
 * term begins (`leading`), since a replica without a term cannot write.
 */
export function announcePolicyState(
  feed: Pick<PolicyFeed, 'state' | 'onRejected'>,
  selfEvents: Pick<ControllerEvents, 'record'>,
): { unavailable: (why: string) => void; started: () => void; leading: () => void } {
  const atStart: EventRecord[] = [];
  const refused = new Set<string>();
  feed.onRejected((commit, errors) => {
    if (refused.has(commit)) return;
    refused.add(commit);
    const first = errors[0] ? `: ${formatPolicyError(errors[0])}` : '';
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    selfEvents.record({
      type: 'Warning',
      reason: 'PolicyCommitRefused',
      action: 'RefusePolicy',
      note: `policy commit ${commit.slice(0, 12)} is invalid${first}${more}; the last good policy stays in force`,
    });
  });
  return {
    unavailable: (why) =>
      void atStart.push({
        type: 'Warning',
        reason: 'PolicyUnavailable',
        action: 'WaitForPolicy',
        note: `no valid policy to run, this replica stays not ready and reads the policy again with backoff: ${why}`,
      }),
    started: () => {
      const state = feed.state();
      if (state.kind !== 'saved' && state.kind !== 'history') return;
      atStart.push({
        type: 'Warning',
        reason: 'StartedFromLastGoodPolicy',
        action: 'StartFromLastGood',
        note: `started from ${state.kind === 'saved' ? 'the saved last good policy' : 'an older commit of the policy history'}, commit ${state.commit.slice(0, 12)}: ${state.why}`,
      });
    },
    leading: () => {
      for (const event of atStart.splice(0)) selfEvents.record(event);
    },
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
