/**
 * The resize loop: every `intervalMs`, for each ResizePolicy, reads the matching running
 * pods from the cluster view, asks Prometheus for each signal over the policy window
 * (one query per signal per namespace where the query allows it), decides per pod with
 * the pure `decidePodResize`, and carries out the writes:
 *
 *   stale-guard -> audit intents (strict: pushed before any write) -> dispatcher
 *   (annotate, then pods/resize, each with the resourceVersion the step before returned)
 *   -> outcome records, events, metrics
 *
 * A 409 is never retried blindly: the pod is read again (live when `readPod` is given,
 * else from the view on the next pass) and decided again from that state.
 *
 * Failure modes named: Prometheus down or slow -> every signal of the pass holds (a
 * failed query is an input of any decision, never a reason to resize); the audit push
 * fails in strict mode -> no write is sent for that pass; the queue is full -> the loop
 * waits for room (backpressure) rather than dropping a rollback.
 */
import { randomBytes } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import {
  checkLive,
  type Freshness,
  type LiveCheck,
  type LiveDecision,
} from '../cluster/stale-guard.ts';
import type { ClusterView, ObjectKey, ViewChange } from '../cluster/types.ts';
import { objectKey } from '../cluster/types.ts';
import type { AuditSink } from '../audit/types.ts';
import type { Dispatcher, WriteRequest, WriteResult } from '../dispatch/types.ts';
import type { Decision, Outcome } from '../decide/decision.ts';
import { resizeEventOf } from '../decide/resize-events.ts';
import type { Policy, ResizePolicy } from '../policy/model.ts';
import {
  decidePodResize,
  resizePriority,
  type PlannedWrite,
  type PodMemo,
  type PodResizePlan,
  type SignalReading,
} from '../decide/resize-plan.ts';
import type { ResourceQuotaLike } from '../decide/resize-objects.ts';
import { atLeast, QuotaHolds, type QuotaHold } from './resize-quota-holds.ts';
import { actualResources, desiredResources, sameResources } from '../decide/resize-resources.ts';
import type { WindowSample } from '../decide/resize-signals.ts';
import { stateKeyRing, type StateKeyRing } from '../decide/resize-seal.ts';
import type { PrometheusClient } from '../signals/prometheus.ts';
import { defaultStepMs, readResizeSignals } from './resize-readings.ts';
import { resizePodsByPolicy } from '../decide/resize-match.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import type { ApiResizeSupport } from '../decide/resize-features.ts';
import { ApiSupportTracker } from './resize-api-probe.ts';
import type { ResizeApiProbe } from '../cluster/resize-api.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import {
  resizeActuationSeconds,
  resizePausedWorkloads,
  resizePausesTotal,
  resizePending,
  resizeRollbacksTotal,
  resizeSignalUnreadable,
  resizeStateRejectedTotal,
  resizeStepDownsHeldTotal,
  resizeWakeupsTotal,
  resizesTotal,
  unreadableReads,
  type ResizeResult,
} from './resize-metrics.ts';
import type { ResizeReadings } from './resize-readings.ts';
import { fingerprintOf, wakeCause, wakeCauses } from './resize-wake.ts';

/**
 * The stale-guard as the resize loop uses it. `isFresh` is false while the view has not
 * yet seen tollgate's own last write to the pod; `recordWrite` tells the guard about a
 * write. The default (`ownWriteGuard`) tracks this loop's writes only.
 */
export interface ResizeStaleGuard {
  isFresh(key: ObjectKey, pod: V1Pod): boolean;
  /**
   * The per-key answer behind `isFresh`: inside its backoff a pod waits (nothing
   * recorded again); after N consecutive skips one live read decides. Absent = `isFresh`.
   */
  check?(key: ObjectKey, cachedResourceVersion: string | undefined): Freshness;
  /** The live read asked for by `decideLive` found this resourceVersion (undefined: gone). */
  liveDecided?(key: ObjectKey, liveResourceVersion: string | undefined): void;
  recordWrite(key: ObjectKey, resourceVersion: string): void;
  /**
   * Before a write of a kind the StalenessPolicy lists as destructive (by default
   * Rollback): act on the cache, take a live read first, or hold. Absent = act on the cache.
   */
  requireLive?(
    key: ObjectKey,
    kind: 'Resize' | 'Rollback',
    cacheLagMs: number | undefined,
  ): LiveDecision;
}

/** A Kubernetes Event on a pod (src/cluster/events.ts implements it). */
export type ResizeEventSink = (
  pod: V1Pod,
  event: { type: 'Normal' | 'Warning'; reason: string; message: string },
) => void | Promise<void>;

export interface ResizeLoopDeps {
  /** Marks each pass's start and end, so /healthz fails when a pass is wedged. */
  readonly watchdog?: { begin(loop: string): () => void };
  readonly view: ClusterView;
  /** The policy snapshot in force (undefined before the first valid one). */
  readonly policy: () => Policy | undefined;
  readonly dispatcher: Dispatcher;
  readonly audit: AuditSink;
  readonly prometheus: PrometheusClient;
  readonly intervalMs: number;
  /** Range-query resolution; default a tenth of the window, between 1 s and 60 s. */
  readonly stepMs?: (policy: ResizePolicy) => number;
  readonly clock?: Clock;
  readonly staleGuard?: ResizeStaleGuard;
  /** The view's measured lag behind the API server; undefined = unknown. */
  readonly cacheLagMs?: () => number | undefined;
  readonly events?: ResizeEventSink;
  /** ResourceQuotas of a namespace, when the view has them (`quotasFromView`). */
  readonly quotas?: (namespace: string) => readonly ResourceQuotaLike[];
  /**
   * The newest resourceVersion the quota source has seen. A step-up charged against its
   * namespace's quota stays charged until this reaches the write's resourceVersion (the
   * view then shows the quota's raised `used`); without it, a charge lasts until its
   * write has ended (protects one pass only).
   */
  readonly quotasSeenThrough?: () => string | undefined;
  /** A charge whose write succeeded is dropped after this long even if unconfirmed. Default 120 s. */
  readonly quotaChargeMaxAgeMs?: number;
  /** A live GET, used to decide again after a 409. */
  readonly readPod?: (namespace: string, name: string) => Promise<V1Pod | undefined>;
  /**
   * False: a Rollback on a pod the view is behind on is not skipped; it goes on one live
   * read (the rollback switch of `--rollback-stale-skip off`). The skip is still counted.
   * Default true.
   */
  readonly staleSkipRollback?: boolean;
  /**
   * The keys that seal and verify the resize state stored on pods
   * (`--resize-state-key-file`). Without them the loop seals with a random key made at
   * its start (logged as a warning): state from before a restart is then rejected as
   * `unknown-key` and ignored.
   */
  readonly stateKeys?: StateKeyRing;
  /**
   * Asks the API server whether it serves pods/resize and accepts a pod-level resize
   * (`createResizeApiProbe`): at the first pass and when the nodes change. Without it,
   * only what the nodes report is judged.
   */
  readonly probeApi?: ResizeApiProbe;
  /** Parallel per-pod Prometheus queries when a query cannot be batched. Default 4. */
  readonly queryConcurrency?: number;
  readonly logger?: Logger;
}

export interface ResizeLoop {
  /** One pass now; resolves when its writes have ended. */
  pass(): Promise<PassSummary>;
  /** What the API server last answered about resize (undefined: not asked). */
  apiSupport(): ApiResizeSupport | undefined;
  stop(): Promise<void>;
}

export interface PassSummary {
  readonly pods: number;
  readonly decisions: readonly Decision[];
  readonly skipped: ReadonlyMap<ObjectKey, string>;
  /** When the soonest pod skipped as stale is due again (its own backoff); undefined = none. */
  readonly staleRetryAfterMs?: number;
}

/** What the loop needs of the cluster view for quotas (LiveClusterView has it). */
export interface QuotaView {
  resourceQuotas(namespace: string): readonly ResourceQuotaLike[];
  lastResourceVersion(resource: 'resourcequotas'): string | undefined;
}

/** The quota deps of the resize loop from the live view, as `tollgate run` wires them. */
export function quotasFromView(
  view: QuotaView,
): Pick<ResizeLoopDeps, 'quotas' | 'quotasSeenThrough'> {
  return {
    quotas: (namespace) => view.resourceQuotas(namespace),
    quotasSeenThrough: () => view.lastResourceVersion('resourcequotas'),
  };
}

/** The guard's per-key answer; a guard with `isFresh` only retries at `retryAfterMs`. */
function freshnessOf(
  guard: ResizeStaleGuard,
  key: ObjectKey,
  pod: V1Pod,
  retryAfterMs: number,
): Freshness {
  if (guard.check) return guard.check(key, pod.metadata?.resourceVersion);
  if (guard.isFresh(key, pod)) return { fresh: true };
  const detail = "the view has not seen tollgate's last write to this pod";
  return {
    fresh: false,
    reason: 'behind',
    detail,
    retryAfterMs,
    waiting: false,
    decideLive: false,
  };
}

/** A stale-guard over this loop's own writes: the view must show the written resourceVersion. */
export function ownWriteGuard(): ResizeStaleGuard {
  const written = new Map<ObjectKey, string>();
  return {
    isFresh(key, pod) {
      const wanted = written.get(key);
      if (wanted === undefined) return true;
      if (atLeast(pod.metadata?.resourceVersion, wanted)) {
        written.delete(key);
        return true;
      }
      return false;
    },
    recordWrite(key, resourceVersion) {
      written.set(key, resourceVersion);
    },
  };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function outcomeOf(result: WriteResult): Outcome {
  switch (result.result) {
    case 'succeeded':
      return { result: 'succeeded', resourceVersion: result.resourceVersion };
    case 'conflict':
      return { result: 'conflict', message: result.message };
    case 'failed':
      return {
        result: 'failed',
        ...(result.code === undefined ? {} : { code: result.code }),
        message: result.message,
      };
    case 'expired':
      return { result: 'expired', message: result.message };
    case 'cancelled':
      return { result: 'cancelled', message: result.message };
  }
}

/** A key for this process alone, when none is configured: state survives no restart. */
function ephemeralStateKeys(log: Logger): StateKeyRing {
  log.warn(
    'no resize state key configured (--resize-state-key-file): resize state is sealed with a key made at start, so state stored before a restart will be rejected and ignored',
  );
  return stateKeyRing([randomBytes(32)]);
}

for (const cause of wakeCauses) resizeWakeupsTotal.inc({ cause }, 0);

export function startResizeLoop(deps: ResizeLoopDeps): ResizeLoop {
  const loop = new ResizeRunner(deps);
  return { pass: () => loop.pass(), stop: () => loop.stop(), apiSupport: () => loop.apiSupport() };
}

/** What one pass collects from its pods. */
interface PassCollector {
  readonly all: Decision[];
  readonly skipped: Map<ObjectKey, string>;
  staleRetryAfterMs?: number;
}

/** One pod of a pass, as decided on. */
interface PodTurn {
  readonly rp: ResizePolicy;
  readonly policy: Policy;
  readonly readings: readonly SignalReading[];
  readonly slo: { samples?: WindowSample[]; error?: string } | undefined;
  readonly now: number;
  readonly key: ObjectKey;
  readonly pass: PassCollector;
}

/**
 * One loop: every `intervalMs` a pass observes (the pods each policy manages, their
 * signals), then per pod decides (`decidePodResize`), guards (`guard.isFresh`, then the
 * live-read judgment `checkLive`), records intents, sends (`sendChain`) and settles the
 * outcomes (`recordOutcomes`); a conflict is decided again from a fresh read.
 */
class ResizeRunner {
  readonly #deps: ResizeLoopDeps;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #guard: ResizeStaleGuard;
  readonly #stepOf: (policy: ResizePolicy) => number;
  readonly #concurrency: number;
  readonly #memos = new Map<ObjectKey, PodMemo>();
  readonly #busy = new Set<ObjectKey>();
  /** Accepted resize writes waiting for the kubelet to report the new resources. */
  readonly #actuating = new Map<ObjectKey, number>();
  readonly #paused = new Set<ObjectKey>();
  readonly #pending = new Map<ObjectKey, 'Deferred' | 'Infeasible'>();
  /** Pods whose last resize the API server refused (403/422): the next decision handles it as Infeasible. */
  readonly #refused = new Map<ObjectKey, { code?: number; message: string }>();
  /** What the loop last saw of each pod's status, to wake on changes that matter. */
  readonly #seen = new Map<ObjectKey, ReturnType<typeof fingerprintOf>>();
  /** Pods woken by a change, reconciled together by the next wake-up pass. */
  readonly #woken = new Set<ObjectKey>();
  #wakeScheduled = false;
  /** Pods skipped as stale, each woken when its own backoff ends. */
  readonly #staleTimers = new Map<ObjectKey, NodeJS.Timeout>();
  /** Pods whose write the stale-guard holds, by the reason last recorded. */
  readonly #liveHolds = new Map<ObjectKey, string>();
  /** Pods whose SkipStale is recorded (by decision kind) while the view stays behind. */
  readonly #staleRecorded = new Map<ObjectKey, string>();
  /** Observe-only: what was last recorded per pod, so the same would-be decision is recorded once. */
  readonly #observed = new Map<ObjectKey, string>();
  /** The last Hold recorded per pod (its `holdKey`): a Hold is recorded once per change. */
  readonly #holds = new Map<ObjectKey, string>();
  /** The rejected stored values last recorded per pod: recorded once per value. */
  readonly #rejectedState = new Map<ObjectKey, string>();
  readonly #stateKeys: StateKeyRing;
  readonly #quotaHolds: QuotaHolds;
  readonly #abort = new AbortController();
  readonly #api: ApiSupportTracker;
  readonly #unsubscribe: () => void;
  #running: Promise<PassSummary> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: ResizeLoopDeps) {
    this.#deps = deps;
    this.#clock = deps.clock ?? systemClock;
    this.#log = deps.logger ?? silentLogger;
    this.#guard = deps.staleGuard ?? ownWriteGuard();
    this.#stepOf = deps.stepMs ?? defaultStepMs;
    this.#concurrency = deps.queryConcurrency ?? 4;
    this.#stateKeys = deps.stateKeys ?? ephemeralStateKeys(this.#log);
    this.#api = new ApiSupportTracker(deps.probeApi);
    this.#quotaHolds = new QuotaHolds({
      quotas: deps.quotas,
      quotasSeenThrough: deps.quotasSeenThrough,
      clock: this.#clock,
      chargeMaxAgeMs: deps.quotaChargeMaxAgeMs ?? 120_000,
    });
    this.#unsubscribe = deps.view.onChange((change) => {
      if (change.resource === 'pods') this.#onPodChange(change);
    });
    this.#schedule();
  }

  /** A deleted pod is forgotten; a resize the kubelet has carried out is timed. */
  #onPodChange(change: ViewChange): void {
    if (change.type === 'DELETED') {
      this.#actuating.delete(change.key);
      this.#paused.delete(change.key);
      this.#pending.delete(change.key);
      this.#memos.delete(change.key);
      this.#refused.delete(change.key);
      this.#holds.delete(change.key);
      this.#rejectedState.delete(change.key);
      this.#seen.delete(change.key);
      this.#staleRecorded.delete(change.key);
      this.#liveHolds.delete(change.key);
      return;
    }
    const pod = change.object as V1Pod;
    this.#wakeOnChange(change.key, pod);
    const startedAt = this.#actuating.get(change.key);
    if (startedAt === undefined) return;
    const actual = actualResources(pod);
    if (actual && sameResources(desiredResources(pod), actual)) {
      this.#actuating.delete(change.key);
      resizeActuationSeconds.observe(Math.max(0, this.#clock.now() - startedAt) / 1000);
    }
  }

  apiSupport(): ApiResizeSupport | undefined {
    return this.#api.current();
  }

  pass(): Promise<PassSummary> {
    return this.#chain(() => this.#runPass());
  }

  /** One pass at a time: a pass asked for while one runs waits for it and runs after. */
  #chain(run: () => Promise<PassSummary>): Promise<PassSummary> {
    const previous = this.#running ?? Promise.resolve(undefined);
    const watched = async (): Promise<PassSummary> => {
      const ended = this.#deps.watchdog?.begin('resize');
      try {
        return await run();
      } finally {
        ended?.();
      }
    };
    const next = previous.then(watched, watched);
    this.#running = next;
    return next;
  }

  /**
   * Event-driven reconcile: a pod change that a decision depends on (`wakeCause`)
   * queues the pod for a pass of its own, run as soon as the pass in progress (if any)
   * ends; pods woken meanwhile share it. The timer stays as the backstop.
   */
  #wakeOnChange(key: ObjectKey, pod: V1Pod): void {
    const fingerprint = fingerprintOf(pod);
    const cause = wakeCause(this.#seen.get(key), fingerprint);
    this.#seen.set(key, fingerprint);
    if (!cause || this.#stopped || !this.#deps.view.synced) return;
    resizeWakeupsTotal.inc({ cause });
    this.#wake(key);
  }

  /** A stale pod is decided again when its own backoff ends, not at the next timer pass. */
  #wakeAfter(key: ObjectKey, ms: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#staleTimers.get(key));
    const timer = setTimeout(() => {
      this.#staleTimers.delete(key);
      if (!this.#stopped && this.#deps.view.synced) this.#wake(key);
    }, ms);
    timer.unref?.();
    this.#staleTimers.set(key, timer);
  }

  /** The pod joins the next wake-up pass (one pass for the pods woken meanwhile). */
  #wake(key: ObjectKey): void {
    this.#woken.add(key);
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    setImmediate(() => {
      this.#chain(() => {
        this.#wakeScheduled = false;
        const keys = new Set(this.#woken);
        this.#woken.clear();
        return this.#runPass(keys);
      }).catch((error: unknown) =>
        this.#log.error({ err: errorText(error) }, 'resize wake-up pass failed'),
      );
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    for (const timer of this.#staleTimers.values()) clearTimeout(timer);
    this.#staleTimers.clear();
    this.#abort.abort();
    this.#unsubscribe();
    await this.#running?.catch(() => undefined);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.pass()
        .catch((error: unknown) => this.#log.error({ err: errorText(error) }, 'resize pass failed'))
        .finally(() => this.#schedule());
    }, this.#deps.intervalMs);
    this.#timer.unref?.();
  }

  /** Observe: per policy, its pods not busy from an earlier pass and their signals; then each pod. */
  async #runPass(only?: ReadonlySet<ObjectKey>): Promise<PassSummary> {
    const policy = this.#deps.policy();
    const pass: PassCollector = { all: [], skipped: new Map() };
    if (!policy || !this.#deps.view.synced)
      return { pods: 0, decisions: pass.all, skipped: pass.skipped };
    const now = this.#clock.now();
    let count = 0;
    const work: Promise<void>[] = [];
    const byPolicy = this.#podsByPolicy(policy);
    await this.#api.refresh(byPolicy, [...this.#deps.view.nodes()]);
    for (const [rp, pods] of byPolicy) {
      const candidates = pods.filter(
        (p) => !this.#busy.has(keyOf(p)) && (only === undefined || only.has(keyOf(p))),
      );
      count += candidates.length;
      if (candidates.length === 0) continue;
      const read = await this.#readingsFor(rp, candidates, now);
      meterUnreadable(rp, read);
      const { readings, slo } = read;
      for (const pod of candidates) {
        const key = keyOf(pod);
        this.#busy.add(key);
        const turn: PodTurn = {
          rp,
          policy,
          readings: readings.get(key) ?? [],
          slo: slo.get(key),
          now,
          key,
          pass,
        };
        work.push(
          this.#handlePod(pod, turn)
            .catch((error: unknown) => {
              this.#log.error({ err: errorText(error), pod: key }, 'resize of pod failed');
              pass.skipped.set(key, `error: ${errorText(error)}`);
            })
            .finally(() => this.#busy.delete(key)),
        );
      }
    }
    await Promise.all(work);
    this.#updateGauges();
    return {
      pods: count,
      decisions: pass.all,
      skipped: pass.skipped,
      ...(pass.staleRetryAfterMs === undefined
        ? {}
        : { staleRetryAfterMs: pass.staleRetryAfterMs }),
    };
  }

  #updateGauges(): void {
    resizePausedWorkloads.set(this.#paused.size);
    const counts = { Deferred: 0, Infeasible: 0 };
    for (const reason of this.#pending.values()) counts[reason] += 1;
    resizePending.set({ reason: 'Deferred' }, counts.Deferred);
    resizePending.set({ reason: 'Infeasible' }, counts.Infeasible);
  }

  /** Pods each policy manages: running, in the policy tenant's namespaces, matching the selector; first policy wins. */
  #podsByPolicy(policy: Policy): Map<ResizePolicy, V1Pod[]> {
    return resizePodsByPolicy(policy, this.#deps.view.pods(), (rp) =>
      this.#log.warn(
        { policy: rp.name, tenant: rp.tenant, file: rp.source.file },
        'resize policy names an unknown tenant; skipped',
      ),
    );
  }

  #readingsFor(rp: ResizePolicy, pods: readonly V1Pod[], now: number) {
    return readResizeSignals(
      {
        prometheus: this.#deps.prometheus,
        concurrency: this.#concurrency,
        signal: this.#abort.signal,
        logger: this.#log,
      },
      rp,
      pods,
      now,
      this.#stepOf(rp),
    );
  }

  /**
   * One pod: decide and act, at most twice; the second time on the live pod when the
   * first found it moved (live read) or its write conflicted (fresh read).
   */
  async #handlePod(pod: V1Pod, turn: PodTurn): Promise<void> {
    let current = pod;
    for (let round = 0; round < 2; round += 1) {
      const plan = this.#decide(current, turn);
      // Charged before any await, so the next pod of this namespace decided in this
      // pass already sees the room this step takes.
      const hold = this.#quotaHolds.charge(current, plan);
      try {
        const again = await this.#actOnPlan(current, plan, hold, turn, round);
        if (again === undefined) return;
        current = again;
      } finally {
        this.#quotaHolds.settle(hold);
      }
    }
  }

  /** Decide: the pure `decidePodResize` on the pod, its node, quotas, signals and memo. */
  #decide(pod: V1Pod, turn: PodTurn): PodResizePlan {
    const key = keyOf(pod);
    const node = pod.spec?.nodeName
      ? [...this.#deps.view.nodes()].find((n) => n.metadata?.name === pod.spec?.nodeName)
      : undefined;
    const memo = this.#memos.get(key);
    const refusal = this.#refused.get(key);
    const plan = decidePodResize({
      policy: turn.rp,
      commit: turn.policy.commit,
      pod,
      ...(node ? { node } : {}),
      quotas: this.#quotaHolds.quotasFor(pod.metadata?.namespace ?? ''),
      readings: turn.readings,
      ...(turn.slo ? { slo: turn.slo } : {}),
      approvals: turn.policy.approvals,
      now: turn.now,
      stepMs: this.#stepOf(turn.rp),
      ...(memo ? { memo } : {}),
      ...(refusal ? { refused: refusal } : {}),
      ...(this.#api.current() ? { api: this.#api.current() } : {}),
      stateKeys: this.#stateKeys,
    });
    if (plan.memo) this.#memos.set(key, plan.memo);
    else this.#memos.delete(key);
    if (plan.paused) this.#paused.add(key);
    else this.#paused.delete(key);
    if (plan.pending) this.#pending.set(key, plan.pending);
    else this.#pending.delete(key);
    return plan;
  }

  /**
   * Acts on one plan: nothing to do; records only; or guard, record intents, send and
   * settle. Returns the pod to decide again on (moved under a live read, or a conflict
   * and a fresh read), else undefined.
   */
  async #actOnPlan(
    current: V1Pod,
    plan: PodResizePlan,
    hold: QuotaHold | undefined,
    turn: PodTurn,
    round: number,
  ): Promise<V1Pod | undefined> {
    const { key, pass } = turn;
    await this.#recordRejectedState(current, plan, turn);
    if (plan.decisions.length === 0) {
      this.#holds.delete(key);
      this.#observed.delete(key);
      this.#nothingToDo(key, plan, turn);
      return undefined;
    }
    if (this.#alreadyHeld(key, plan, turn)) return undefined;
    if (turn.rp.mode === 'Observe') {
      this.#observeOnly(key, plan, turn);
      return undefined;
    }
    if (plan.deferredCheck) resizesTotal.inc({ result: 'deferred' });
    for (const d of plan.decisions) {
      if (d.kind === 'Infeasible' && d.outcome.result === 'recorded')
        resizesTotal.inc({ result: 'infeasible' });
    }
    pass.all.push(...plan.decisions);
    if (plan.writes.length === 0) {
      this.#refused.delete(key);
      this.#deps.audit.record(plan.decisions);
      for (const d of plan.decisions) await this.#emit(current, d);
      return undefined;
    }
    // Guard: the view must have seen our last write (else the pod waits its own
    // backoff, or one live read decides); then the live-read judgment.
    const stale = this.#staleness(key, current, plan, round);
    if (stale === 'live') return this.#decideOnLive(current, key, pass);
    if (stale !== 'fresh') {
      this.#skipStale(key, plan, pass, stale);
      return undefined;
    }
    let check = this.#checkLive(current, plan, key, round);
    if (check instanceof Promise) check = await check;
    if (check.action !== 'proceed') return this.#afterLiveCheck(plan, check, key, pass);
    this.#liveHolds.delete(key);
    // Record intents, send, settle.
    this.#refused.delete(key);
    const intents = plan.decisions.filter((d) => d.outcome.result === 'pending');
    const records = plan.decisions.filter((d) => d.outcome.result !== 'pending');
    try {
      await this.#deps.audit.recordIntents(intents);
    } catch (error) {
      this.#log.error(
        { err: errorText(error), pod: key },
        'audit intents not recorded; no write sent',
      );
      pass.skipped.set(key, `audit intents not recorded: ${errorText(error)}`);
      return undefined;
    }
    if (records.length) this.#deps.audit.record(records);
    for (const d of records) await this.#emit(current, d);
    const result = await this.#execute(
      current,
      { ...plan, decisions: intents },
      turn.rp.tenant,
      hold,
    );
    if (result !== 'conflict' || !this.#deps.readPod) return undefined;
    const fresh = await this.#readLive(current)();
    if (fresh)
      this.#log.info({ pod: key }, 'resize write conflicted; decided again from a fresh read');
    return fresh;
  }

  /**
   * Stored state the plan ignored (its seal did not verify): recorded, counted by reason
   * and raised as a Warning Event, once per pod and rejected value (not once per pass).
   * The next write tollgate makes to the pod replaces it with a sealed value.
   */
  async #recordRejectedState(pod: V1Pod, plan: PodResizePlan, turn: PodTurn): Promise<void> {
    const { key } = turn;
    if (!plan.stateRejected) {
      this.#rejectedState.delete(key);
      return;
    }
    const annotations = pod.metadata?.annotations ?? {};
    const values = JSON.stringify(
      plan.stateRejected.rejected.map((r) => [r.annotation, annotations[r.annotation]]),
    );
    if (this.#rejectedState.get(key) === values) return;
    this.#rejectedState.set(key, values);
    for (const r of plan.stateRejected.rejected) resizeStateRejectedTotal.inc({ reason: r.reason });
    const { decision } = plan.stateRejected;
    this.#log.warn({ pod: key, rejected: plan.stateRejected.rejected }, decision.reason);
    turn.pass.all.push(decision);
    this.#deps.audit.record([decision]);
    if (turn.rp.mode === 'Observe') return;
    await this.#emit(pod, decision, { type: 'Warning', reason: 'TollgateResizeStateRejected' });
  }

  /**
   * A Hold on the same signals as the last one recorded for this pod is not recorded
   * again (one record per change of reason, not one per pass); any other plan ends the
   * episode.
   */
  #alreadyHeld(key: ObjectKey, plan: PodResizePlan, turn: PodTurn): boolean {
    if (plan.holdKey === undefined) {
      this.#holds.delete(key);
      return false;
    }
    const reason = plan.decisions[0]?.reason ?? '';
    if (this.#holds.get(key) === plan.holdKey) {
      turn.pass.skipped.set(key, `held (recorded before): ${reason}`);
      return true;
    }
    turn.pass.skipped.set(key, `held: ${reason}`);
    this.#holds.set(key, plan.holdKey);
    if (plan.holdCause === 'unreadable') resizeStepDownsHeldTotal.inc({ policy: turn.rp.name });
    return false;
  }

  /**
   * An observe-only policy: the plan's decisions are recorded as what tollgate would
   * do (outcome `recorded`, the mode an input), once per change of decision; no write,
   * no Event, no intent.
   */
  #observeOnly(key: ObjectKey, plan: PodResizePlan, turn: PodTurn): void {
    const records = plan.decisions.map((d): Decision => ({
      ...d,
      id: d.outcome.result === 'pending' ? `${d.id}:observe:${turn.now}` : d.id,
      reason: `observe-only: would ${d.kind === 'Hold' ? 'hold' : 'carry out'} ${d.kind}: ${d.reason}`,
      inputs: [...d.inputs, { condition: 'mode', met: true, value: 'Observe' }],
      outcome: { result: 'recorded' },
    }));
    const change = JSON.stringify(
      plan.decisions.map((d) => [d.kind, d.inputs.find((i) => i.condition === 'target')?.value]),
    );
    if (this.#observed.get(key) === change) {
      turn.pass.skipped.set(key, 'observe-only: the same decision is already recorded');
      return;
    }
    this.#observed.set(key, change);
    turn.pass.all.push(...records);
    this.#deps.audit.record(records);
  }

  #nothingToDo(key: ObjectKey, plan: PodResizePlan, turn: PodTurn): void {
    this.#refused.delete(key);
    if (plan.skip) turn.pass.skipped.set(key, plan.skip);
    this.#log.debug(
      {
        pod: key,
        skip: plan.skip,
        readings: turn.readings.map((r) => ({
          signal: r.signal,
          samples: r.samples?.length,
          error: r.error,
        })),
      },
      'resize: nothing to do',
    );
  }

  /**
   * Fresh; or one live read decides (after N consecutive skips, or at once for a
   * Rollback when the skip path is off for rollback); else the guard's answer to skip.
   */
  #staleness(
    key: ObjectKey,
    current: V1Pod,
    plan: PodResizePlan,
    round: number,
  ): 'fresh' | 'live' | Extract<Freshness, { fresh: false }> {
    const freshness = freshnessOf(this.#guard, key, current, this.#deps.intervalMs);
    if (freshness.fresh) {
      this.#staleRecorded.delete(key);
      return 'fresh';
    }
    const rollbackLive =
      this.#deps.staleSkipRollback === false && plan.decisions.some((d) => d.kind === 'Rollback');
    const canRead = round === 0 && this.#deps.readPod !== undefined;
    return (freshness.decideLive || rollbackLive) && canRead ? 'live' : freshness;
  }

  /**
   * The view stayed behind tollgate's write: one live read (the bounded reader) decides.
   * The pod is decided again on the live object; a refused read or a pod gone skips it.
   */
  async #decideOnLive(
    current: V1Pod,
    key: ObjectKey,
    pass: PassCollector,
  ): Promise<V1Pod | undefined> {
    const namespace = current.metadata?.namespace ?? '';
    const name = current.metadata?.name ?? '';
    let live: V1Pod | undefined;
    try {
      live = await this.#deps.readPod!(namespace, name);
    } catch (error) {
      const retryAfterMs = (error as { retryAfterMs?: number }).retryAfterMs ?? 1_000;
      pass.skipped.set(key, `stale: live read refused: ${errorText(error)}`);
      this.#noteStaleRetry(key, pass, retryAfterMs);
      return undefined;
    }
    const same = live?.metadata?.uid === current.metadata?.uid;
    this.#guard.liveDecided?.(key, same ? live?.metadata?.resourceVersion : undefined);
    if (!live || !same) {
      pass.skipped.set(key, 'stale: live read found the pod gone or replaced');
      return undefined;
    }
    this.#log.info({ pod: key }, 'resize: the view stayed behind; decided again on a live read');
    return live;
  }

  #noteStaleRetry(key: ObjectKey, pass: PassCollector, retryAfterMs: number): void {
    pass.staleRetryAfterMs = Math.min(pass.staleRetryAfterMs ?? retryAfterMs, retryAfterMs);
    this.#wakeAfter(key, retryAfterMs);
  }

  /**
   * The view has not seen our last write: decided again when the pod's own backoff
   * ends. One SkipStale record per pod and decision kind while the view stays behind,
   * not one per pass; a pass inside the backoff counts nothing.
   */
  #skipStale(
    key: ObjectKey,
    plan: PodResizePlan,
    pass: PassCollector,
    freshness: Extract<Freshness, { fresh: false }>,
  ): void {
    pass.skipped.set(key, 'stale');
    this.#noteStaleRetry(key, pass, freshness.retryAfterMs);
    if (freshness.waiting) return;
    resizesTotal.inc({ result: 'stale' });
    const first = plan.decisions[0] as Decision;
    if (this.#staleRecorded.get(key) === first.kind) return;
    this.#staleRecorded.set(key, first.kind);
    this.#deps.audit.record([
      skipStaleOf(
        first,
        `the view has not seen tollgate's last write to this pod yet; ${first.kind} decided again next pass`,
      ),
    ]);
  }

  /**
   * A Rollback (destructive by default) or Resize may need a live read first; only in
   * the first round (the second already decides on a live pod).
   */
  #checkLive(
    current: V1Pod,
    plan: PodResizePlan,
    key: ObjectKey,
    round: number,
  ): LiveCheck<V1Pod> | Promise<LiveCheck<V1Pod>> {
    const kind = plan.decisions.some((d) => d.kind === 'Rollback') ? 'Rollback' : 'Resize';
    const readPod = this.#deps.readPod;
    const check = checkLive<V1Pod>({
      guard: this.#guard,
      key,
      kind,
      cacheLagMs: this.#deps.cacheLagMs?.(),
      decided: current.metadata ?? {},
      ...(readPod && round === 0
        ? {
            readLive: () =>
              readPod(current.metadata?.namespace ?? '', current.metadata?.name ?? ''),
          }
        : {}),
    });
    // A read that failed or was refused (budget, breaker) says nothing about the pod:
    // the write holds with that reason and the key is decided again later.
    return check instanceof Promise
      ? check.catch((error: unknown): LiveCheck<V1Pod> => ({
          action: 'hold',
          reason: `${kind}: live read refused: ${error instanceof Error ? error.message : String(error)}`,
          retryAfterMs: (error as { retryAfterMs?: number }).retryAfterMs ?? 1_000,
        }))
      : check;
  }

  /** Held or gone: skipped with the reason; moved: decided again on the live pod. */
  #afterLiveCheck(
    plan: PodResizePlan,
    check: Exclude<LiveCheck<V1Pod>, { action: 'proceed' }>,
    key: ObjectKey,
    pass: PassCollector,
  ): V1Pod | undefined {
    const kind = plan.decisions.some((d) => d.kind === 'Rollback') ? 'Rollback' : 'Resize';
    if (check.action === 'hold') {
      pass.skipped.set(key, check.reason);
      this.#recordLiveHold(key, plan, kind, check.reason);
      return undefined;
    }
    if (check.action === 'gone') {
      pass.skipped.set(key, `${kind}: live read found the pod gone or replaced`);
      return undefined;
    }
    this.#log.info({ pod: key, kind }, 'resize: live read newer than the cache; decided again');
    return check.live;
  }

  /**
   * A write the stale-guard held (no live read allowed, or it failed): a SkipStale
   * record once per pod and change of reason (its numbers aside: a countdown in the
   * reason is the same reason), not once per pass.
   */
  #recordLiveHold(key: ObjectKey, plan: PodResizePlan, kind: string, reason: string): void {
    const sameReason = `${kind}|${reason.replace(/\d+/g, '#')}`;
    if (this.#liveHolds.get(key) === sameReason) return;
    this.#liveHolds.set(key, sameReason);
    this.#deps.audit.record([
      skipStaleOf(
        plan.decisions[0] as Decision,
        `stale-guard held the ${kind}: ${reason}; decided again later`,
        `:held:${this.#clock.now()}`,
      ),
    ]);
  }

  /** A live GET of the pod; a failed read counts as not found. */
  #readLive(pod: V1Pod): () => Promise<V1Pod | undefined> {
    const readPod = this.#deps.readPod;
    return async () =>
      readPod
        ? readPod(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '').catch(() => undefined)
        : undefined;
  }

  /**
   * Carries out one pod's plan (`sendChain`) and records each decision's outcome
   * (`recordOutcomes`); Events only when every write succeeded. Returns whether a
   * conflict asks for a fresh decision.
   */
  async #execute(
    pod: V1Pod,
    plan: PodResizePlan,
    tenant: string,
    hold: QuotaHold | undefined,
  ): Promise<'done' | 'conflict'> {
    const sent = await this.#sendChain(pod, plan, tenant, hold);
    this.#deps.audit.record(this.#recordOutcomes(plan, sent));
    if (plan.pauseCause && !sent.failed) resizePausesTotal.inc({ cause: plan.pauseCause });
    if (!sent.failed) for (const d of plan.decisions) await this.#emit(pod, d);
    return sent.failed?.result === 'conflict' ? 'conflict' : 'done';
  }

  /**
   * The writes in order, each with the resourceVersion the one before returned; the
   * first that does not succeed ends the chain (the rest are cancelled).
   */
  async #sendChain(
    pod: V1Pod,
    plan: PodResizePlan,
    tenant: string,
    hold: QuotaHold | undefined,
  ): Promise<ChainResult> {
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const key = objectKey(ns, name);
    const outcomes = new Map<string, WriteResult>();
    let resourceVersion = pod.metadata?.resourceVersion ?? '';
    let failed: WriteResult | undefined;
    for (const write of plan.writes as PlannedWrite[]) {
      const result = failed
        ? ({
            result: 'cancelled',
            message: `an earlier write of this decision ended ${failed.result}`,
          } as const)
        : await this.#enqueue({
            key,
            target: { namespace: ns, name, uid: pod.metadata?.uid ?? '', resourceVersion },
            op: write.op,
            priority: write.priority,
            // A rollback or revert restores what ran before: a safety write, ahead of
            // every release whatever the GatePolicy priorities.
            band: write.priority >= resizePriority.revert ? 'safety' : 'work',
            tenant,
            deadline: write.deadline,
            decisionId: write.decisionId,
            signal: this.#abort.signal,
          });
      if (result.result === 'succeeded') {
        resourceVersion = result.resourceVersion;
        this.#wrote(key, write, resourceVersion, hold);
      } else {
        failed ??= result;
        this.#notWritten(key, write, result);
      }
      const previous = outcomes.get(write.decisionId);
      if (!previous || previous.result === 'succeeded') outcomes.set(write.decisionId, result);
    }
    return { outcomes, failed, resourceVersion };
  }

  #wrote(
    key: ObjectKey,
    write: PlannedWrite,
    resourceVersion: string,
    hold: QuotaHold | undefined,
  ): void {
    this.#guard.recordWrite(key, resourceVersion);
    if (write.op.type !== 'resize') return;
    this.#actuating.set(key, this.#clock.now());
    if (hold) hold.writtenAt = { resourceVersion, at: this.#clock.now() };
  }

  #notWritten(key: ObjectKey, write: PlannedWrite, result: WriteResult): void {
    if (
      write.op.type === 'resize' &&
      result.result === 'failed' &&
      (result.code === 403 || result.code === 422)
    ) {
      this.#refused.set(key, {
        ...(result.code === undefined ? {} : { code: result.code }),
        message: result.message,
      });
    }
    this.#log.warn(
      { pod: key, op: write.op.type, decision: write.decisionId, result },
      'resize: write did not succeed',
    );
  }

  /** Each decision with its write's outcome, counted; decisions that shared a write take its outcome. */
  #recordOutcomes(plan: PodResizePlan, sent: ChainResult): Decision[] {
    const byId = new Map(plan.decisions.map((d) => [d.id, d]));
    const records: Decision[] = [];
    for (const [id, result] of sent.outcomes) {
      const decision = byId.get(id);
      if (!decision) continue;
      countWrite(decision, result);
      records.push({ ...decision, outcome: outcomeOf(result) });
    }
    // Decisions that shared a write (Pause with its Rollback) take that write's outcome.
    for (const decision of plan.decisions) {
      if (decision.outcome.result === 'pending' && !sent.outcomes.has(decision.id)) {
        const shared = sent.failed ?? {
          result: 'succeeded' as const,
          resourceVersion: sent.resourceVersion,
        };
        records.push({ ...decision, outcome: outcomeOf(shared) });
      }
    }
    return records;
  }

  async #enqueue(request: WriteRequest): Promise<WriteResult> {
    for (;;) {
      const accepted = this.#deps.dispatcher.enqueue(request);
      if (accepted.accepted) return accepted.done;
      if (accepted.reason === 'closed')
        return { result: 'cancelled', message: 'dispatcher closed' };
      await this.#deps.dispatcher.whenNotFull(this.#abort.signal);
    }
  }

  async #emit(pod: V1Pod, decision: Decision, event = resizeEventOf(decision)): Promise<void> {
    if (!this.#deps.events || !event) return;
    try {
      await this.#deps.events(pod, { ...event, message: decision.reason.slice(0, 1000) });
    } catch (error) {
      this.#log.warn({ err: errorText(error), decision: decision.id }, 'event not written');
    }
  }
}

/** What a pod's chain of writes ended with. */
interface ChainResult {
  /** Per decision id, its write's result (the first that did not succeed, if any). */
  readonly outcomes: ReadonlyMap<string, WriteResult>;
  readonly failed: WriteResult | undefined;
  /** The resourceVersion the last successful write returned. */
  readonly resourceVersion: string;
}

/** Per signal (and the SLO), how many pods of this pass could not read it, by how. */
function meterUnreadable(rp: ResizePolicy, read: ResizeReadings): void {
  const counts = new Map<string, number>();
  const count = (signal: string, slot: { samples?: readonly unknown[]; error?: string }) => {
    const how =
      slot.error !== undefined
        ? 'error'
        : (slot.samples?.length ?? 0) === 0
          ? 'no-samples'
          : undefined;
    if (how) counts.set(`${signal}\n${how}`, (counts.get(`${signal}\n${how}`) ?? 0) + 1);
  };
  for (const list of read.readings.values()) for (const r of list) count(r.signal, r);
  for (const slot of read.slo.values()) count('(slo)', slot);
  const signals = [...rp.signals.map((s) => s.name), ...(rp.slo ? ['(slo)'] : [])];
  for (const signal of signals)
    for (const how of unreadableReads)
      resizeSignalUnreadable.set(
        { policy: rp.name, signal, read: how },
        counts.get(`${signal}\n${how}`) ?? 0,
      );
}

/** The SkipStale record of a decision not carried out (no write), with its reason. */
function skipStaleOf(first: Decision, reason: string, idSuffix = ''): Decision {
  return {
    ...first,
    id: `${first.id.replace(`:${first.kind}:`, ':SkipStale:')}${idSuffix}`,
    kind: 'SkipStale',
    reason,
    outcome: { result: 'recorded' },
  };
}

function keyOf(pod: V1Pod): ObjectKey {
  return objectKey(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
}

function countWrite(decision: Decision, result: WriteResult): void {
  if (decision.kind === 'Resize' || decision.kind === 'Rollback') {
    resizesTotal.inc({ result: result.result as ResizeResult });
  }
  if (decision.kind === 'Rollback' && result.result === 'succeeded') {
    resizeRollbacksTotal.inc({ reason: /SLO/.test(decision.reason) ? 'SLO' : 'OOMKilled' });
  }
}
