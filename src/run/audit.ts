/**
 * Part 4 of `tollgate run`: the audit trail (a remote that is down only queues commits),
 * and the recovery of outcomes a previous leader left open, run at each term's start.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openAuditSource, type AuditSource } from '../audit/reader.ts';
import { sshSigner, type SshSigner } from '../audit/sign.ts';
import type { AuditSink } from '../audit/types.ts';
import type { Carried } from '../decide/release-carried.ts';
import { GitAuditWriter } from '../audit/writer.ts';
import type { EventRecorder } from '../cluster/events.ts';
import type { LeaderElector } from '../cluster/leader.ts';
import type { RunConfig } from '../cli/run-config.ts';
import type { ClusterView } from '../cluster/types.ts';
import { systemClock } from '../lib/clock.ts';
import { systemTimers, type Timers } from '../lib/timers.ts';
import { auditFinalFlushAbandonedTotal, auditRecoveryPending } from '../audit/metrics.ts';
import { recoverOpenIntents } from '../loops/gate-release-recovery.ts';
import type { Logger } from '../observe/log.ts';
import type { TokenSource } from '../policy/credentials.ts';
import type { SshAccess } from '../policy/git-ssh.ts';
import type { Policy } from '../policy/model.ts';

/** Where the audit trail is written. */
export interface AuditTarget {
  readonly url: string;
  readonly branch: string;
}

/**
 * The operator's choice alone: the flag, else the policy repository itself; the branch
 * the flag's, else `tollgate/audit`. The policy's `settings.audit.repo` and `branch`
 * are not used: the audit push carries a write credential, and a policy author (anyone
 * whose pull request merges) must not choose where it goes (see docs/security.md).
 * A policy folder has no remote to fall back on: no repository is an error.
 */
export function auditTarget(
  config: Pick<RunConfig, 'audit' | 'policy'>,
  _first: Policy,
): AuditTarget {
  const url = config.audit.repo ?? (config.policy.source === 'git' ? config.policy.url : undefined);
  if (url === undefined) {
    throw new Error(
      'no audit repository: set --audit-repo / TOLLGATE_AUDIT_REPO (a policy folder has no remote to write to)',
    );
  }
  return { url, branch: config.audit.branch ?? defaultAuditBranch };
}

export const defaultAuditBranch = 'tollgate/audit';

/**
 * The policy's audit location settings that differ from the target in use: logged as a
 * warning at start so an author who set them learns they have no effect.
 */
export function ignoredAuditSettings(first: Policy, target: AuditTarget): string[] {
  const ignored: string[] = [];
  const { repo, branch } = first.settings.audit;
  if (repo !== undefined && repo !== target.url) ignored.push(`settings.audit.repo (${repo})`);
  if (branch !== target.branch) ignored.push(`settings.audit.branch (${branch})`);
  return ignored;
}

export async function openAudit(options: {
  config: RunConfig;
  first: Policy;
  target: AuditTarget;
  token: TokenSource | undefined;
  /** The deploy key of an SSH audit repository (run/policy.ts sshAccess). */
  ssh?: SshAccess;
  log: Logger;
}): Promise<GitAuditWriter> {
  const { config, first, token, log } = options;
  const signer = signerFrom(config.audit.signingKeyFile);
  const { writer } = await GitAuditWriter.open({
    url: options.target.url,
    branch: options.target.branch,
    ...(token === undefined ? {} : { token }),
    ...(options.ssh === undefined ? {} : { ssh: options.ssh }),
    cacheDir: join(config.git.cacheDir, 'audit'),
    cluster: first.settings.cluster,
    controller: config.identity,
    mode: first.settings.audit.mode,
    batch: first.settings.audit.batch,
    treeWindowHours: first.settings.audit.windowHours,
    logger: log,
    // Planned and rebuilt on the remote tip by the first term's reconcile, before its
    // recovery reads the trail; pushed behind it.
    leftoversAtTermStart: true,
    ...(signer ? { signer } : {}),
  });
  if (signer) log.info({ publicKey: signer.publicKey }, 'audit commits are signed');
  return writer;
}

/** The commit signer from --audit-signing-key-file; an unreadable or unsupported key stops the start. */
function signerFrom(path: string | undefined): SshSigner | undefined {
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(
      `--audit-signing-key-file ${path}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
      { cause: error },
    );
  }
  return sshSigner(text, `--audit-signing-key-file ${path}`);
}

/** The Lease annotation that holds the audit trail's tamper anchor (`<branch>@<oid>`). */
export const auditAnchorAnnotation = 'tollgate.io/audit-anchor';

/**
 * The last pushed audit commit is kept on the leader Lease, where the cluster keeps it
 * and a force push to the Git server cannot reach: every push updates it (on the next
 * renewal), and each term start checks the branch still contains it (GitAuditWriter
 * .setAnchor). A rewritten branch is refused with a Warning Event on the Lease
 * (reason AuditHistoryRewritten), besides the log line and the metric.
 */
export function anchorAuditInLease(
  audit: Pick<GitAuditWriter, 'setAnchor'>,
  elector: Pick<LeaderElector, 'annotation' | 'setAnnotation'>,
  lease: { readonly namespace: string; readonly name: string },
  events: Pick<EventRecorder, 'record'> | undefined,
): void {
  audit.setAnchor({
    read: () => elector.annotation(auditAnchorAnnotation),
    write: (value) => elector.setAnnotation(auditAnchorAnnotation, value),
    rewritten: (error) =>
      events?.record(
        {
          ...lease,
          uid: '',
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
        },
        {
          type: 'Warning',
          reason: 'AuditHistoryRewritten',
          action: 'Refuse',
          note: error.message,
        },
      ),
  });
}

/**
 * The final flush's share of `--shutdown-timeout`: the dispatcher may use the whole
 * timeout for in-flight writes, so the audit gets a quarter more (5 s at the default
 * 20 s), which keeps the whole shutdown under the 30 s terminationGracePeriodSeconds of
 * deploy/ and the chart while the Git server is down or hangs.
 */
export function finalFlushBoundMs(shutdownTimeoutMs: number): number {
  return Math.round(shutdownTimeoutMs / 4);
}

export interface CloseAuditOptions {
  /** How long the final flush may take (see finalFlushBoundMs). */
  readonly boundMs: number;
  readonly timers?: Timers;
}

/**
 * A last flush, bounded, then close without flushing again. A flush that fails or does
 * not finish within the bound (a Git server that is down or hangs: the push retries with
 * backoff) leaves the commits queued locally, for the leftover reconciliation at the
 * next term of whichever replica leads; a log line and
 * tollgate_audit_final_flush_abandoned_total say so. The lease is released after this.
 */
export async function closeAudit(
  audit: Pick<GitAuditWriter, 'flush' | 'close' | 'backlog'>,
  log: Logger,
  options: CloseAuditOptions,
): Promise<void> {
  const outcome = await flushWithin(audit, options);
  if (outcome === 'abandoned') {
    auditFinalFlushAbandonedTotal.inc();
    log.warn(
      { boundMs: options.boundMs, backlog: audit.backlog },
      'final audit flush abandoned: not finished within its bound (a quarter of --shutdown-timeout); commits stay queued locally and are pushed at the next term',
    );
  } else if (outcome instanceof Error) {
    log.error({ err: outcome }, 'final audit flush failed; commits stay queued locally');
  }
  await audit.close({ flush: false });
}

/** The flush's outcome, or 'abandoned' once the bound passed first. */
function flushWithin(
  audit: Pick<GitAuditWriter, 'flush'>,
  options: CloseAuditOptions,
): Promise<'flushed' | 'abandoned' | Error> {
  const timers = options.timers ?? systemTimers;
  return new Promise((resolve) => {
    const bound = timers.set(() => resolve('abandoned'), options.boundMs);
    audit.flush().then(
      () => {
        timers.clear(bound);
        resolve('flushed');
      },
      (error: unknown) => {
        timers.clear(bound);
        resolve(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** Backoff of a term's recovery retries (doubling from baseMs up to maxMs). */
export interface RecoveryBackoff {
  readonly baseMs: number;
  readonly maxMs: number;
}

export const defaultRecoveryBackoff: RecoveryBackoff = { baseMs: 1_000, maxMs: 60_000 };

/** A term's recovery: `done` resolves once it succeeded or the term ended. */
export interface TermRecovery {
  readonly done: Promise<void>;
}

export interface RecoverOutcomesOptions {
  auditUrl: string;
  branch: string;
  token: TokenSource | undefined;
  /** The deploy key of an SSH audit repository. */
  ssh?: SshAccess;
  cluster: string;
  audit: AuditSink;
  view: ClusterView;
  policy: Policy;
  log: Logger;
  /**
   * Also reads the reconciled trail before it is closed (the loops' Blocked writes), or
   * takes the carried state the writer keeps since its reconcile read it (`carried`).
   */
  alsoRead?: (source: AuditSource, carried?: Carried) => Promise<void>;
  /** The term: retries stop when it ends (the next leader recovers). */
  signal?: AbortSignal;
  timers?: Timers;
  backoff?: RecoveryBackoff;
}

/**
 * A new term first reconciles the audit clone with the remote, then records the outcomes
 * a crashed predecessor (or this replica before a restart) left open, including intents
 * that reached the remote only through that reconcile's leftover replay: every loop's
 * intents (gate-release and resize) whose write may or may not have happened, decided
 * from the pod's state (src/loops/gate-release-recovery.ts). The first attempt is awaited (the loops start
 * after it); when it fails (the audit remote down or refusing pushes) it is logged, the
 * loops start anyway (every write re-checks state; strict writes stay held while their
 * intents cannot be pushed) and recovery is retried with backoff within the term until
 * it succeeds, `tollgate_audit_recovery_pending` 1 meanwhile. What the term start found
 * unpushed and recovery's outcomes are pushed behind, in bounded pushes: the loops do not
 * wait for them (strict writes do: their intents are pushed after them).
 */
export async function recoverOutcomes(options: RecoverOutcomesOptions): Promise<TermRecovery> {
  options.audit.beginTerm?.();
  if (await recoverOnce(options, 1)) return finished(options);
  auditRecoveryPending.set(1);
  return { done: retryRecovery(options) };
}

function finished(options: RecoverOutcomesOptions): TermRecovery {
  // A term that ended first leaves the tracking to the next term's beginTerm (the same
  // process may lead again before this retry loop returns).
  if (!options.signal?.aborted) options.audit.endTerm?.();
  auditRecoveryPending.set(0);
  return { done: Promise.resolve() };
}

async function retryRecovery(options: RecoverOutcomesOptions): Promise<void> {
  const { baseMs, maxMs } = options.backoff ?? defaultRecoveryBackoff;
  const timers = options.timers ?? systemTimers;
  let delay = baseMs;
  for (let attempt = 2; ; attempt += 1) {
    if (!(await sleep(timers, delay, options.signal))) break;
    if (await recoverOnce(options, attempt)) break;
    delay = Math.min(maxMs, delay * 2);
  }
  finished(options);
}

/** False when the term ended first. */
function sleep(timers: Timers, ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      timers.clear(handle);
      resolve(false);
    };
    const handle = timers.set(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One attempt; true when the open intents were checked and their outcomes recorded. */
async function recoverOnce(options: RecoverOutcomesOptions, attempt: number): Promise<boolean> {
  const started = Date.now();
  try {
    // First the writer's own clone is reconciled with the remote (what an earlier run or
    // term left unpushed is planned against it and rebuilt on its tip), so each open
    // intent is decided exactly once.
    const reconciled = await options.audit.reconcile?.();
    const source =
      reconciled ??
      (await openAuditSource(options.auditUrl, options.branch, {
        ...(options.token === undefined ? {} : { token: options.token }),
        ...(options.ssh === undefined ? {} : { ssh: options.ssh }),
      }));
    // What the reconcile read stands in the writer (kept as commits landed since): the
    // trail is not read again for it.
    const state = reconciled === undefined ? undefined : options.audit.termState?.();
    try {
      const recovered = await recoverOpenIntents({
        ...(state === undefined ? {} : { open: state.open }),
        source,
        cluster: options.cluster,
        view: options.view,
        policy: options.policy,
        audit: options.audit,
        clock: systemClock,
        log: options.log,
        ...(options.signal ? { signal: options.signal } : {}),
      });
      options.log.info(
        {
          recovered: recovered.length,
          attempt,
          ms: Date.now() - started,
          // Whether the open intents came from a read of the trail or from the writer.
          read: state === undefined ? 'trail' : 'writer',
        },
        'audit: open intents checked at the start of the term',
      );
      await options.alsoRead?.(source, state?.carried);
      return true;
    } finally {
      source.close();
    }
  } catch (error) {
    options.log.warn(
      { err: error, attempt },
      'audit recovery failed; open intents stay without outcome until it succeeds (retried with backoff within the term)',
    );
    return false;
  }
}
