/**
 * `GitAuditWriter`: the AuditSink that turns decisions into commits on the audit branch.
 *
 * Flow: decisions queue per batch kind (intents, outcomes, records) in a Batcher; one
 * serial "cycle" at a time commits what is due (one new JSONL file per commit, at most
 * `maxDecisions` per file) and pushes everything unpushed. Cycles never overlap, so
 * callers that arrive while one runs share the next commit (group commit).
 *
 * Modes:
 * - strict (default): `recordIntents` resolves only after its intents are committed
 *   AND pushed, so no API write is sent without a record on the remote. If the commit
 *   or push fails, it rejects, and the writer itself records a `cancelled` outcome for
 *   those intents ("audit push failed; write not sent"), so the trail stays complete.
 * - async: `recordIntents` resolves at once and intents are batched by time and size
 *   like outcomes. Lower latency for the loops; the cost is that a crash may lose
 *   intents and outcomes not yet committed, and writes may reach the API before their
 *   record reaches the remote.
 *
 * Backlog = queued + committed-but-unpushed decisions. It is bounded (`maxBacklog`):
 * when full, `recordIntents` rejects with AuditBacklogFullError (the loop holds its
 * writes), outcomes are still accepted (they belong to intents already admitted, so
 * they are bounded by them), and records without a write are refused, counted in
 * tollgate_audit_dropped_total and logged. A failing push is retried in the
 * background with a growing interval; it never blocks a loop forever.
 */
import { join } from 'node:path';
import { Errors } from 'isomorphic-git';
import type { Decision } from '../decide/decision.ts';
import type { Settings } from '../policy/model.ts';
import type { TokenSource } from '../policy/credentials.ts';
import type { SshAccess } from '../policy/git-ssh.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import { Batcher, RecordDeduper, type BatchLimits } from './batcher.ts';
import {
  checkpointMessage,
  checkpointPath,
  OpenIntents,
  serializeCheckpoint,
} from './checkpoint.ts';
import { CarriedState, readCarried } from './carried.ts';
import { noCarried, type Carried } from '../decide/release-carried.ts';
import {
  closeUnpushedIntents,
  planLeftovers,
  readLeftovers,
  rebuiltCommits,
  remoteRecords,
} from './leftovers.ts';
import { commitMessage, rebuiltCommitMessage } from './message.ts';
import {
  auditCommitsTotal,
  auditDecisionsTotal,
  auditDroppedTotal,
  auditLeftoversDroppedTotal,
  auditStandbyClosedTotal,
  trackBacklog,
} from './metrics.ts';
import {
  batchKinds,
  batchOf,
  phaseOf,
  recordSchemaVersion,
  serializeBatch,
  type AuditRecord,
  type BatchKind,
} from './record.ts';
import { repoSource, type AuditSource } from './reader.ts';
import { openIntents } from './recover.ts';
import {
  AuditHistoryRewrittenError,
  AuditRepo,
  type LocalCommit,
  type PushOptions,
  type RetryOptions,
} from './repo.ts';
import type { SshSigner } from './sign.ts';
import { AuditUnavailableError, type AuditSink } from './types.ts';

/** What the writer needs from the repository; AuditRepo in production, an in-memory store in unit tests. */
export interface AuditStore {
  commitFile(
    path: string,
    content: string,
    message: string,
  ): Promise<{ oid: string; path: string }>;
  /**
   * Pushes the unpushed commits (at most `options.maxCommits`, the oldest, when given);
   * rejects when the bounded retries are exhausted. When
   * the remote moved under them, `replan` is called first with them (it may commit them
   * anew on the remote tip: leftovers.ts), then what is still based elsewhere is rebuilt.
   */
  push(
    replan?: (pending: readonly LocalCommit[]) => Promise<void>,
    options?: PushOptions,
  ): Promise<number>;
  unpushed(): Promise<readonly { readonly decisions: number }[]>;
  redact?(text: string): string;
  /** Refreshes from the remote and moves a local branch with nothing unpushed to the remote tip. */
  sync?(): Promise<void>;
  /** Packs and prunes the local clone (AuditRepo.maintain). */
  maintain?(): Promise<{ packed: number; pruned: number }>;
  /** Drops what the Git library keeps in memory between operations (AuditRepo.releaseCache). */
  releaseCache?(): void;
}

/** True while this process may record (it holds the leader lease); see GitAuditWriter.setFence. */
export type AuditFence = () => boolean;
/** The lease term now open, by its fencing token; undefined between terms. */
export type AuditTerm = () => string | undefined;

/**
 * The tamper anchor kept outside the branch and the clone (the leader Lease): the last
 * audit commit pushed, as `<branch>@<oid>`. See GitAuditWriter.setAnchor.
 */
export interface AuditAnchor {
  read(): string | undefined;
  write(value: string): void;
  /** Told once when the branch no longer contains the anchor (an Event, in production). */
  rewritten?(error: AuditHistoryRewrittenError): void;
}

/** `<branch>@<oid>` of an anchor value; undefined when it is not one. */
export function parseAnchor(value: string): { branch: string; oid: string } | undefined {
  const match = /^(.+)@([0-9a-f]{40})$/.exec(value);
  return match ? { branch: match[1] as string, oid: match[2] as string } : undefined;
}

export interface Timers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  set: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    handle.unref?.();
    return handle;
  },
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export type AuditMode = 'strict' | 'async';

export interface AuditWriterOptions {
  readonly store: AuditStore;
  readonly cluster: string;
  /** This controller's identity (e.g. the pod name); in file names and trailers. */
  readonly controller: string;
  readonly mode?: AuditMode;
  readonly batch: BatchLimits;
  /** Decisions accepted but not yet pushed, at most (default 100,000). */
  readonly maxBacklog?: number;
  /** Local clone maintenance (pack, prune) after this many commits, once they are pushed (default 200). */
  readonly maintainEvery?: number;
  /** A checkpoint of open intents (checkpoint.ts) after this many commits (default 200). */
  readonly checkpointEvery?: number;
  /**
   * Commits per push (default 100): a backlog (leftovers found at term start, commits
   * queued while Git was down) lands in pushes of at most this many, each kept by the
   * remote whatever happens to the next, and the writer commits what fell due between
   * two of them.
   */
  readonly maxCommitsPerPush?: number;
  /** First delay before a background push retry after a failed cycle; doubles up to 5 minutes. */
  readonly retryIntervalMs?: number;
  /**
   * A standby holding commits its earlier terms could not push pushes them itself after
   * this long (default 30 s; doubling after a failure, at most 30 s in strict mode and 5
   * minutes in async, as the leader's retries): see
   * GitAuditWriter.#pushAsStandby.
   */
  readonly standbyPushDelayMs?: number;
  readonly clock?: Clock;
  readonly timers?: Timers;
  readonly logger?: Logger;
}

export class AuditBacklogFullError extends Error {
  constructor(backlog: number, adding: number, limit: number) {
    super(
      `audit backlog full: ${backlog} decisions not yet pushed (limit ${limit}), refusing ${adding} more intents; hold the writes until the audit branch accepts pushes again`,
    );
    this.name = 'AuditBacklogFullError';
  }
}

export { AuditUnavailableError };

export class AuditWriteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuditWriteError';
  }
}

/** The fence is closed: this process no longer holds the lease and records nothing. */
export class AuditNotLeaderError extends AuditWriteError {
  constructor(what: string) {
    super(
      `audit: not the leader (lease lost or not held); ${what}; writes must not be sent; the leader's recovery records the outcomes of what reached Git, this process (as a standby, or at its next term) pushes the rest`,
    );
    this.name = 'AuditNotLeaderError';
  }
}

interface IntentWaiter {
  readonly decisions: readonly Decision[];
  resolve(): void;
  reject(error: Error): void;
}

/** What one cycle took on: the intent waiters it settles, the intents it committed. */
interface CycleTurn {
  readonly waiters: IntentWaiter[];
  readonly committedIntents: Set<string>;
}

/** Maintenance deferred for waiting intents runs anyway once this many times `maintainEvery` commits were made. */
const maintenanceOverdueFactor = 4;

const pad = (value: number, width = 2): string => String(value).padStart(width, '0');

/**
 * `audit/<cluster>/YYYY/MM/DD/HH/THHMMSSZ-<controller>-<seq>.jsonl` (UTC). A commit
 * rewrites the trees on its file's path: with a folder per hour, the largest of them
 * holds one hour of files (360 at one commit every 10 s), so the cost of a commit does
 * not grow with the day's (or the year's) history.
 */
export function auditFilePath(
  cluster: string,
  controller: string,
  at: number,
  sequence: number,
): string {
  const time = new Date(at);
  const hour = `${time.getUTCFullYear()}/${pad(time.getUTCMonth() + 1)}/${pad(time.getUTCDate())}/${pad(time.getUTCHours())}`;
  const stamp = `T${pad(time.getUTCHours())}${pad(time.getUTCMinutes())}${pad(time.getUTCSeconds())}Z`;
  return `audit/${cluster}/${hour}/${stamp}-${controller}-${pad(sequence, 6)}.jsonl`;
}

export class GitAuditWriter implements AuditSink {
  readonly #store: AuditStore;
  readonly #cluster: string;
  readonly #controller: string;
  readonly #mode: AuditMode;
  readonly #limits: BatchLimits;
  readonly #maxBacklog: number;
  readonly #retryIntervalMs: number;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #logger: Logger;
  readonly #batcher: Batcher;
  readonly #deduper = new RecordDeduper();
  readonly #untrack: () => void;

  #waiters: IntentWaiter[] = [];
  #unpushed = 0;
  /** Commits not yet pushed, checkpoints (no decisions) included. */
  #unpushedCommits = 0;
  #inFlight = 0;
  #sequence = 0;
  #chain: Promise<unknown> = Promise.resolve();
  #queued: { flushAll: boolean; promise: Promise<Error | undefined> } | undefined;
  #timer: { handle: unknown; at: number } | undefined;
  /** While a failed push waits for its retry: its timer, when it runs, why the push failed. */
  #retry: { readonly timer: unknown; readonly at: number; readonly cause: string } | undefined;
  #standbyTimer: unknown;
  /**
   * The remote tip the clone stood on when the term's recovery read it (reconcile), kept
   * until recovery's outcomes are committed: see #withoutClosedSinceRecovery.
   */
  #recoveryBase: string | undefined;
  #recoveryBaseEnds = false;
  #standbyDelay: number;
  readonly #standbyPushDelayMs: number;
  #retryDelay: number;
  #closed = false;
  #fence: AuditFence = () => true;
  #term: AuditTerm | undefined;
  /** The term whose start read the open intents (`#open`); see setFence. */
  #openTerm: string | undefined;
  #anchor: AuditAnchor | undefined;
  #commitsSinceMaintenance = 0;
  readonly #maintainEvery: number;
  #maintenanceQueued = false;
  /** This cluster's open intents, known from term start on (undefined before: no checkpoint). */
  #open: OpenIntents | undefined;
  /** The Blocked writes and gang memory each checkpoint carries (carried.ts), from term start on. */
  #carried: CarriedState | undefined;
  /** What of them is still in force; until the run says (keepCarriedWhile), all. */
  #carriedInForce: (carried: Carried) => Carried = (carried) => carried;
  #commitsSinceCheckpoint = 0;
  readonly #checkpointEvery: number;
  readonly #maxCommitsPerPush: number;
  /**
   * Commits an earlier process or term left unpushed: another leader may have closed
   * their intents meanwhile, so they are planned against the remote (leftovers.ts)
   * before anything is pushed.
   */
  #leftovers = false;
  /**
   * Intents this process committed since `beginTerm`, and intents it accepted an outcome
   * for (recovery's own, queued or pushed behind the backlog): a recovery retry leaves them.
   */
  readonly #termIntents = new Set<string>();
  #trackingTermIntents = false;

  constructor(options: AuditWriterOptions) {
    this.#store = options.store;
    this.#cluster = options.cluster;
    this.#controller = options.controller;
    this.#mode = options.mode ?? 'strict';
    this.#limits = options.batch;
    this.#maxBacklog = options.maxBacklog ?? 100_000;
    this.#maintainEvery = options.maintainEvery ?? 200;
    this.#checkpointEvery = options.checkpointEvery ?? 200;
    this.#maxCommitsPerPush = options.maxCommitsPerPush ?? 100;
    this.#retryIntervalMs = options.retryIntervalMs ?? Math.max(1_000, options.batch.maxDelayMs);
    this.#retryDelay = this.#retryIntervalMs;
    this.#standbyPushDelayMs = options.standbyPushDelayMs ?? 30_000;
    this.#standbyDelay = this.#standbyPushDelayMs;
    this.#clock = options.clock ?? systemClock;
    this.#timers = options.timers ?? realTimers;
    this.#logger = options.logger ?? silentLogger;
    this.#batcher = new Batcher(options.batch, { intentsImmediate: this.#mode === 'strict' });
    // Validate identities now (they go into paths and trailers), not at the first commit.
    auditFilePath(this.#cluster, this.#controller, 0, 0);
    commitMessage([placeholderDecision], {
      batch: 'records',
      controller: this.#controller,
      cluster: this.#cluster,
    });
    if (!Number.isInteger(this.#maxBacklog) || this.#maxBacklog < 1) {
      throw new Error(`audit maxBacklog must be a positive integer, got ${this.#maxBacklog}`);
    }
    if (!Number.isInteger(this.#maxCommitsPerPush) || this.#maxCommitsPerPush < 1) {
      throw new Error(
        `audit maxCommitsPerPush must be a positive integer, got ${this.#maxCommitsPerPush}`,
      );
    }
    this.#untrack = trackBacklog(this);
  }

  /**
   * Opens (or creates) the local clone in `cacheDir`, fetches the audit branch (a
   * missing branch is fine: the first push creates it as an orphan), and schedules a
   * push of commits a previous run left unpushed.
   */
  static async open(
    options: Omit<AuditWriterOptions, 'store'> & {
      readonly url: string;
      readonly branch?: string;
      readonly token?: TokenSource;
      readonly username?: string;
      /** The deploy key of an SSH URL (policy/git-ssh.ts). */
      readonly ssh?: SshAccess;
      readonly cacheDir: string;
      readonly retry?: Partial<RetryOptions>;
      readonly author?: { readonly name: string; readonly email: string };
      readonly signer?: SshSigner;
      /** Commits a fresh clone fetches (AuditRepoOptions.shallowDepth). */
      readonly shallowDepth?: number;
      /** Hours of folders the tip's tree keeps (the policy's spec.audit.window; window.ts). */
      readonly treeWindowHours?: number;
      /**
       * Leave commits a previous run did not push for `reconcile` at the first term
       * (a fenced writer: a process that does not lead pushes nothing). Default: push now.
       */
      readonly leftoversAtTermStart?: boolean;
    },
  ): Promise<{ writer: GitAuditWriter; repo: AuditRepo }> {
    const logger = options.logger ?? silentLogger;
    const repo = new AuditRepo({
      dir: join(options.cacheDir, 'audit.git'),
      url: options.url,
      branch: options.branch ?? 'tollgate/audit',
      ...(options.token === undefined ? {} : { token: options.token }),
      ...(options.username === undefined ? {} : { username: options.username }),
      ...(options.ssh === undefined ? {} : { ssh: options.ssh }),
      author: options.author ?? {
        name: `tollgate ${options.controller}`,
        email: `${options.controller}@${options.cluster}.tollgate.invalid`,
      },
      ...(options.clock ? { clock: options.clock } : {}),
      logger,
      ...(options.retry ? { retry: options.retry } : {}),
      ...(options.signer ? { signer: options.signer } : {}),
      ...(options.shallowDepth === undefined ? {} : { shallowDepth: options.shallowDepth }),
      ...(options.treeWindowHours === undefined
        ? {}
        : { treeWindowHours: options.treeWindowHours }),
    });
    await repo.open();
    try {
      await repo.fetch();
    } catch (error) {
      // Starting with an unreachable remote is allowed: commits queue locally (the backlog).
      logger.warn(
        { err: repo.redact((error as Error).message), url: repo.url },
        'audit remote not reachable at start',
      );
    }
    const writer = new GitAuditWriter({ ...options, store: repo });
    await writer.#releasingCache(() => writer.#loadUnpushed(options.leftoversAtTermStart !== true));
    return { writer, repo };
  }

  /**
   * Runs work that reads the clone (a commit-and-push cycle, the open, a term start's
   * reconcile, a standby's push), then drops what the Git library cached of it
   * (AuditRepo.releaseCache). Every such piece of work goes through here: a quiet leader
   * may do none for hours, and soak seed 25's leader, whose term start's packs stayed
   * cached, held 69 MB of live heap at rest against 45-47 MB at work (issue 24). What the
   * work returned keeps its own reference (a reconcile's source: recovery reads through
   * it, then lets it go).
   */
  async #releasingCache<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } finally {
      this.#store.releaseCache?.();
    }
  }

  async #loadUnpushed(pushNow: boolean): Promise<void> {
    const left = await this.#store.unpushed();
    this.#unpushed = left.reduce((sum, commit) => sum + commit.decisions, 0);
    this.#unpushedCommits = left.length;
    if (left.length > 0 && !pushNow) {
      this.#leftovers = true;
      this.#logger.info(
        { commits: left.length, decisions: this.#unpushed },
        'audit commits left unpushed by a previous run; planned and rebuilt on the remote tip at the start of the next term, pushed behind it (or pushed by this process as a standby if another replica leads)',
      );
      this.#armStandbyPush();
    } else if (left.length > 0) {
      this.#logger.info(
        { commits: left.length, decisions: this.#unpushed },
        'audit commits left unpushed by a previous run; pushing',
      );
      void this.#requestCycle(false);
    }
  }

  /**
   * Asked before every commit and push: a process that no longer holds the lease (a
   * stall past it, a lost renewal) must not record, or the successor's recovery and this
   * process would both give outcomes to the same intents. While it is closed, queued
   * decisions are dropped (logged, counted in tollgate_audit_dropped_total), strict
   * intents are refused (their writes are not sent), and commits already made stay
   * local, unpushed, until `reconcile` at this process's next term.
   *
   * `term` names the lease term now open (its fencing token; undefined between terms):
   * the open intents a checkpoint lists are the ones this writer's term start read, so
   * no checkpoint is written in a term whose start has not read them yet (soak seed 29:
   * a replica leading again checkpointed its earlier term's open intents, none, on top of
   * another leader's 11, before its term start read the branch; recovery then read back
   * to that checkpoint and never closed them).
   */
  setFence(fence: AuditFence, term?: AuditTerm): void {
    this.#fence = fence;
    this.#term = term;
  }

  /**
   * The tamper anchor outside the branch: after every push the pushed tip is written to
   * it, and at term start (reconcile) the fetched branch must still contain the commit
   * it names; else the branch was rewritten (a force push, reset or deletion), even when
   * this clone is new. tollgate then refuses the remote: reconcile rejects, nothing is
   * pushed (strict writes are held), `tollgate_audit_history_rewritten` is 1, the
   * error is logged and `anchor.rewritten` is told.
   */
  setAnchor(anchor: AuditAnchor): void {
    this.#anchor = anchor;
  }

  /**
   * Refuses a branch that lost the anchored commit (see setAnchor); a commit the last
   * fetch does not hold is looked for again by a fetch begun after the anchor was read.
   */
  async #checkAnchor(): Promise<void> {
    const value = this.#anchor?.read();
    const repo = this.#store;
    if (value === undefined || !(repo instanceof AuditRepo)) return;
    const anchor = parseAnchor(value);
    if (anchor === undefined || anchor.branch !== repo.branch) {
      this.#logger.warn(
        { anchor: value, branch: repo.branch },
        'audit anchor not for this branch; not checked',
      );
      return;
    }
    // The anchor is read after the fetch before it: a push that landed in between (the
    // leader pushing while a standby or a new term fetched) names a commit that fetch
    // could not see. A fetch begun after this read holds it unless history was rewritten
    // (the soak's seed 10 refused a branch that had only grown). Fetched before `contains`
    // deepens a shallow clone looking for it.
    if (!(await repo.holds(anchor.oid))) await repo.fetch();
    if (await repo.contains(anchor.oid)) return;
    const error = new AuditHistoryRewrittenError(
      repo.branch,
      repo.url,
      anchor.oid,
      (await repo.trackingTip()) ?? '(deleted)',
      'the last audit commit tollgate pushed (recorded in the leader Lease)',
    );
    repo.refuse(error);
    this.#logger.error({ err: error.message }, 'audit branch rewritten; refusing it');
    this.#anchor?.rewritten?.(error);
    throw error;
  }

  /** After a push: the pushed tip becomes the anchor. */
  async #writeAnchor(): Promise<void> {
    const repo = this.#store;
    if (!this.#anchor || !(repo instanceof AuditRepo)) return;
    const tip = await repo.trackingTip();
    if (tip !== undefined) this.#anchor.write(`${repo.branch}@${tip}`);
  }

  /**
   * Term start, before recovery reads the trail: refresh from the remote, plan what an
   * earlier run or term left unpushed against it (leftovers.ts) and rebuild it on the
   * remote tip, locally, so the clone recovery reads holds every intent and outcome
   * exactly once, as the remote will once it is pushed. The push of that backlog goes on
   * behind (the writer's own push path, in bounded pushes), so recovery and the loops do
   * not wait for it; in strict mode their writes do, since a strict intent is settled
   * only once pushed and it is pushed after the backlog. Rejects while the remote cannot
   * be read: leftovers not planned against it could give an intent a second outcome.
   */
  async reconcile(): Promise<AuditSource | undefined> {
    const sync = this.#store.sync?.bind(this.#store);
    // On the chain: no commit may land between the read of the open intents and the
    // seed it becomes (a recovery retry runs while the loops record), or an outcome
    // committed meanwhile would be lost from the open intents and the next checkpoint
    // would list its intent as open.
    const steps: Record<string, number> = {};
    const step = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
      const started = performance.now();
      try {
        return await work();
      } finally {
        steps[name] = Math.round(performance.now() - started);
      }
    };
    const queued = performance.now();
    const run = this.#chain.then(() => {
      steps.waitMs = Math.round(performance.now() - queued);
      return this.#releasingCache(async () => {
        if (sync) await step('fetchMs', sync);
        await step('anchorMs', () => this.#checkAnchor());
        const planned = await step('leftoversMs', () => this.#replayLeftovers());
        await step('rebaseMs', () => this.#rebaseOnRemote(planned));
        await step('unpushedMs', () => this.#countUnpushed());
        await step('recoveryBaseMs', () => this.#markRecoveryBase());
        return step('seedMs', () => this.#seedFromClone());
      });
    });
    this.#chain = run.catch(() => undefined);
    const source = await run;
    // Each step of a term start, so a slow one is named (the soak's seed 36: term starts
    // of 18-32 s while faults came every half minute).
    this.#logger.info(steps, 'audit: term start reconciled the clone with the remote');
    if (this.#unpushedCommits > 0) {
      this.#logger.info(
        {
          commits: this.#unpushedCommits,
          decisions: this.#unpushed,
          maxCommitsPerPush: this.#maxCommitsPerPush,
        },
        'audit: commits not yet pushed at term start, planned and rebuilt on the remote tip; recovery and the loops start now, the backlog is pushed behind (tollgate_audit_backlog)',
      );
    }
    if (this.#unpushedCommits > 0) void this.#requestCycle(true);
    return source;
  }

  /**
   * Unpushed commits on a base the remote moved past are planned against what it
   * recorded since (as a push that finds the remote moved does; `planned`: the leftover
   * replay just did), then rebuilt on its tip.
   */
  async #rebaseOnRemote(planned: boolean): Promise<void> {
    const repo = this.#store;
    if (!(repo instanceof AuditRepo)) return;
    const pending = await repo.unpushed();
    if (pending.length === 0 || pending[0]?.parent === (await repo.trackingTip())) return;
    if (!planned) await this.#replanMoved(pending, true);
    await repo.rebase();
  }

  /** Reconcile's last step, run on the chain: the open intents at the local tip. */
  async #seedFromClone(): Promise<AuditSource | undefined> {
    if (!(this.#store instanceof AuditRepo)) return undefined;
    const stats = { commits: 0 };
    const open = await openIntentsDeepening(this.#store, this.#cluster, stats);
    const read = await readCarried(await repoSource(this.#store), this.#cluster);
    if (read.error !== undefined)
      this.#logger.warn(
        { err: read.error, commits: read.commits },
        'audit: Blocked writes and gang memory read back only in part at term start (the end of a shallow clone); the next checkpoint carries what was read',
      );
    this.seedOpenIntents(open, read.carried);
    // As far from the last checkpoint as recovery read: a trail without one (written
    // before checkpoints) gets its first with the term's first cycle; so does a trail
    // whose checkpoints do not carry the Blocked writes (written before they were
    // carried), so what the read found does not fall behind its commit limit.
    this.#commitsSinceCheckpoint = read.predatesCarried
      ? Math.max(stats.commits, this.#checkpointEvery)
      : stats.commits;
    return repoSource(this.#store);
  }

  /**
   * The cluster's open intents at the local tip (term start): from here on the writer
   * keeps them as its commits land and writes them as a checkpoint every
   * `checkpointEvery` commits.
   */
  /**
   * The open intents and the carried state as they stand now, kept since the term start
   * seeded them (reconcile) as every commit landed: what reading the local trail back to
   * its last checkpoint would give, without reading it again (recovery and the gate loop
   * take them from here). Undefined before a reconcile seeded them.
   */
  termState(): { readonly open: readonly Decision[]; readonly carried: Carried } | undefined {
    if (!this.#open || !this.#carried) return undefined;
    return { open: this.#open.list(), carried: this.#carried.peek() };
  }

  seedOpenIntents(open: readonly Decision[], carried: Carried = noCarried): void {
    this.#open = new OpenIntents(open);
    this.#openTerm = this.#term?.();
    this.#carried = new CarriedState(carried);
  }

  /**
   * Which of the carried Blocked writes and gang memory are still in force, asked at
   * each checkpoint (decide/release-carried.ts `carriedInForce` over the view and the
   * policy in force): what it drops is not carried again, so a checkpoint's carried
   * state is bounded by the pods that exist.
   */
  keepCarriedWhile(inForce: (carried: Carried) => Carried): void {
    this.#carriedInForce = inForce;
  }

  get backlog(): number {
    return this.#batcher.size + this.#inFlight + this.#unpushed;
  }

  get mode(): AuditMode {
    return this.#mode;
  }

  recordIntents(decisions: readonly Decision[]): Promise<void> {
    if (this.#closed) return Promise.reject(new AuditWriteError('audit writer is closed'));
    if (decisions.length === 0) return Promise.resolve();
    const wrong = decisions.find((decision) => phaseOf(decision) !== 'intent');
    if (wrong) {
      return Promise.reject(
        new AuditWriteError(
          `recordIntents takes pending decisions; ${wrong.id} has outcome "${wrong.outcome.result}" (use record())`,
        ),
      );
    }
    if (this.backlog + decisions.length > this.#maxBacklog) {
      return Promise.reject(
        new AuditBacklogFullError(this.backlog, decisions.length, this.#maxBacklog),
      );
    }
    const unavailable = this.#unavailable();
    if (unavailable) return Promise.reject(unavailable);
    this.#batcher.add('intents', decisions, this.#clock.now());
    if (this.#mode === 'async') {
      this.#afterAdd();
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      this.#waiters.push({ decisions, resolve, reject });
      void this.#requestCycle(false);
    });
  }

  record(decisions: readonly Decision[]): void {
    if (this.#closed) throw new AuditWriteError('audit writer is closed');
    const now = this.#clock.now();
    for (const decision of decisions) {
      const phase = phaseOf(decision);
      if (phase === 'intent') {
        throw new AuditWriteError(
          `record() takes outcomes and records; ${decision.id} is a pending intent (use recordIntents())`,
        );
      }
      if (phase === 'record') {
        if (this.#deduper.isRepeat(decision)) continue;
        if (this.backlog >= this.#maxBacklog) {
          auditDroppedTotal.inc();
          this.#logger.warn(
            { id: decision.id, kind: decision.kind, backlog: this.backlog },
            'audit backlog full; record without a write refused',
          );
          continue;
        }
      }
      if (phase === 'outcome' && this.#trackingTermIntents) this.#termIntents.add(decision.id);
      this.#batcher.add(batchOf(phase), [decision], now);
    }
    this.#afterAdd();
  }

  #afterAdd(): void {
    const full = batchKinds.some(
      (batch) => this.#batcher.sizeOf(batch) >= this.#limits.maxDecisions,
    );
    if (full || this.#batcher.due(this.#clock.now()).length > 0) void this.#requestCycle(false);
    else this.#arm();
  }

  async flush(): Promise<void> {
    const error = await this.#requestCycle(true);
    if (error) throw error;
  }

  /**
   * Flushes (unless `flush: false`: the caller already flushed, or gave up on a flush that
   * hangs), then stops the timers. What is not pushed stays committed locally.
   */
  async close(options: { readonly flush?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (options.flush !== false) await this.flush();
    } finally {
      if (this.#timer) this.#timers.clear(this.#timer.handle);
      if (this.#retry) this.#timers.clear(this.#retry.timer);
      if (this.#standbyTimer !== undefined) this.#timers.clear(this.#standbyTimer);
      this.#timer = undefined;
      this.#retry = undefined;
      this.#standbyTimer = undefined;
      this.#untrack();
    }
  }

  /** Arms the timer for the next time-based batch. */
  #arm(): void {
    const at = this.#batcher.nextDueAt();
    if (at === undefined || this.#closed) return;
    if (this.#timer && this.#timer.at <= at) return;
    if (this.#timer) this.#timers.clear(this.#timer.handle);
    const handle = this.#timers.set(
      () => {
        this.#timer = undefined;
        void this.#requestCycle(false);
      },
      Math.max(0, at - this.#clock.now()),
    );
    this.#timer = { handle, at };
  }

  /** Queues one cycle; callers arriving before it starts share it. Resolves with the cycle's error, if any. */
  #requestCycle(flushAll: boolean): Promise<Error | undefined> {
    if (this.#queued) {
      this.#queued.flushAll ||= flushAll;
      return this.#queued.promise;
    }
    const entry: { flushAll: boolean; promise: Promise<Error | undefined> } = {
      flushAll,
      promise: Promise.resolve(undefined),
    };
    entry.promise = this.#chain.then(() => {
      this.#queued = undefined;
      return this.#releasingCache(() => this.#cycle(entry.flushAll));
    });
    this.#queued = entry;
    this.#chain = entry.promise;
    return entry.promise;
  }

  #redact(text: string): string {
    return this.#store.redact ? this.#store.redact(text) : text;
  }

  /**
   * Commits what is due, pushes everything unpushed (in pushes of at most
   * `maxCommitsPerPush` commits, committing what fell due between two), settles the
   * intent waiters. Never rejects.
   */
  async #cycle(flushAll: boolean): Promise<Error | undefined> {
    const now = this.#clock.now();
    const kinds = flushAll
      ? batchKinds.filter((batch) => this.#batcher.sizeOf(batch) > 0)
      : this.#batcher.due(now);
    const turn: CycleTurn = { waiters: [], committedIntents: new Set() };
    if (!this.#fence()) {
      const waiters = kinds.includes('intents') ? this.#waiters.splice(0) : [];
      return this.#dropUnfenced(kinds, waiters);
    }
    // A failed push waits for its retry: commit what is due, push nothing before the retry.
    if (!flushAll && this.#retry) return this.#commitWhileRetryWaits(kinds);
    let failure = await this.#commitBatches(kinds, turn);
    if (!failure && this.#fence()) failure = await this.#checkpointIfDue();
    if (this.#unpushedCommits > 0 && !failure && !this.#fence()) {
      this.#leftovers = true;
      failure = new AuditNotLeaderError(`${this.#unpushed} decisions kept local, not pushed`);
      this.#logger.warn({ backlog: this.backlog }, failure.message);
    } else if (this.#unpushedCommits > 0 && !failure) {
      failure = await this.#pushBacklog(turn);
    }
    if (failure && this.#unpushedCommits > 0 && !(failure instanceof AuditNotLeaderError))
      this.#scheduleRetry(failure);
    if (failure instanceof AuditNotLeaderError) this.#armStandbyPush();
    if (turn.waiters.length > 0) this.#settle(turn.waiters, failure, turn.committedIntents);
    this.#arm();
    if (!failure) this.#maintainSoon();
    return failure;
  }

  /**
   * Commits the queued decisions of `kinds`, at most `maxDecisions` per commit; the intent
   * waiters of this moment join the turn. After a failed commit, what was not committed
   * is kept, in order, for the next cycle; intents are not kept (their callers are told
   * to hold the writes, so recording them later would be false).
   */
  async #commitBatches(kinds: readonly BatchKind[], turn: CycleTurn): Promise<Error | undefined> {
    if (kinds.includes('intents')) turn.waiters.push(...this.#waiters.splice(0));
    const now = this.#clock.now();
    for (const batch of kinds) {
      // Recovery's outcomes were queued before endTerm: these chunks hold them.
      const recoveryCommitted = batch === 'outcomes' && this.#recoveryBaseEnds;
      const chunks = this.#batcher.take(batch);
      for (const [index, taken] of chunks.entries()) {
        this.#inFlight += taken.length;
        try {
          const chunk =
            batch === 'outcomes' ? await this.#withoutClosedSinceRecovery(taken) : taken;
          if (chunk.length > 0) await this.#commit(batch, chunk);
          this.#unpushed += chunk.length;
          // Only intents that reached a commit get a cancellation when the cycle fails.
          if (batch === 'intents')
            for (const decision of chunk) turn.committedIntents.add(decision.id);
        } catch (error) {
          const failure = new AuditWriteError(
            `audit commit failed: ${this.#redact((error as Error).message)}`,
          );
          this.#logger.error({ err: failure.message, batch }, 'audit commit failed');
          if (batch !== 'intents') this.#batcher.add(batch, chunks.slice(index).flat(), now);
          // Later kinds stay queued, except intents (their waiters are told to hold the writes).
          if (kinds.indexOf('intents') > kinds.indexOf(batch)) this.#batcher.take('intents');
          return failure;
        } finally {
          this.#inFlight -= taken.length;
        }
      }
      if (recoveryCommitted) this.#recoveryBase = undefined;
    }
    return undefined;
  }

  /** Reconcile, before recovery reads the clone: the remote tip it stands on. */
  async #markRecoveryBase(): Promise<void> {
    this.#recoveryBase =
      this.#store instanceof AuditRepo ? await this.#store.trackingTip() : undefined;
    this.#recoveryBaseEnds = false;
  }

  /**
   * Recovery decides its outcomes from the trail as the clone held it at term start (the
   * remote tip #recoveryBase). Until they are committed, another writer's outcome for the
   * same intent may reach the remote (a push under way when its lease was lost lands
   * seconds later), and a push that rebuilds this clone's commits on the new tip puts it
   * below them, where the push's own replanning (which looks back to the base of the
   * commits it pushes) does not see it: soak seed 5 pushed such an outcome as a second
   * one. So until then, outcomes are planned against what the remote recorded since that
   * tip, as leftovers are: the remote's stays the intent's one outcome, this one is kept
   * as a confirmation or correction record.
   */
  async #withoutClosedSinceRecovery(chunk: readonly Decision[]): Promise<readonly Decision[]> {
    const repo = this.#store;
    const base = this.#recoveryBase;
    if (base === undefined || !(repo instanceof AuditRepo)) return chunk;
    if ((await repo.trackingTip()) === base) return chunk;
    const ids = new Set(chunk.map((decision) => decision.id));
    const remote = await remoteRecords(repo, base, this.#cluster, ids);
    if (remote.outcomes.size === 0) return chunk;
    const records = chunk.map((decision): AuditRecord => ({
      ...decision,
      v: recordSchemaVersion,
      phase: phaseOf(decision),
    }));
    const plan = planLeftovers([{ path: '', batch: 'outcomes', records }], remote, {
      now: this.#clock.now(),
      remoteMoved: true,
      rebased: true,
    });
    const kept = [...plan.corrections, ...plan.confirmations];
    if (kept.length > 0) {
      await this.#commit('records', kept);
      this.#unpushed += kept.length;
    }
    auditLeftoversDroppedTotal.inc(plan.dropped.length);
    this.#logger.warn(
      {
        dropped: plan.dropped.length,
        corrections: plan.corrections.length,
        confirmations: plan.confirmations.length,
        records: plan.dropped.slice(0, 100).map((record) => `${record.phase} ${record.id}`),
      },
      "outcomes not recorded: another writer's outcome for the same intent reached Git after this term's recovery read the trail; kept as a confirmation or correction record",
    );
    return plan.commits.flatMap((commit) => commit.records);
  }

  /**
   * Pushes the unpushed commits in pushes of at most `maxCommitsPerPush`. Between two, the
   * fence is asked again (a process that lost the lease stops after the push under way,
   * the rest kept local for the next term) and what fell due meanwhile is committed, so
   * a long backlog does not hold the loops' records back until it is all pushed (strict
   * intents committed meanwhile are settled when the push reaches them, at the turn's end).
   */
  async #pushBacklog(turn: CycleTurn): Promise<Error | undefined> {
    try {
      await this.#replayLeftovers();
      let pushes = 0;
      while (this.#unpushedCommits > 0) {
        if (!this.#fence()) {
          this.#leftovers = true;
          const error = new AuditNotLeaderError(
            `${this.#unpushed} decisions kept local, not pushed`,
          );
          this.#logger.warn({ backlog: this.backlog }, error.message);
          return error;
        }
        await this.#store.push((pending) => this.#replanMoved(pending), {
          maxCommits: this.#maxCommitsPerPush,
          fence: this.#fence,
        });
        pushes += 1;
        await this.#countUnpushed();
        this.#pushLanded();
        await this.#writeAnchor();
        if (this.#unpushedCommits === 0) break;
        this.#logger.info(
          { pushes, commits: this.#unpushedCommits, decisions: this.#unpushed },
          'audit backlog: a push landed, commits still to push',
        );
        const failure = await this.#commitBatches(this.#batcher.due(this.#clock.now()), turn);
        if (failure) return failure;
      }
      return undefined;
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      this.#logger.error(
        { err: this.#redact(failure.message), backlog: this.backlog },
        'audit push failed; commits kept locally',
      );
      return failure;
    }
  }

  /** The unpushed counts from the store (after a push, a replay or a rebuild). */
  async #countUnpushed(): Promise<void> {
    const left = await this.#store.unpushed();
    this.#unpushed = left.reduce((sum, commit) => sum + commit.decisions, 0);
    this.#unpushedCommits = left.length;
  }

  /**
   * Leftovers (see #leftovers) are planned against the remote before they are pushed:
   * what the remote already records is dropped (logged, counted in
   * tollgate_audit_leftover_records_dropped_total), an outcome that contradicts the
   * remote's becomes a correction record, the rest is committed again on the remote tip.
   * Rejects while the remote cannot be read (the leftovers stay, nothing is pushed).
   * True when it planned them.
   */
  async #replayLeftovers(): Promise<boolean> {
    const repo = this.#store;
    if (!this.#leftovers) return false;
    if (repo instanceof AuditRepo) {
      await repo.fetch();
      const left = await repo.unpushed();
      if (left.length > 0) await this.#replay(repo, left, { termStart: true });
    }
    this.#leftovers = false;
    return true;
  }

  /**
   * A push found the remote moved under commits not yet pushed (a push stretched by Git
   * faults while another leader's term began): they are planned as leftovers, so an
   * outcome the other leader's recovery already recorded is kept as a record naming it,
   * not recorded as a second outcome.
   */
  async #replanMoved(pending: readonly LocalCommit[], termStart = false): Promise<void> {
    if (this.#store instanceof AuditRepo)
      await this.#replay(this.#store, pending, { rebased: true, termStart });
  }

  /**
   * Plans `left` against the remote (leftovers.ts) and, when the plan drops anything or
   * `termStart` finds the remote moved past their base, commits the plan anew on the
   * remote tip. At a term start the planned commits are rebuilt in chunks
   * (rebuiltCommits: files of at most batch.maxDecisions records), each chunk one commit
   * rewriting its hour folder once, so the rebuild costs the leftovers' records, not
   * their number times their folder. A push that found the remote moved (not a term
   * start) replays them one for one: those are this term's commits, few, and a strict
   * intent's waiter is settled by the push of the commits it is in.
   */
  async #replay(
    repo: AuditRepo,
    left: readonly LocalCommit[],
    options: { readonly rebased?: boolean; readonly termStart?: boolean } = {},
  ): Promise<void> {
    const leftovers = await readLeftovers(repo, left);
    const ids = new Set(leftovers.flatMap((commit) => commit.records.map((record) => record.id)));
    for (const intent of this.#open?.list() ?? []) ids.add(intent.id);
    const base = left[0]?.parent;
    const remote = await remoteRecords(repo, base, this.#cluster, ids);
    // Another writer (a standby pushing its earlier term's commits) may have closed
    // intents this term holds open; the next checkpoint must not list them (soak seed 12:
    // a successor read back to such a checkpoint and closed 11 intents a second time).
    this.#open?.committed([...remote.outcomes.values()]);
    const remoteMoved = (await repo.trackingTip()) !== base;
    const plan = planLeftovers(leftovers, remote, {
      now: this.#clock.now(),
      remoteMoved,
      rebased: options.rebased ?? false,
    });
    const inChunks = options.termStart === true && remoteMoved;
    if (!plan.changed && !inChunks) return;
    await repo.resetToRemote();
    const commits = inChunks
      ? rebuiltCommits(plan.commits, this.#limits.maxDecisions)
      : plan.commits;
    for (const commit of commits) {
      if (commit.verbatim) {
        this.#logger.warn(
          { file: commit.path, err: commit.verbatim.unreadable },
          'a leftover commit whose file is not audit records is replayed unchanged',
        );
        await repo.commitFile(commit.path, commit.verbatim.text, commit.verbatim.message);
        continue;
      }
      const message = rebuiltCommitMessage(commit.records, {
        controller: this.#controller,
        cluster: this.#cluster,
      });
      await repo.commitFile(commit.path, serializeBatch(commit.records), message);
    }
    const kept = [...plan.corrections, ...plan.confirmations];
    if (kept.length > 0) await this.#commit('records', kept);
    const now = await repo.unpushed();
    this.#unpushed = now.reduce((sum, commit) => sum + commit.decisions, 0);
    this.#unpushedCommits = now.length;
    if (inChunks)
      this.#logger.info(
        { leftovers: left.length, rebuilt: commits.length, maxRecords: this.#limits.maxDecisions },
        'audit leftovers rebuilt on the remote tip, consecutive commits of one hour folder and writer merged into files of at most maxRecords records',
      );
    if (!plan.changed) return;
    auditLeftoversDroppedTotal.inc(plan.dropped.length);
    this.#logger.warn(
      {
        dropped: plan.dropped.length,
        corrections: plan.corrections.length,
        confirmations: plan.confirmations.length,
        records: plan.dropped
          .slice(0, 100)
          .map((record) => `${record.phase} ${record.id}: ${record.why}`),
      },
      'leftover audit records dropped: the remote already records them (another leader closed these intents meanwhile); an outcome is kept as a correction record when it contradicts the remote one, as a confirmation when not',
    );
  }

  /**
   * A leader term begins: from now until `endTerm`, intents this process commits are
   * remembered, so a recovery run later in the term (a retry) leaves them to the loops
   * that sent them instead of closing them as left open.
   */
  beginTerm(): void {
    this.#termIntents.clear();
    this.#trackingTermIntents = true;
  }

  /** Recovery of the term is done: intents are no longer remembered. */
  endTerm(): void {
    this.#recoveryBaseEnds = true;
    this.#termIntents.clear();
    this.#trackingTermIntents = false;
  }

  /** Whether this process committed the intent, or accepted an outcome for it, in the current term (see beginTerm). */
  recordedThisTerm(id: string): boolean {
    return this.#termIntents.has(id);
  }

  /** Every `checkpointEvery` commits, the open intents as a checkpoint commit (checkpoint.ts). */
  async #checkpointIfDue(): Promise<Error | undefined> {
    if (!this.#open || this.#commitsSinceCheckpoint < this.#checkpointEvery) return undefined;
    // Open intents read at an earlier term's start: this term's start has not read the
    // branch yet (another leader may have left intents open since). It is still due.
    if (this.#term !== undefined && this.#term() !== this.#openTerm) return undefined;
    const open = this.#open.list();
    const carried = this.#carried?.take(this.#carriedInForce);
    this.#sequence += 1;
    const path = auditFilePath(this.#cluster, this.#controller, this.#clock.now(), this.#sequence);
    try {
      await this.#store.commitFile(
        checkpointPath(path),
        serializeCheckpoint(this.#cluster, open, carried),
        checkpointMessage(open.length, { controller: this.#controller, cluster: this.#cluster }),
      );
      this.#commitsSinceCheckpoint = 0;
      this.#unpushedCommits += 1;
      this.#commitsSinceMaintenance += 1;
      auditCommitsTotal.inc({ batch: 'checkpoint' });
      return undefined;
    } catch (error) {
      const failure = new AuditWriteError(
        `audit checkpoint commit failed: ${this.#redact((error as Error).message)}`,
      );
      this.#logger.error({ err: failure.message }, 'audit checkpoint commit failed');
      return failure;
    }
  }

  /**
   * Queues the clone's maintenance once `maintainEvery` commits were made since the last:
   * on the chain after what is queued now, never inside a cycle, so the intents a cycle
   * pushed are settled before it (a strict release waited 6 s for a maintenance of 1,800
   * objects at 10,000 pods) and a cycle queued meanwhile goes first (#maintainWhenIdle).
   */
  #maintainSoon(): void {
    if (!this.#store.maintain || this.#maintenanceQueued) return;
    if (this.#commitsSinceMaintenance < this.#maintainEvery) return;
    this.#maintenanceQueued = true;
    this.#chain = this.#chain.then(() => {
      this.#maintenanceQueued = false;
      return this.#releasingCache(() => this.#maintainWhenIdle());
    });
  }

  /**
   * Maintains the clone, once every commit is pushed, unless a cycle waits behind
   * (intents to push: that cycle asks again when it ends) and maintenance is not yet
   * `maintenanceOverdueFactor` times overdue: under intents that never stop, the clone's
   * loose objects stay bounded.
   */
  async #maintainWhenIdle(): Promise<void> {
    if (this.#closed || this.#commitsSinceMaintenance < this.#maintainEvery) return;
    // Only once every commit is pushed: a failed push is retried first.
    if (this.#unpushedCommits > 0) return;
    const overdue = this.#commitsSinceMaintenance >= maintenanceOverdueFactor * this.#maintainEvery;
    if (this.#queued && !overdue) return;
    await this.#maintain();
  }

  /** Packs the clone; a failure is logged, the trail is not at stake. */
  async #maintain(): Promise<void> {
    if (!this.#store.maintain) return;
    this.#commitsSinceMaintenance = 0;
    try {
      const started = performance.now();
      const result = await this.#store.maintain();
      this.#logger.debug(
        { ...result, ms: Math.round(performance.now() - started) },
        'audit clone maintained (packed, pruned)',
      );
    } catch (error) {
      this.#logger.warn(
        { err: this.#redact((error as Error).message) },
        'audit clone maintenance failed; loose objects stay until the next try',
      );
    }
  }

  /** The fence is closed: nothing queued is recorded by this process, and nothing is pushed. */
  #dropUnfenced(kinds: readonly BatchKind[], waiters: readonly IntentWaiter[]): Error | undefined {
    let dropped = 0;
    for (const batch of kinds)
      for (const chunk of this.#batcher.take(batch)) dropped += chunk.length;
    if (this.#unpushedCommits > 0) {
      this.#leftovers = true;
      this.#armStandbyPush();
    }
    if (dropped === 0 && waiters.length === 0 && this.#unpushed === 0) return undefined;
    const error = new AuditNotLeaderError(
      `${dropped} queued decisions dropped, ${this.#unpushed} kept local, not pushed`,
    );
    if (dropped > 0) {
      auditDroppedTotal.inc(dropped);
      this.#logger.warn({ dropped, backlog: this.backlog }, error.message);
    }
    for (const waiter of waiters) waiter.reject(error);
    this.#arm();
    return error;
  }

  async #commit(batch: BatchKind, decisions: readonly Decision[]): Promise<void> {
    const now = this.#clock.now();
    this.#sequence += 1;
    const path = auditFilePath(this.#cluster, this.#controller, now, this.#sequence);
    const message = commitMessage(decisions, {
      batch,
      controller: this.#controller,
      cluster: this.#cluster,
    });
    await this.#store.commitFile(path, serializeBatch(decisions), message);
    if (batch === 'intents' && this.#trackingTermIntents)
      for (const decision of decisions) this.#termIntents.add(decision.id);
    this.#open?.committed(decisions);
    this.#carried?.committed(decisions);
    this.#unpushedCommits += 1;
    this.#commitsSinceCheckpoint += 1;
    this.#commitsSinceMaintenance += 1;
    auditCommitsTotal.inc({ batch });
    auditDecisionsTotal.inc({ batch }, decisions.length);
  }

  #settle(
    waiters: readonly IntentWaiter[],
    failure: Error | undefined,
    committedIntents: ReadonlySet<string>,
  ): void {
    if (!failure) {
      for (const waiter of waiters) waiter.resolve();
      return;
    }
    if (failure instanceof AuditNotLeaderError) {
      // Committed, not pushed: the next term's reconcile pushes them and recovery closes them.
      for (const waiter of waiters) waiter.reject(failure);
      return;
    }
    // The loop will not send these writes; say so in the trail so every intent has an outcome.
    const message =
      `audit record not pushed; write not sent: ${this.#redact(failure.message)}`.slice(0, 500);
    const at = this.#clock.now();
    const cancelled = waiters.flatMap((waiter) =>
      waiter.decisions
        .filter((decision) => committedIntents.has(decision.id))
        .map((decision): Decision => ({
          ...decision,
          at,
          outcome: { result: 'cancelled', message },
        })),
    );
    this.#batcher.add('outcomes', cancelled, at);
    const error = new AuditWriteError(
      `audit intents not pushed (strict mode), writes must not be sent: ${this.#redact(failure.message)}`,
    );
    for (const waiter of waiters) waiter.reject(error);
  }

  /**
   * A process that does not lead and holds commits it could not push while it led (Git
   * down, the lease lost, a kill) pushes them itself after `standbyPushDelayMs`, retried
   * with backoff up to the leader's ceiling (#standbyCeiling): otherwise they would wait
   * for this process to lead again, which it may never do, and go with its cache. If it
   * leads first, its term start does it.
   */
  #armStandbyPush(): void {
    if (this.#standbyTimer !== undefined || this.#closed) return;
    if (!(this.#store instanceof AuditRepo)) return;
    this.#standbyTimer = this.#timers.set(() => {
      this.#standbyTimer = undefined;
      const run = this.#chain.then(() => this.#releasingCache(() => this.#pushAsStandby()));
      this.#chain = run.catch(() => undefined);
      run.then(
        () => {
          this.#standbyDelay = this.#standbyPushDelayMs;
        },
        (error: unknown) => {
          this.#logger.warn(
            { err: this.#redact((error as Error).message), backlog: this.backlog },
            'audit: a standby could not push the commits its earlier terms left unpushed; retrying',
          );
          this.#standbyDelay = Math.min(this.#standbyCeiling(), this.#standbyDelay * 2);
          this.#armStandbyPush();
        },
      );
    }, this.#standbyDelay);
  }

  /**
   * The longest wait between a standby's push attempts: the leader's own ceiling (30 s in
   * strict mode, 5 minutes in async; see #scheduleRetry), or the first delay when that is
   * longer. A standby waiting longer than the leader would keep decisions out of Git for
   * minutes after Git came back (seed 21: 113 decisions, its delay grown to 240 s).
   */
  #standbyCeiling(): number {
    return Math.max(this.#mode === 'strict' ? 30_000 : 300_000, this.#standbyPushDelayMs);
  }

  /**
   * The standby's leftovers, planned against the remote as a term start plans them
   * (leftovers.ts: what another leader's recovery closed meanwhile is not recorded
   * twice), then pushed. The intents they leave open never reached the remote, so no
   * leader's recovery can close them: they are closed here (closeUnpushedIntents: in
   * strict mode such a write was never sent). Nothing else is recorded: the fence still
   * refuses every new decision. On the writer's chain, so a term start of this process
   * waits for it. Rejects when Git cannot be read or written (retried).
   */
  async #pushAsStandby(): Promise<void> {
    const repo = this.#store;
    if (this.#closed || this.#fence() || !(repo instanceof AuditRepo)) return;
    await repo.fetch();
    await this.#checkAnchor();
    const left = await repo.unpushed();
    if (left.length === 0) return this.#countUnpushed();
    await this.#replay(repo, left, { termStart: true });
    const open = closeUnpushedIntents(
      await readLeftovers(repo, await repo.unpushed()),
      this.#mode,
      this.#clock.now(),
    );
    if (open.length > 0) await this.#commit('outcomes', open);
    let pushes = 0;
    await this.#countUnpushed();
    while (this.#unpushedCommits > 0) {
      await repo.push((pending) => this.#replanMoved(pending), {
        maxCommits: this.#maxCommitsPerPush,
      });
      pushes += 1;
      await this.#countUnpushed();
    }
    this.#leftovers = false;
    auditStandbyClosedTotal.inc(open.length);
    this.#logger.info(
      { pushes, closed: open.length, mode: this.#mode },
      'audit: a standby pushed the commits its earlier terms left unpushed, closing the intents among them that never reached Git',
    );
  }

  /**
   * A failed push with commits left is retried after a delay doubling from
   * `retryIntervalMs`, up to 30 s in strict mode (every release waits for it: releases
   * resume within 30 s of Git coming back) and 5 minutes in async mode.
   */
  #scheduleRetry(failure: Error): void {
    if (this.#retry || this.#closed) return;
    const delay = this.#retryDelay;
    const ceiling = this.#mode === 'strict' ? 30_000 : 300_000;
    this.#retryDelay = Math.min(ceiling, this.#retryDelay * 2);
    const timer = this.#timers.set(() => {
      this.#retry = undefined;
      void this.#requestCycle(true);
    }, delay);
    this.#retry = { timer, at: this.#clock.now() + delay, cause: this.#redact(failure.message) };
  }

  /** A push landed: the next failure starts the backoff again, and no retry is owed. */
  #pushLanded(): void {
    this.#retryDelay = this.#retryIntervalMs;
    if (this.#retry) this.#timers.clear(this.#retry.timer);
    this.#retry = undefined;
    // Git takes pushes again, and what earlier terms left is pushed by this leader: a
    // standby push still armed with the delay its failures grew (up to 5 minutes in async) is
    // dropped, so the next lease loss arms the first delay, not that old timer.
    this.#standbyDelay = this.#standbyPushDelayMs;
    if (this.#standbyTimer !== undefined) this.#timers.clear(this.#standbyTimer);
    this.#standbyTimer = undefined;
  }

  /** Strict intents asked while a failed push waits for its retry: refused, not committed. */
  #unavailable(): AuditUnavailableError | undefined {
    if (this.#mode !== 'strict' || !this.#retry) return undefined;
    return new AuditUnavailableError(this.#retry.cause, this.#retry.at, this.#clock.now());
  }

  /**
   * A cycle while a failed push waits for its retry: outcomes and records are committed
   * (kept in order, pushed by the retry), intents queued before the push failed are
   * refused uncommitted like the ones asked since. One push attempt per retry, not one
   * per cycle: a Git outage made a push attempt, an intent commit and its cancellation
   * on every pass.
   */
  async #commitWhileRetryWaits(kinds: readonly BatchKind[]): Promise<Error | undefined> {
    const refused = kinds.includes('intents') ? this.#waiters.splice(0) : [];
    if (refused.length > 0) this.#batcher.take('intents');
    const unavailable = this.#unavailable();
    for (const waiter of refused)
      waiter.reject(unavailable ?? new AuditWriteError('audit push failing'));
    const turn: CycleTurn = { waiters: [], committedIntents: new Set() };
    const failure = await this.#commitBatches(kinds, turn);
    this.#arm();
    return failure;
  }
}

/**
 * The open intents at the clone's local tip, read back to the last checkpoint; a shallow
 * clone that ends before one is deepened (doubling) until it is reached or whole.
 */
export async function openIntentsDeepening(
  repo: AuditRepo,
  cluster: string,
  stats?: { commits: number },
): Promise<AuditRecord[]> {
  for (;;) {
    try {
      return await openIntents(await repoSource(repo), cluster, stats ? { stats } : {});
    } catch (error) {
      if (!(error instanceof Errors.NotFoundError) || !(await repo.deepen())) throw error;
      if (stats) stats.commits = 0;
    }
  }
}

const placeholderDecision: Decision = {
  id: 'validate',
  at: 0,
  loop: 'gate-release',
  kind: 'Hold',
  target: { namespace: 'n', name: 'n', uid: 'u', resourceVersion: '1' },
  policy: { commit: 'c', file: 'f', name: 'n' },
  inputs: [],
  reason: 'validate identities',
  outcome: { result: 'recorded' },
};

/**
 * The writer options that come from policy settings: the audit repo (absent = the
 * policy repo), branch, mode, batch limits and cluster name.
 */
export function auditOptionsFromSettings(
  settings: Settings,
  policyRepoUrl: string,
): { url: string; branch: string; mode: AuditMode; batch: BatchLimits; cluster: string } {
  return {
    url: settings.audit.repo ?? policyRepoUrl,
    branch: settings.audit.branch || 'tollgate/audit',
    mode: settings.audit.mode,
    batch: settings.audit.batch,
    cluster: settings.cluster,
  };
}
