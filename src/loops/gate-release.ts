/**
 * The gate-release loop: the thin I/O edge around the pure `planReleases`.
 *
 *   view change -> (debounced) pass -> planReleases -> stale-guard filter
 *   -> audit intents (strict: committed and pushed before any write)
 *   -> dispatcher (removeGate / delete / annotate, each asserting the resourceVersion
 *      decided on) -> outcomes recorded, events, metrics
 *
 * Restart safety: nothing the loop remembers is needed for safety. Released pods are
 * those without tollgate's gate, so a restarted loop recomputes budget use and in-flight
 * counts from the cluster; a gate removal is a JSON patch that tests the gate at its index
 * and the resourceVersion, so a duplicate removal fails instead of releasing twice.
 *
 * Failure modes named: the strict audit push fails -> no write of that pass is sent and
 * the pods are decided again later; the queue is full -> the pass waits for room
 * (backpressure); a write conflicts (409 or failed patch test) -> the pod is decided
 * again from the view once it has moved past the conflicted resourceVersion; the view
 * has not seen tollgate's own last write to a pod -> SkipStale, requeued.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { AuditUnavailableError, type AuditSink } from '../audit/types.ts';
import type { ClusterView, ObjectKey, ViewChange } from '../cluster/types.ts';
import {
  checkLive,
  type Freshness,
  type LiveCheck,
  type LiveDecision,
} from '../cluster/stale-guard.ts';
import type { Decision, Outcome } from '../decide/decision.ts';
import { ownedGate } from '../decide/gates.ts';
import { timestampMs } from '../decide/objects.ts';
import {
  emptyPlanState,
  planReleases,
  type Plan,
  type PlannedWrite,
  type PlanState,
} from '../decide/release-plan.ts';
import { releaseWriteBand } from '../dispatch/bands.ts';
import type { Dispatcher, WriteRequest, WriteResult } from '../dispatch/types.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { systemTimers, type Timers } from '../lib/timers.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import type { DecisionKindName, Policy } from '../policy/model.ts';
import { afterFinalFailure, type BlockedWrite } from '../decide/release-blocked.ts';
import type { GangReleases } from '../decide/release-gang-memory.ts';
import { changeNeedsNoPass, changeNeedsPassSoon, quietChangeMs } from '../decide/release-wake.ts';
import { retargetOnLive } from '../decide/stale-live.ts';
import type { ReleasedConditionSink } from './released-condition.ts';
import { checkedPassShare, defaultPassShare, earliestPassAt } from './pass-pacing.ts';
import {
  blockedWritesTotal,
  budgetChargeChangesTotal,
  expiredTotal,
  gateDwellSeconds,
  holdChangesTotal,
  holdReasonLabel,
  passSeconds,
  precreateGateReleaseSeries,
  publishSummary,
  releasesTotal,
  type ReleaseResult,
} from './gate-release-metrics.ts';

/** The stale-guard as this loop uses it (src/cluster/stale-guard.ts implements it). */
export interface GateReleaseStaleGuard {
  /** False while the view has not yet seen tollgate's own last write to the pod. */
  isFresh(key: ObjectKey, pod: V1Pod): boolean;
  /**
   * The per-key answer behind `isFresh`: inside its backoff a key waits (nothing
   * recorded again); after N consecutive skips one live read decides. Absent = `isFresh`.
   */
  check?(key: ObjectKey, cachedResourceVersion: string | undefined): Freshness;
  /** The live read asked for by `decideLive` found this resourceVersion (undefined: gone). */
  liveDecided?(key: ObjectKey, liveResourceVersion: string | undefined): void;
  recordWrite(key: ObjectKey, resourceVersion: string): void;
  /**
   * Before a destructive write: act on the cache, take a live read first, or hold.
   * Without it every destructive write takes the live read.
   */
  requireLive?(
    key: ObjectKey,
    kind: DecisionKindName,
    cacheLagMs: number | undefined,
  ): LiveDecision;
}

/** A Kubernetes Event on a pod (src/cluster/events.ts implements it). */
export type GateReleaseEventSink = (
  pod: V1Pod,
  event: { type: 'Normal' | 'Warning'; reason: string; action: string; message: string },
) => void | Promise<void>;

export interface GateReleaseDeps {
  readonly view: ClusterView;
  readonly dispatcher: Dispatcher;
  readonly audit: AuditSink;
  /** The policy in force; a new snapshot takes effect on the next pass. Undefined = no valid policy yet. */
  policy(): Policy | undefined;
  readonly staleGuard?: GateReleaseStaleGuard;
  readonly events?: GateReleaseEventSink;
  /** Keeps the pods' tollgate.io/Released condition current (loops/released-condition.ts). */
  readonly releasedCondition?: ReleasedConditionSink;
  readonly clock?: Clock;
  /** The timers passes are scheduled with (default: setTimeout); tests drive them by hand. */
  readonly timers?: Timers;
  readonly log?: Logger;
  /** A live GET, taken before a destructive write (Cancel deletes the pod) when the stale-guard asks for it. */
  readonly readPod?: (namespace: string, name: string) => Promise<V1Pod | undefined>;
  /**
   * A pass's first this many intents are recorded alone (strict: pushed), each later part
   * twice the one before, each part's writes sent while the next part's intents are
   * pushed (`intentParts`). Default 500.
   */
  readonly intentBatch?: number;
  /**
   * At most this many of the loop's writes wait in the dispatcher at once; the others
   * wait here, in plan order, each woken alone. Default 500.
   */
  readonly maxQueuedWrites?: number;
  /** The view's measured lag behind the API server (LiveClusterView.cacheLag); undefined = unknown. */
  readonly cacheLagMs?: () => number | undefined;
  /**
   * How long after a change a pass runs (counted from the first change not yet served),
   * so one burst of watch events is one pass. Default 20 ms: the pass share (below), not
   * this, keeps passes from crowding the process out; at 100 ms it was most of a
   * release's own latency at 1,000 pods (docs/BENCHMARKS.md).
   */
  readonly debounceMs?: number;
  /**
   * The share of the event loop passes may take (default `defaultPassShare`, a half):
   * after a pass that took P ms, the next starts no sooner than P * (1 / share - 1) ms
   * after it ended. Passes back to back (a share of 1) left the audit writer's Git push
   * (in this process) waiting seconds behind them, and every strict release waits for
   * that push.
   */
  readonly passShare?: number;
  /** How long a write stays useful in the queue. Default 60 s. */
  readonly writeDeadlineMs?: number;
  /** Hysteresis: how long a raised budget takes to open fully. Default 10 s. */
  readonly budgetRampMs?: number;
  /** Start passes on view changes and timers (default true); false = only explicit `pass()`. */
  readonly autoStart?: boolean;
  /** Blocked writes carried over from the audit trail (gate-release-blocked.ts): the starting state. */
  readonly blocked?: Readonly<Record<string, BlockedWrite>>;
  /** Gang releases decided in earlier terms (gate-release-blocked.ts): the starting memory. */
  readonly gangReleases?: GangReleases;
  /** Marks each pass's start and end, so /healthz fails when a pass is wedged. */
  readonly watchdog?: { begin(loop: string): () => void };
  /**
   * The longest a pass waits for the view to sync (pods, nodes, quotas) before giving up
   * and trying again later. Default 30 s. Stopping the loop ends the wait at once.
   */
  readonly syncWaitMs?: number;
}

export interface PassReport {
  readonly decisions: readonly Decision[];
  /** Writes decided; each is sent once the intents of its pass are recorded. */
  readonly sent: number;
  readonly skipped: ReadonlyMap<ObjectKey, string>;
  /** When the soonest key skipped as stale is due again (its own backoff); undefined = none. */
  readonly staleRetryAfterMs?: number;
  /** Resolves when every write of this pass has ended and its outcome is recorded. */
  readonly settled: Promise<void>;
}

export interface GateReleaseLoop {
  /** One pass now (after any pass in progress). */
  pass(): Promise<PassReport>;
  stop(): Promise<void>;
  /** Outcomes not yet settled (writes in flight). */
  readonly inFlight: number;
}

const defaultDebounceMs = 20;
/** A pass refused by a strict audit push waiting for its retry runs this long after it. */
const retryMarginMs = 100;

const uidOf = (s: { write: PlannedWrite }): string => s.write.target.uid;

function withoutActing(state: PlanState, uids: readonly string[]): PlanState {
  if (!uids.some((uid) => state.acting.has(uid))) return state;
  // One copy for all: a copy per pod made dropping 10,000 pods quadratic (tens of seconds).
  const acting = new Map(state.acting);
  for (const uid of uids) acting.delete(uid);
  return { ...state, acting };
}

export function startGateReleaseLoop(deps: GateReleaseDeps): GateReleaseLoop {
  const loop = new GateReleaseRunner(deps);
  return {
    pass: () => loop.pass(),
    stop: () => loop.stop(),
    get inFlight() {
      return loop.inFlight;
    },
  };
}

/** A write of this pass that passed the guard, with the pod as the view had it. */
interface Sending {
  readonly decision: Decision;
  readonly write: PlannedWrite;
  readonly pod: V1Pod | undefined;
  /** The cache stayed behind for N skips: one live read decides (`retargetOnLive`). */
  readonly decideLive?: boolean;
}

const nothingDone: PassReport = {
  decisions: [],
  sent: 0,
  skipped: new Map(),
  settled: Promise.resolve(),
};

/**
 * One loop: a pass is observe (the policy and the view), decide (`planReleases`), guard
 * (`guardWrites`), record what needs no write (`recordsWithoutWrites`), then, beside the
 * next passes, record intents and send (`carryOut`), and settle each outcome (`settle`).
 * The pass scheduling (debounce, share of the event loop) is `schedule` / `runPass`.
 */
class GateReleaseRunner {
  readonly #deps: GateReleaseDeps;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #debounceMs: number;
  readonly #passShare: number;
  readonly #intentBatch: number;
  readonly #deadlineMs: number;
  readonly #autoStart: boolean;
  readonly #unsubscribe: () => void;
  /** Slots for writes in the dispatcher (see `WriteSlots`). */
  readonly #slots: WriteSlots;

  #state: PlanState = emptyPlanState;
  #stopped = false;
  /** Aborted by stop(): ends a pass's wait for the view. */
  readonly #stopping = new AbortController();
  #running: Promise<PassReport> | undefined;
  /**
   * True from a pass's start to its end. Set before `#onePass` is called: its synchronous
   * part (the whole decide step) runs before `#running` is assigned.
   */
  #passing = false;
  /** Strict intents are being refused while a failed audit push waits for its retry. */
  #auditRefusing = false;
  readonly #timers: Timers;
  #timer: unknown;
  #timerAt = Number.POSITIVE_INFINITY;
  /**
   * The soonest time a pass was asked for while one ran: the end of that pass arms the
   * timer, with the spacing that pass earned (a timer armed during it would use the one
   * before).
   */
  #wantedAt = Number.POSITIVE_INFINITY;
  /** When the last pass ended and how long its work took (waiting for the view excluded). */
  #lastPassEnd = Number.NEGATIVE_INFINITY;
  #lastPassMs = 0;
  #passStartedAt: number | undefined;
  /** The first view change not yet seen by a pass: how long a change waited, logged per pass. */
  #changedSince: number | undefined;
  /** The waiting, logged with the pass that ends it (see `#logPacing`). */
  #pacing: { waitedMs?: number; lateMs?: number; decideMs?: number; writes?: number } = {};
  readonly #dirty = new Set<ObjectKey>();
  /** key -> the resourceVersion a write conflicted on: decided again only once the view has moved past it. */
  readonly #conflicted = new Map<ObjectKey, { resourceVersion: string; at: number }>();
  readonly #pending = new Set<Promise<void>>();
  #lastCommit: string | undefined;
  /** Pods the last pass held (release-wake.ts): until a pass has run, as if some were. */
  #heldByLastPass = Number.POSITIVE_INFINITY;

  constructor(deps: GateReleaseDeps) {
    this.#deps = deps;
    if (deps.blocked) this.#state = { ...this.#state, blocked: deps.blocked };
    if (deps.gangReleases) this.#state = { ...this.#state, gangReleases: deps.gangReleases };
    this.#clock = deps.clock ?? systemClock;
    this.#timers = deps.timers ?? systemTimers;
    this.#log = deps.log ?? silentLogger;
    this.#debounceMs = deps.debounceMs ?? defaultDebounceMs;
    this.#passShare = checkedPassShare(
      deps.passShare ?? defaultPassShare,
      'gate-release: passShare',
    );
    this.#intentBatch = Math.max(1, deps.intentBatch ?? 500);
    this.#slots = new WriteSlots(deps.maxQueuedWrites ?? 500);
    this.#deadlineMs = deps.writeDeadlineMs ?? 60_000;
    this.#autoStart = deps.autoStart ?? true;
    this.#unsubscribe = deps.view.onChange((change: ViewChange) => {
      if (changeNeedsNoPass(change)) return;
      if (change.resource === 'pods') this.#dirty.add(change.key);
      this.#changedSince ??= this.#clock.now();
      this.#schedule(
        changeNeedsPassSoon(change, this.#heldByLastPass) ? this.#debounceMs : quietChangeMs,
      );
    });
    if (this.#autoStart) this.#schedule(0);
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  async pass(): Promise<PassReport> {
    while (this.#running) await this.#running.catch(() => undefined);
    return this.#runPass();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopping.abort(new Error('gate-release loop stopping'));
    this.#unsubscribe();
    if (this.#timer !== undefined) this.#timers.clear(this.#timer);
    await this.#running?.catch(() => undefined);
    await Promise.allSettled([...this.#pending]);
  }

  /**
   * A pass at least `wantedMs` from now, and no sooner than the pass share allows after
   * the last one (`earliestPassAt`). An earlier timer already set wins. Asked while a pass
   * runs, the wish is kept and that pass's end arms the timer: the spacing is then the
   * one the running pass earned, and the wait counts from when the wish was made, not
   * from the pass's end.
   */
  #schedule(wantedMs: number): void {
    if (this.#stopped || !this.#autoStart) return;
    const wantedAt = this.#clock.now() + Math.max(0, wantedMs);
    if (this.#passing) {
      this.#wantedAt = Math.min(this.#wantedAt, wantedAt);
      return;
    }
    this.#arm(Math.max(wantedAt, this.#earliestPassAt()));
  }

  #earliestPassAt(): number {
    return earliestPassAt(this.#lastPassEnd, this.#lastPassMs, this.#passShare);
  }

  #arm(at: number): void {
    if (this.#timer !== undefined && at >= this.#timerAt) return;
    if (this.#timer !== undefined) this.#timers.clear(this.#timer);
    this.#timerAt = at;
    this.#timer = this.#timers.set(() => this.#onTimer(at), Math.max(0, at - this.#clock.now()));
  }

  /**
   * The timer is due. A pass that ran since it was armed (one asked with `pass()`, say a
   * new policy) earned its own spacing: the timer moves to it rather than run early.
   */
  #onTimer(armedFor: number): void {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    if (this.#stopped) return;
    const now = this.#clock.now();
    if (this.#passing) {
      this.#wantedAt = Math.min(this.#wantedAt, now);
      return;
    }
    const earliest = this.#earliestPassAt();
    if (now < earliest) {
      this.#arm(earliest);
      return;
    }
    this.#pacing.lateMs = Math.max(0, now - armedFor);
    void this.#runPass().catch((error: unknown) =>
      this.#log.error({ err: error }, 'gate-release pass failed'),
    );
  }

  /** One pass at a time: a pass asked for while one runs is run once after it. */
  async #runPass(): Promise<PassReport> {
    if (this.#running) {
      this.#wantedAt = Math.min(this.#wantedAt, this.#clock.now());
      return this.#running;
    }
    this.#passStartedAt = undefined;
    const ended = this.#deps.watchdog?.begin('gate-release');
    this.#passing = true;
    this.#running = this.#onePass();
    try {
      return await this.#running;
    } finally {
      ended?.();
      const now = this.#clock.now();
      this.#lastPassMs =
        this.#passStartedAt === undefined ? 0 : Math.max(0, now - this.#passStartedAt);
      this.#lastPassEnd = now;
      this.#running = undefined;
      this.#passing = false;
      this.#logPacing();
      const wantedAt = this.#wantedAt;
      this.#wantedAt = Number.POSITIVE_INFINITY;
      if (wantedAt !== Number.POSITIVE_INFINITY && !this.#stopped && this.#autoStart)
        this.#arm(Math.max(wantedAt, this.#earliestPassAt()));
    }
  }

  /**
   * Where a pass's latency went, at debug (the latency bench reads it): how long the
   * first change it serves waited for it, how late its timer fired, its decide step, and
   * the whole pass as the share counts it.
   */
  #logPacing(): void {
    const pacing = this.#pacing;
    this.#pacing = {};
    if (this.#passStartedAt === undefined) return;
    this.#log.debug(
      {
        ...pacing,
        passMs: this.#lastPassMs,
        nextSpacingMs: Math.round(this.#earliestPassAt() - this.#lastPassEnd),
      },
      'gate-release pass pacing',
    );
  }

  /**
   * Waits, bounded, for the view to sync. False when it did not (the wait timed out: a
   * pass is tried again later; or the loop stops): no pass ever waits without end, so
   * stop() always completes and a view that cannot sync shows as a failing pass, not a
   * silent hang.
   */
  async #viewSynced(): Promise<boolean> {
    const waitMs = this.#deps.syncWaitMs ?? 30_000;
    try {
      await this.#deps.view.whenSynced(
        AbortSignal.any([this.#stopping.signal, AbortSignal.timeout(waitMs)]),
      );
      return true;
    } catch (error) {
      if (this.#stopped) return false;
      this.#log.warn(
        { err: error, waitedMs: waitMs },
        'cluster view not synced; pass retried later',
      );
      this.#schedule(this.#debounceMs);
      return false;
    }
  }

  async #onePass(): Promise<PassReport> {
    // Observe: the policy in force and a synced view.
    const policy = this.#deps.policy();
    if (!policy || this.#stopped) return nothingDone;
    if (!this.#deps.view.synced && !(await this.#viewSynced())) return nothingDone;
    const now = this.#clock.now();
    this.#passStartedAt = now;
    if (this.#changedSince !== undefined) this.#pacing.waitedMs = now - this.#changedSince;
    this.#changedSince = undefined;
    this.#notePolicy(policy);
    this.#dirty.clear();
    const startedAt = performance.now();
    // Decide.
    const plan: Plan = planReleases(policy, this.#deps.view, this.#state, now, {
      ...(this.#deps.budgetRampMs !== undefined ? { budgetRampMs: this.#deps.budgetRampMs } : {}),
    });
    publishSummary(policy, plan.summary);
    this.#heldByLastPass = plan.held;
    // Guard.
    const guarded = guardWrites(plan, {
      view: this.#deps.view,
      staleGuard: this.#deps.staleGuard,
      conflicted: this.#conflicted,
      now,
      conflictWaitMs: policy.staleness.requeue.maxMs,
      requeueBaseMs: policy.staleness.requeue.baseMs,
    });
    for (const key of guarded.conflictsPassed) this.#conflicted.delete(key);
    for (const s of guarded.skips) {
      if (s.write.op.type === 'removeGate')
        releasesTotal.inc({ tenant: s.write.tenant, result: 'stale' });
    }
    this.#state = withoutActing(
      plan.nextState,
      guarded.held.map((w) => w.target.uid),
    );
    if (guarded.retryAfterMs !== undefined) this.#schedule(guarded.retryAfterMs);
    if (plan.requeueAfterMs !== undefined) this.#schedule(plan.requeueAfterMs);
    // Record what needs no write: holds, expiries, stale skips.
    this.#emitPassEvents(policy, plan);
    const records = recordsWithoutWrites(plan, guarded);
    if (records.length > 0) this.#deps.audit.record(records);
    const { toSend, skipped } = guarded;
    const staleRetry =
      guarded.staleRetryAfterMs === undefined
        ? {}
        : { staleRetryAfterMs: guarded.staleRetryAfterMs };
    const decideMs = performance.now() - startedAt;
    passSeconds.observe(decideMs / 1000);
    this.#pacing.decideMs = Math.round(decideMs);
    this.#pacing.writes = toSend.length;
    if (toSend.length === 0)
      return {
        decisions: plan.decisions,
        sent: 0,
        skipped,
        ...staleRetry,
        settled: Promise.resolve(),
      };
    // Record intents, send, settle: beside the next passes.
    const planMs = Math.round(performance.now() - startedAt);
    const settled = this.#carryOut(intentParts(toSend, this.#intentBatch), {
      policy,
      decisions: plan.decisions.length,
      skipped: skipped.size,
      planMs,
    });
    this.#pending.add(settled);
    void settled.finally(() => this.#pending.delete(settled));
    return { decisions: plan.decisions, sent: toSend.length, skipped, ...staleRetry, settled };
  }

  #notePolicy(policy: Policy): void {
    if (policy.commit === this.#lastCommit) return;
    precreateGateReleaseSeries(policy);
    this.#lastCommit = policy.commit;
    this.#log.info({ commit: policy.commit }, 'gate-release: policy in force');
  }

  /**
   * Expiries (counted, a Warning Event), every change of hold reason (counted, a
   * Normal Event, the pod's tollgate.io/Released condition), and each released pod that
   * stops being charged because its node is not Ready (a Normal Event, once).
   */
  #emitPassEvents(policy: Policy, plan: Plan): void {
    this.#emitFreedByNode(plan);
    this.#emitChargeChanges(plan);
    for (const change of plan.holdChanges) {
      holdChangesTotal.inc({ tenant: change.tenant, reason: holdReasonLabel(change.reasonKey) });
      const pod = this.#deps.view.pod(change.target.namespace, change.target.name);
      this.#emit(pod, 'Normal', 'GateHeld', 'Hold', change.reason);
      if (pod) this.#deps.releasedCondition?.held(pod, change.reasonKey, change.reason);
    }
    for (const d of plan.decisions) {
      if (d.kind === 'Expire') {
        const action = policy.gatePolicies.find(
          (g) => g.name === d.policy.name && g.tenant === d.tenant,
        )?.expiry?.action;
        if (action) expiredTotal.inc({ action });
        const pod = this.#deps.view.pod(d.target.namespace, d.target.name);
        this.#emit(pod, 'Warning', 'GateExpired', 'Expire', d.reason);
      }
    }
  }

  /**
   * Strict audit: the intents are pushed before any write is sent. The push runs beside
   * the next passes, which see these pods as acting (released, charged to the budget),
   * so a slow push costs latency, not throughput: the audit writer folds the intents of
   * passes that arrive meanwhile into its next commit. A part whose intents are not
   * recorded is not sent, nor is any part after it; stopping sends nothing more.
   */
  async #carryOut(
    parts: readonly (readonly Sending[])[],
    pass: { policy: Policy; decisions: number; skipped: number; planMs: number },
  ): Promise<void> {
    const sending: Promise<void>[] = [];
    for (const [index, part] of parts.entries()) {
      if (index > 0 && this.#stopped) {
        // Stopping: the rest gets no intent and no write; the next term decides it again.
        this.#dropActing(parts.slice(index).flat());
        break;
      }
      const before = performance.now();
      if (!(await this.#recordIntents(parts.slice(index).flat(), part, pass.policy))) break;
      this.#log.info(
        {
          writes: part.length,
          ...(parts.length > 1 ? { part: `${index + 1}/${parts.length}` } : {}),
          decisions: pass.decisions,
          skipped: pass.skipped,
          planMs: pass.planMs,
          intentsMs: Math.round(performance.now() - before),
          queue: this.#deps.dispatcher.depth,
        },
        'gate-release pass',
      );
      if (this.#stopped) {
        this.#cancelUnsent(part);
        continue;
      }
      for (const s of part) sending.push(this.#sendInTurn(s));
    }
    await Promise.all(sending);
  }

  /**
   * Records the part's intents; false when that failed: no record, no write, and every
   * pod of this part and the ones after it (`unsent`) is decided again later.
   */
  async #recordIntents(
    unsent: readonly Sending[],
    part: readonly Sending[],
    policy: Policy,
  ): Promise<boolean> {
    try {
      await this.#deps.audit.recordIntents(part.map((s) => s.decision));
      this.#auditRecovered();
      return true;
    } catch (error) {
      this.#logUnrecorded(error, unsent.length);
      this.#dropActing(unsent);
      for (const s of unsent) {
        if (s.write.op.type === 'removeGate')
          releasesTotal.inc({ tenant: s.write.tenant, result: 'unrecorded' });
      }
      this.#schedule(
        error instanceof AuditUnavailableError
          ? Math.max(0, error.retryAt - this.#clock.now()) + retryMarginMs
          : policy.staleness.requeue.maxMs,
      );
      return false;
    }
  }

  /**
   * A strict push waiting for its retry refuses every pass's intents at once (a pass per
   * event during a Git outage): said once at warn, then at debug, and once more when
   * intents are recorded again. Any other failure is an error each time.
   */
  #logUnrecorded(error: unknown, writes: number): void {
    if (!(error instanceof AuditUnavailableError)) {
      this.#log.error({ err: error, writes }, 'audit intents not recorded; no write sent');
      return;
    }
    const message =
      'releases wait: the audit push is failing (strict mode), no intent recorded and no write sent until a push lands';
    if (this.#auditRefusing) this.#log.debug({ err: error.message, writes }, message);
    else this.#log.warn({ err: error.message, writes }, message);
    this.#auditRefusing = true;
  }

  #auditRecovered(): void {
    if (!this.#auditRefusing) return;
    this.#auditRefusing = false;
    this.#log.info('audit intents recorded again: releases resume');
  }

  /**
   * Stopped while these intents were pushed: one outcome record for all of them. One by
   * one (a log line, an audit record and a wake-up each) 10,000 of them held the event
   * loop for tens of seconds on a busy machine, past the renew deadline.
   */
  #cancelUnsent(part: readonly Sending[]): void {
    const message = 'gate-release loop stopped before the write was queued';
    this.#deps.audit.record(
      part.map((s) => ({ ...s.decision, outcome: { result: 'cancelled', message } })),
    );
    this.#dropActing(part);
    for (const s of part) {
      if (s.write.op.type === 'removeGate')
        releasesTotal.inc({ tenant: s.write.tenant, result: 'cancelled' });
    }
    this.#log.info({ writes: part.length }, `gate-release writes cancelled: ${message}`);
  }

  #dropActing(sendings: readonly Sending[]): void {
    this.#state = withoutActing(this.#state, sendings.map(uidOf));
  }

  /** Waits for a slot, sends, and settles whatever happens (an error is a failed write). */
  async #sendInTurn(sending: Sending): Promise<void> {
    const waiting = this.#slots.acquire();
    if (waiting) await waiting;
    try {
      if (this.#stopped) {
        this.#settle(sending, {
          result: 'cancelled',
          message: 'gate-release loop stopped before the write was queued',
        });
        return;
      }
      await this.#send(sending);
    } catch (error) {
      this.#settle(sending, {
        result: 'failed',
        message: error instanceof Error ? error.message : String(error),
      });
    } finally {
      this.#slots.release();
    }
  }

  /** The live-read judgment (cluster/stale-guard.ts `checkLive`), then the dispatcher. */
  async #send(decided: Sending): Promise<void> {
    const sending = decided.decideLive ? await this.#decideOnLive(decided) : decided;
    if (sending === undefined) return;
    const { write } = sending;
    // No await unless a live read is taken: the writes of a pass reach the dispatcher in
    // plan order within the turn that sends them.
    let cancelled = this.#liveReadCancels(sending);
    if (cancelled instanceof Promise) cancelled = await cancelled;
    if (cancelled !== undefined) {
      this.#settle(sending, { result: 'cancelled', message: cancelled });
      return;
    }
    const request: WriteRequest = {
      key: write.key,
      target: write.target,
      op: write.op,
      priority: write.priority,
      band: releaseWriteBand(write),
      tenant: write.tenant,
      deadline: this.#clock.now() + this.#deadlineMs,
      decisionId: write.decisionId,
      ...(write.unit === undefined ? {} : { unit: write.unit }),
    };
    for (;;) {
      const enqueued = this.#deps.dispatcher.enqueue(request);
      if (enqueued.accepted) {
        this.#settle(sending, await enqueued.done);
        return;
      }
      if (enqueued.reason === 'closed' || this.#stopped) {
        this.#settle(sending, { result: 'cancelled', message: 'dispatcher closed' });
        return;
      }
      await this.#deps.dispatcher.whenNotFull(undefined, request.band);
    }
  }

  /**
   * The cache stayed behind tollgate's write to this pod for N skips: one live read (the
   * bounded reader) decides. The write goes on against the live pod, or is cancelled
   * with the reason (gone, gate already removed, read refused: the key keeps waiting).
   */
  async #decideOnLive(sending: Sending): Promise<Sending | undefined> {
    const { write } = sending;
    const guard = this.#deps.staleGuard;
    const readPod = this.#deps.readPod;
    const cancel = (message: string): undefined => {
      this.#settle(sending, { result: 'cancelled', message });
      return undefined;
    };
    if (!readPod) return cancel('the cache stayed behind and no live read can be taken');
    let live: V1Pod | undefined;
    try {
      live = await readPod(write.target.namespace, write.target.name);
    } catch (error) {
      return cancel(`live read refused: ${error instanceof Error ? error.message : String(error)}`);
    }
    const sameUid = live?.metadata?.uid === write.target.uid;
    guard?.liveDecided?.(write.key, sameUid ? live?.metadata?.resourceVersion : undefined);
    const policy = this.#deps.policy();
    const judged = retargetOnLive(write, live, (pod) => !!policy && !!ownedGate(pod, policy));
    if (judged.action === 'cancel') return cancel(judged.reason);
    this.#log.info({ pod: write.key }, 'cache stayed behind; decided on a live read');
    return { ...sending, write: judged.write, pod: live, decideLive: false };
  }

  /**
   * The StalenessPolicy says which kinds are destructive (by default Cancel, which
   * deletes the pod, and a Release forced by expiry); the guard answers proceed for the
   * others. Without a guard only a delete takes the live read. Returns why the write is
   * cancelled, or undefined to send it. Synchronous unless a live read is taken.
   */
  #liveReadCancels(sending: Sending): string | undefined | Promise<string | undefined> {
    const { decision, write } = sending;
    const kind = guardKindOf(write);
    if (kind === undefined) return undefined;
    const readPod = this.#deps.readPod;
    const check = checkLive<V1Pod>({
      guard: this.#deps.staleGuard,
      key: write.key,
      kind,
      cacheLagMs: this.#deps.cacheLagMs?.(),
      ...(write.op.type === 'delete'
        ? {
            unguarded: {
              action: 'liveRead',
              reason: `${decision.kind}: no stale-guard to judge the cache`,
            },
          }
        : {}),
      decided: write.target,
      ...(readPod ? { readLive: () => readPod(write.target.namespace, write.target.name) } : {}),
    });
    return check instanceof Promise
      ? check.then((checked) => this.#cancelReason(sending, checked))
      : this.#cancelReason(sending, check);
  }

  #cancelReason(sending: Sending, check: LiveCheck<V1Pod>): string | undefined {
    if (check.action === 'hold') return check.reason;
    if (check.action === 'proceed' && check.basis === 'cache') {
      this.#log.debug(
        { pod: sending.write.key, kind: sending.decision.kind },
        'destructive write from the cache: lag within bounds',
      );
      return undefined;
    }
    if (check.action === 'proceed' && check.basis === 'unchecked') return undefined;
    // A live read was taken: the pod must still be the one decided on, still gated by us.
    const policy = this.#deps.policy();
    if (
      check.action === 'proceed' &&
      check.basis === 'live' &&
      policy &&
      ownedGate(check.live, policy)
    )
      return undefined;
    return 'live read: the pod changed since the decision';
  }

  /** Settle the outcome: record it, count it, tell the guard and the pod. */
  #settle(sending: Sending, result: WriteResult): void {
    const { decision, write } = sending;
    const outcome: Outcome = result;
    this.#deps.audit.record([{ ...decision, outcome }]);
    const key = write.key;
    if (write.op.type === 'removeGate')
      releasesTotal.inc({ tenant: write.tenant, result: result.result satisfies ReleaseResult });
    if (result.result === 'succeeded') {
      this.#deps.staleGuard?.recordWrite(key, result.resourceVersion);
      this.#emitSucceeded(sending);
      return;
    }
    // Anything but success: the pod is decided again from the cluster, not from memory.
    this.#state = withoutActing(this.#state, [write.target.uid]);
    if (result.result === 'failed') this.#backOff(sending, result);
    if (result.result === 'conflict')
      this.#conflicted.set(key, {
        resourceVersion: write.target.resourceVersion,
        at: this.#clock.now(),
      });
    this.#log.info({ pod: key, kind: decision.kind, result }, 'gate-release write did not succeed');
    this.#schedule(this.#debounceMs);
  }

  /**
   * A final failure (403, 404, 422): the pod is not decided again before its backoff ends;
   * after `maxFinalFailures` it is Blocked, recorded with the API's reason, until the pod
   * or the policy changes.
   */
  #backOff(sending: Sending, result: Extract<WriteResult, { result: 'failed' }>): void {
    const { decision, write, pod } = sending;
    const uid = write.target.uid;
    const now = this.#clock.now();
    const previous = this.#state.blocked?.[uid];
    const entry = afterFinalFailure(
      previous,
      {
        resourceVersion: write.target.resourceVersion,
        commit: decision.policy.commit,
        ...(result.code !== undefined ? { code: result.code } : {}),
        message: result.message,
      },
      now,
    );
    this.#state = { ...this.#state, blocked: { ...this.#state.blocked, [uid]: entry } };
    if (!entry.blocked) {
      this.#schedule(entry.until - now);
      return;
    }
    const reason = `${decision.kind} failed ${entry.attempts} times (${result.code ?? 'no HTTP code'}: ${result.message}); blocked until the pod or the policy changes`;
    this.#deps.audit.record([
      {
        ...decision,
        id: `gate-release:Blocked:${uid}:${write.target.resourceVersion}:${now}`,
        at: now,
        kind: 'Blocked',
        reason,
        outcome: { result: 'recorded' },
      },
    ]);
    blockedWritesTotal.inc({ tenant: write.tenant, code: String(result.code ?? 'none') });
    this.#emit(pod, 'Warning', 'GateBlocked', 'Block', reason);
  }

  #emitSucceeded({ decision, write, pod }: Sending): void {
    if (write.op.type === 'removeGate') {
      const created = timestampMs(pod?.metadata?.creationTimestamp);
      if (created !== undefined)
        gateDwellSeconds.observe(
          { tenant: write.tenant },
          Math.max(0, this.#clock.now() - created) / 1000,
        );
      const message = `removed gate ${write.op.gate}: ${decision.reason}`;
      this.#emit(pod, 'Normal', 'GateReleased', 'Release', message);
      if (pod) this.#deps.releasedCondition?.released(pod, message);
    } else if (write.op.type === 'annotate') {
      const message = `awaiting a human decision: ${decision.reason}`;
      this.#emit(pod, 'Warning', 'GateReview', 'Review', message);
    } else if (write.op.type === 'delete') {
      this.#emit(pod, 'Warning', 'GateCancelled', 'Delete', decision.reason);
    }
  }

  /** A `BudgetFreed` Event on each pod newly not charged because its node is not Ready. */
  #emitFreedByNode(plan: Plan): void {
    for (const freed of plan.newlyFreed) {
      if (freed.reason !== 'nodeNotReady') continue;
      const { namespace = '', name = '' } = freed.pod.metadata ?? {};
      const pod = this.#deps.view.pod(namespace, name);
      this.#emit(pod, 'Normal', 'BudgetFreed', 'Uncharge', freed.message);
    }
  }

  /**
   * Each Uncharge and Recharge record counted; a `BudgetCharged` Event on each pod charged
   * again, a Warning when that puts its tenant above its limit.
   */
  #emitChargeChanges(plan: Plan): void {
    for (const d of plan.decisions) {
      if (d.kind !== 'Uncharge' && d.kind !== 'Recharge') continue;
      budgetChargeChangesTotal.inc({ tenant: d.tenant ?? '', change: d.kind });
      if (d.kind !== 'Recharge') continue;
      const pod = this.#deps.view.pod(d.target.namespace, d.target.name);
      const over = d.inputs.some((i) => i.condition === 'Budget' && !i.met);
      this.#emit(pod, over ? 'Warning' : 'Normal', 'BudgetCharged', 'Charge', d.reason);
    }
  }

  #emit(
    pod: V1Pod | undefined,
    type: 'Normal' | 'Warning',
    reason: string,
    action: string,
    message: string,
  ): void {
    if (!this.#deps.events || !pod) return;
    Promise.resolve(
      this.#deps.events(pod, { type, reason, action, message: message.slice(0, 1000) }),
    ).catch((error: unknown) =>
      this.#log.warn({ err: error, pod: pod.metadata?.name }, 'could not record event'),
    );
  }
}

/** The stale-guard's name for a write: Cancel, Release or ExpireRelease; undefined = not judged. */
export function guardKindOf(write: PlannedWrite): DecisionKindName | undefined {
  if (write.op.type === 'delete') return 'Cancel';
  if (write.op.type === 'removeGate') return write.expiryForced ? 'ExpireRelease' : 'Release';
  return undefined;
}

export interface GuardedWrites {
  readonly toSend: readonly Sending[];
  /** key -> why its write was skipped this pass. */
  readonly skipped: Map<ObjectKey, string>;
  /** Skips to record (a key waiting inside its backoff is not recorded again). */
  readonly skips: readonly { readonly write: PlannedWrite; readonly record: Decision }[];
  /** Every write held back this pass, recorded or not. */
  readonly held: readonly PlannedWrite[];
  /** Keys whose earlier conflict the view has moved past. */
  readonly conflictsPassed: readonly ObjectKey[];
  /** When the soonest held key is due again; undefined = none held. */
  readonly retryAfterMs: number | undefined;
  /** The same, of the keys held as stale only. */
  readonly staleRetryAfterMs: number | undefined;
}

/** The guard's per-key answer; a guard with `isFresh` only skips at the policy's base delay. */
function freshnessOf(
  guard: Pick<GateReleaseStaleGuard, 'isFresh' | 'check'>,
  key: ObjectKey,
  pod: V1Pod,
  baseMs: number,
): Freshness {
  if (guard.check) return guard.check(key, pod.metadata?.resourceVersion);
  if (guard.isFresh(key, pod)) return { fresh: true };
  const detail = "the view has not yet seen tollgate's last write to this pod";
  return {
    fresh: false,
    reason: 'behind',
    detail,
    retryAfterMs: baseMs,
    waiting: false,
    decideLive: false,
  };
}

const soonest = (a: number | undefined, b: number): number =>
  a === undefined ? b : Math.min(a, b);

/**
 * The guard step: never act on a pod whose cache is behind tollgate's own write, or
 * still at the resourceVersion a write of ours conflicted on (for at most
 * `conflictWaitMs`). A stale key waits its own backoff (recorded as SkipStale when the
 * skip is counted, not again while it waits); after N skips it is sent to be decided on
 * one live read (`decideLive`).
 */
export function guardWrites(
  plan: Pick<Plan, 'decisions' | 'writes'>,
  context: {
    readonly view: Pick<ClusterView, 'pod'>;
    readonly staleGuard: Pick<GateReleaseStaleGuard, 'isFresh' | 'check'> | undefined;
    readonly conflicted: ReadonlyMap<ObjectKey, { resourceVersion: string; at: number }>;
    readonly now: number;
    readonly conflictWaitMs: number;
    /** The policy's requeue base: the retry of a conflict, or of a guard without `check`. */
    readonly requeueBaseMs?: number;
  },
): GuardedWrites {
  const { now } = context;
  const baseMs = context.requeueBaseMs ?? 1_000;
  const byId = new Map(plan.decisions.map((d) => [d.id, d]));
  let retryAfterMs: number | undefined;
  let staleRetryAfterMs: number | undefined;
  const judged = plan.writes.map((write): Judged => {
    const decision = byId.get(write.decisionId) as Decision;
    const pod = context.view.pod(write.target.namespace, write.target.name);
    const conflict = context.conflicted.get(write.key);
    const freshness =
      pod && context.staleGuard
        ? freshnessOf(context.staleGuard, write.key, pod, baseMs)
        : ({ fresh: true } as const);
    const base = { write, decision, pod, conflicted: conflict !== undefined };
    if (!freshness.fresh && freshness.decideLive) return { ...base, verdict: 'live' };
    if (!freshness.fresh) {
      staleRetryAfterMs = soonest(staleRetryAfterMs, freshness.retryAfterMs);
      retryAfterMs = soonest(retryAfterMs, freshness.retryAfterMs);
      const why = "the view has not yet seen tollgate's last write to this pod";
      return { ...base, verdict: 'held', why, record: !freshness.waiting };
    }
    if (
      conflict &&
      conflict.resourceVersion === write.target.resourceVersion &&
      now - conflict.at < context.conflictWaitMs
    ) {
      retryAfterMs = soonest(retryAfterMs, baseMs);
      const why = `a write at resourceVersion ${conflict.resourceVersion} conflicted; waiting for the view to move past it`;
      return { ...base, verdict: 'held', why, record: true };
    }
    return { ...base, verdict: 'send' };
  });
  const toSend: Sending[] = [];
  const skipped = new Map<ObjectKey, string>();
  const skips: { write: PlannedWrite; record: Decision }[] = [];
  const held: PlannedWrite[] = [];
  const conflictsPassed: ObjectKey[] = [];
  for (const j of wholeGangs(judged)) {
    const { write, decision, pod } = j;
    if (j.verdict === 'live') toSend.push({ decision, write, pod, decideLive: true });
    else if (j.verdict === 'held') {
      skipped.set(write.key, j.why);
      held.push(write);
      if (j.record) skips.push({ write, record: skipStaleRecord(decision, j.why, now) });
    } else {
      if (j.conflicted) conflictsPassed.push(write.key);
      toSend.push({ decision, write, pod });
    }
  }
  return { toSend, skipped, skips, held, conflictsPassed, retryAfterMs, staleRetryAfterMs };
}

/** The guard's verdict on one planned write, before gangs are made whole. */
type Judged = {
  readonly write: PlannedWrite;
  readonly decision: Decision;
  readonly pod: V1Pod | undefined;
  readonly conflicted: boolean;
} & (
  | { readonly verdict: 'send' | 'live' }
  | { readonly verdict: 'held'; readonly why: string; readonly record: boolean }
);

/**
 * A gang's writes go together or not at all: one member held (the view behind on it, or
 * a conflict not yet past) holds the whole gang, recorded with the member's reason; one
 * member sent to a live read takes its gang to live reads. The Kubernetes API has no
 * write across pods, so a member the guard let go while another waited was released
 * alone (soak seed 32: a gang member released 23 s before the other two, whose writes
 * conflicted on tollgate's own condition write the view had not yet seen).
 */
function wholeGangs(judged: readonly Judged[]): Judged[] {
  const heldBy = new Map<string, string>();
  const live = new Set<string>();
  for (const j of judged) {
    const unit = j.write.unit;
    if (unit === undefined) continue;
    if (j.verdict === 'held' && !heldBy.has(unit)) heldBy.set(unit, j.why);
    if (j.verdict === 'live') live.add(unit);
  }
  return judged.map((j) => {
    const unit = j.write.unit;
    if (unit === undefined || j.verdict === 'held') return j;
    const why = heldBy.get(unit);
    if (why !== undefined)
      return { ...j, verdict: 'held', why: `a member of its gang is held: ${why}`, record: true };
    return live.has(unit) ? { ...j, verdict: 'live' } : j;
  });
}

function skipStaleRecord(decision: Decision, why: string, now: number): Decision {
  return {
    ...decision,
    id: `gate-release:SkipStale:${decision.target.uid}:${decision.target.resourceVersion}:${now}`,
    kind: 'SkipStale',
    reason: `${decision.kind} skipped: ${why}`,
    outcome: { result: 'recorded' },
  };
}

/** The pass's decisions that need no write (recorded holds, expiries), then its skips. */
export function recordsWithoutWrites(
  plan: Pick<Plan, 'decisions'>,
  guarded: Pick<GuardedWrites, 'toSend' | 'skips'>,
): Decision[] {
  const writing = new Set(guarded.toSend.map((s) => s.decision.id));
  const records = plan.decisions.filter(
    (d) => !writing.has(d.id) && d.outcome.result === 'recorded',
  );
  records.push(...guarded.skips.map((s) => s.record));
  return records;
}

/**
 * A large pass (a restart with thousands of pods ready) records its intents in parts:
 * `intentBatch`, then each part twice the one before, each part's writes sent while the
 * next part is pushed. A push of n intents costs a fixed part plus far less per intent
 * than its n writes take at `--api-qps` (the writer commits about 3,500 intents a second),
 * so doubling keeps the dispatcher fed with a handful of pushes. One commit of 10,000
 * intents kept the first write waiting seconds; a first part of 500 and the other 9,500
 * in one push (2.7 s at 10,000 pods) left the dispatcher idle once the first 500 writes
 * were out.
 */
export function intentParts<T>(toSend: readonly T[], intentBatch: number): T[][] {
  const parts: T[][] = [];
  for (let start = 0, size = intentBatch; start < toSend.length; start += size, size *= 2)
    parts.push(toSend.slice(start, start + size));
  return parts.length > 0 ? parts : [[]];
}

/**
 * Slots for writes in the dispatcher. Without them a pass of 10,000 releases parked
 * 9,000 senders on `whenNotFull`, and every freed place woke all of them to find the
 * queue full again: the event loop spent itself on that (lease renewals starved,
 * shutdown did not finish in 30 s). A free slot is taken at once (no tick); else the
 * sender waits in turn and is woken alone.
 */
class WriteSlots {
  #free: number;
  /** Waiters in turn; the ones before `#head` have been woken (a shift of thousands is a copy each). */
  #waiters: ((() => void) | undefined)[] = [];
  #head = 0;
  constructor(slots: number) {
    this.#free = slots;
  }
  /** Undefined when a slot was free; else resolves when one is handed over. */
  acquire(): Promise<void> | undefined {
    if (this.#free > 0) {
      this.#free -= 1;
      return undefined;
    }
    return new Promise<void>((resolve) => this.#waiters.push(resolve));
  }
  release(): void {
    const next = this.#waiters[this.#head];
    if (next === undefined) {
      this.#free += 1;
      return;
    }
    this.#waiters[this.#head] = undefined;
    this.#head += 1;
    if (this.#head === this.#waiters.length) {
      this.#waiters = [];
      this.#head = 0;
    }
    next();
  }
}
