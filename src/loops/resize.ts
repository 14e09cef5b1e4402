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
import type { V1Pod } from '@kubernetes/client-node';
import type { LiveDecision } from '../cluster/stale-guard.ts';
import type { ClusterView, ObjectKey } from '../cluster/types.ts';
import { objectKey } from '../cluster/types.ts';
import type { AuditSink } from '../audit/types.ts';
import type { Dispatcher, WriteRequest, WriteResult } from '../dispatch/types.ts';
import type { Decision, Outcome } from '../decide/decision.ts';
import type { Policy, ResizePolicy } from '../policy/model.ts';
import {
  decidePodResize,
  type PlannedWrite,
  type PodMemo,
  type PodResizePlan,
  type SignalReading,
} from '../decide/resize-plan.ts';
import type { ResourceQuotaLike } from '../decide/resize-objects.ts';
import { chargeQuotas, resizeCharge, type QuotaCharge } from '../decide/resize-quota.ts';
import { actualResources, desiredResources, sameResources } from '../decide/resize-resources.ts';
import type { WindowSample } from '../decide/resize-signals.ts';
import type { PrometheusClient } from '../signals/prometheus.ts';
import { defaultStepMs, readResizeSignals } from './resize-readings.ts';
import { resizePodsByPolicy } from '../decide/resize-match.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import {
  resizeActuationSeconds,
  resizePausedWorkloads,
  resizePending,
  resizeRollbacksTotal,
  resizesTotal,
  type ResizeResult,
} from './resize-metrics.ts';

/**
 * The stale-guard as the resize loop uses it. `isFresh` is false while the view has not
 * yet seen tollgate's own last write to the pod; `recordWrite` tells the guard about a
 * write. The default (`ownWriteGuard`) tracks this loop's writes only.
 */
export interface ResizeStaleGuard {
  isFresh(key: ObjectKey, pod: V1Pod): boolean;
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
  /** Parallel per-pod Prometheus queries when a query cannot be batched. Default 4. */
  readonly queryConcurrency?: number;
  readonly logger?: Logger;
}

export interface ResizeLoop {
  /** One pass now; resolves when its writes have ended. */
  pass(): Promise<PassSummary>;
  stop(): Promise<void>;
}

export interface PassSummary {
  readonly pods: number;
  readonly decisions: readonly Decision[];
  readonly skipped: ReadonlyMap<ObjectKey, string>;
}

/** Compares resourceVersions numerically (etcd revisions); a non-numeric one never counts as caught up. */
function atLeast(seen: string | undefined, wanted: string): boolean {
  if (seen === undefined) return false;
  try {
    return BigInt(seen) >= BigInt(wanted);
  } catch {
    return seen === wanted;
  }
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

/** A step-up promised against a namespace's quota, until the view shows it. */
interface QuotaHold {
  readonly namespace: string;
  readonly charge: QuotaCharge;
  /** The resourceVersion the resize write returned; unset while it is in flight. */
  writtenAt?: { resourceVersion: string; at: number };
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

const eventOf: Partial<Record<Decision['kind'], { type: 'Normal' | 'Warning'; reason: string }>> = {
  Resize: { type: 'Normal', reason: 'TollgateResize' },
  Rollback: { type: 'Warning', reason: 'TollgateResizeRollback' },
  Pause: { type: 'Warning', reason: 'TollgateResizePaused' },
  Resume: { type: 'Normal', reason: 'TollgateResizeResumed' },
  Defer: { type: 'Normal', reason: 'TollgateResizeDeferred' },
  Infeasible: { type: 'Warning', reason: 'TollgateResizeInfeasible' },
};

export function startResizeLoop(deps: ResizeLoopDeps): ResizeLoop {
  const clock = deps.clock ?? systemClock;
  const log = deps.logger ?? silentLogger;
  const guard = deps.staleGuard ?? ownWriteGuard();
  const stepOf = deps.stepMs ?? defaultStepMs;
  const concurrency = deps.queryConcurrency ?? 4;
  const memos = new Map<ObjectKey, PodMemo>();
  const busy = new Set<ObjectKey>();
  /** Accepted resize writes waiting for the kubelet to report the new resources. */
  const actuating = new Map<ObjectKey, number>();
  const paused = new Set<ObjectKey>();
  const pending = new Map<ObjectKey, 'Deferred' | 'Infeasible'>();
  /** Pods whose last resize the API server refused (403/422): the next decision handles it as Infeasible. */
  const refused = new Map<ObjectKey, { code?: number; message: string }>();
  const quotaHolds = new Set<QuotaHold>();
  const chargeMaxAgeMs = deps.quotaChargeMaxAgeMs ?? 120_000;
  const abort = new AbortController();
  let running: Promise<PassSummary> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const unsubscribe = deps.view.onChange((change) => {
    if (change.resource !== 'pods') return;
    if (change.type === 'DELETED') {
      actuating.delete(change.key);
      paused.delete(change.key);
      pending.delete(change.key);
      memos.delete(change.key);
      refused.delete(change.key);
      return;
    }
    const startedAt = actuating.get(change.key);
    if (startedAt === undefined) return;
    const pod = change.object as V1Pod;
    const actual = actualResources(pod);
    if (actual && sameResources(desiredResources(pod), actual)) {
      actuating.delete(change.key);
      resizeActuationSeconds.observe(Math.max(0, clock.now() - startedAt) / 1000);
    }
  });

  function updateGauges(): void {
    resizePausedWorkloads.set(paused.size);
    const counts = { Deferred: 0, Infeasible: 0 };
    for (const reason of pending.values()) counts[reason] += 1;
    resizePending.set({ reason: 'Deferred' }, counts.Deferred);
    resizePending.set({ reason: 'Infeasible' }, counts.Infeasible);
  }

  /** Pods each policy manages: running, in the policy tenant's namespaces, matching the selector; first policy wins. */
  function podsByPolicy(policy: Policy): Map<ResizePolicy, V1Pod[]> {
    return resizePodsByPolicy(policy, deps.view.pods(), (rp) =>
      log.warn(
        { policy: rp.name, tenant: rp.tenant, file: rp.source.file },
        'resize policy names an unknown tenant; skipped',
      ),
    );
  }

  function readingsFor(rp: ResizePolicy, pods: readonly V1Pod[], now: number) {
    return readResizeSignals(
      { prometheus: deps.prometheus, concurrency, signal: abort.signal, logger: log },
      rp,
      pods,
      now,
      stepOf(rp),
    );
  }

  async function enqueue(request: WriteRequest): Promise<WriteResult> {
    for (;;) {
      const accepted = deps.dispatcher.enqueue(request);
      if (accepted.accepted) return accepted.done;
      if (accepted.reason === 'closed')
        return { result: 'cancelled', message: 'dispatcher closed' };
      await deps.dispatcher.whenNotFull(abort.signal);
    }
  }

  function countWrite(decision: Decision, result: WriteResult): void {
    if (decision.kind === 'Resize' || decision.kind === 'Rollback') {
      resizesTotal.inc({ result: result.result as ResizeResult });
    }
    if (decision.kind === 'Rollback' && result.result === 'succeeded') {
      resizeRollbacksTotal.inc({ reason: /SLO/.test(decision.reason) ? 'SLO' : 'OOMKilled' });
    }
  }

  async function emit(pod: V1Pod, decision: Decision): Promise<void> {
    const event = eventOf[decision.kind];
    if (!deps.events || !event) return;
    try {
      await deps.events(pod, { ...event, message: decision.reason.slice(0, 1000) });
    } catch (error) {
      log.warn({ err: errorText(error), decision: decision.id }, 'event not written');
    }
  }

  /**
   * Carries out one pod's plan: the writes in order, each with the resourceVersion the
   * one before returned; the first that does not succeed ends the chain. Returns
   * whether a conflict asks for a fresh decision.
   */
  async function execute(
    pod: V1Pod,
    plan: PodResizePlan,
    tenant: string,
    hold: QuotaHold | undefined,
  ): Promise<'done' | 'conflict'> {
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const key = objectKey(ns, name);
    const byId = new Map(plan.decisions.map((d) => [d.id, d]));
    const outcomes = new Map<string, WriteResult>();
    let resourceVersion = pod.metadata?.resourceVersion ?? '';
    let failed: WriteResult | undefined;
    for (const write of plan.writes as PlannedWrite[]) {
      const result = failed
        ? ({
            result: 'cancelled',
            message: `an earlier write of this decision ended ${failed.result}`,
          } as const)
        : await enqueue({
            key,
            target: { namespace: ns, name, uid: pod.metadata?.uid ?? '', resourceVersion },
            op: write.op,
            priority: write.priority,
            tenant,
            deadline: write.deadline,
            decisionId: write.decisionId,
            signal: abort.signal,
          });
      if (result.result === 'succeeded') {
        resourceVersion = result.resourceVersion;
        guard.recordWrite(key, resourceVersion);
        if (write.op.type === 'resize') {
          actuating.set(key, clock.now());
          if (hold) hold.writtenAt = { resourceVersion, at: clock.now() };
        }
      } else {
        failed ??= result;
        if (
          write.op.type === 'resize' &&
          result.result === 'failed' &&
          (result.code === 403 || result.code === 422)
        ) {
          refused.set(key, {
            ...(result.code === undefined ? {} : { code: result.code }),
            message: result.message,
          });
        }
        log.warn(
          { pod: key, op: write.op.type, decision: write.decisionId, result },
          'resize: write did not succeed',
        );
      }
      const previous = outcomes.get(write.decisionId);
      if (!previous || previous.result === 'succeeded') outcomes.set(write.decisionId, result);
    }
    const records: Decision[] = [];
    for (const [id, result] of outcomes) {
      const decision = byId.get(id);
      if (!decision) continue;
      countWrite(decision, result);
      records.push({ ...decision, outcome: outcomeOf(result) });
    }
    // Decisions that shared a write (Pause with its Rollback) take that write's outcome.
    for (const decision of plan.decisions) {
      if (decision.outcome.result === 'pending' && !outcomes.has(decision.id)) {
        const shared = failed ?? { result: 'succeeded' as const, resourceVersion };
        records.push({ ...decision, outcome: outcomeOf(shared) });
      }
    }
    deps.audit.record(records);
    if (!failed) for (const d of plan.decisions) await emit(pod, d);
    return failed?.result === 'conflict' ? 'conflict' : 'done';
  }

  /** The namespace's quotas as they will be once the step-ups still charged are admitted. */
  function quotasFor(namespace: string): ResourceQuotaLike[] {
    const seen = deps.quotasSeenThrough?.();
    const now = clock.now();
    const charges: QuotaCharge[] = [];
    for (const hold of quotaHolds) {
      const written = hold.writtenAt;
      if (
        written &&
        (atLeast(seen, written.resourceVersion) || now - written.at >= chargeMaxAgeMs)
      ) {
        quotaHolds.delete(hold);
        continue;
      }
      if (hold.namespace === namespace) charges.push(hold.charge);
    }
    const quotas = deps.quotas?.(namespace) ?? [];
    return quotas.length === 0 ? [] : chargeQuotas(quotas, charges);
  }

  /** Charges a planned step-up against its namespace's quota until the view shows it. */
  function chargeOf(pod: V1Pod, plan: PodResizePlan): QuotaHold | undefined {
    const namespace = pod.metadata?.namespace ?? '';
    // A namespace without a quota has nothing to charge.
    if (!deps.quotas || deps.quotas(namespace).length === 0) return undefined;
    for (const write of plan.writes) {
      const charge = resizeCharge(pod, write.op);
      if (!charge) continue;
      const hold: QuotaHold = { namespace, charge };
      quotaHolds.add(hold);
      return hold;
    }
    return undefined;
  }

  function decide(
    rp: ResizePolicy,
    policy: Policy,
    pod: V1Pod,
    readings: readonly SignalReading[],
    slo: { samples?: WindowSample[]; error?: string } | undefined,
    now: number,
  ): PodResizePlan {
    const key = objectKey(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
    const node = pod.spec?.nodeName
      ? [...deps.view.nodes()].find((n) => n.metadata?.name === pod.spec?.nodeName)
      : undefined;
    const memo = memos.get(key);
    const refusal = refused.get(key);
    const plan = decidePodResize({
      policy: rp,
      commit: policy.commit,
      pod,
      ...(node ? { node } : {}),
      quotas: quotasFor(pod.metadata?.namespace ?? ''),
      readings,
      ...(slo ? { slo } : {}),
      approvals: policy.approvals,
      now,
      stepMs: stepOf(rp),
      ...(memo ? { memo } : {}),
      ...(refusal ? { refused: refusal } : {}),
    });
    if (plan.memo) memos.set(key, plan.memo);
    else memos.delete(key);
    if (plan.paused) paused.add(key);
    else paused.delete(key);
    if (plan.pending) pending.set(key, plan.pending);
    else pending.delete(key);
    return plan;
  }

  async function handlePod(
    rp: ResizePolicy,
    policy: Policy,
    pod: V1Pod,
    readings: readonly SignalReading[],
    slo: { samples?: WindowSample[]; error?: string } | undefined,
    now: number,
    all: Decision[],
    skipped: Map<ObjectKey, string>,
  ): Promise<void> {
    const key = objectKey(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
    let current = pod;
    for (let round = 0; round < 2; round += 1) {
      const plan = decide(rp, policy, current, readings, slo, now);
      // Charged before any await, so the next pod of this namespace decided in this
      // pass already sees the room this step takes.
      const hold = chargeOf(current, plan);
      try {
        if (plan.decisions.length === 0) {
          refused.delete(key);
          if (plan.skip) skipped.set(key, plan.skip);
          log.debug(
            {
              pod: key,
              skip: plan.skip,
              readings: readings.map((r) => ({
                signal: r.signal,
                samples: r.samples?.length,
                error: r.error,
              })),
            },
            'resize: nothing to do',
          );
          return;
        }
        for (const d of plan.decisions) {
          if (d.kind === 'Defer' && d.outcome.result === 'recorded')
            resizesTotal.inc({ result: 'deferred' });
          if (d.kind === 'Infeasible' && d.outcome.result === 'recorded')
            resizesTotal.inc({ result: 'infeasible' });
        }
        all.push(...plan.decisions);
        if (plan.writes.length === 0) {
          refused.delete(key);
          deps.audit.record(plan.decisions);
          for (const d of plan.decisions) await emit(current, d);
          return;
        }
        if (!guard.isFresh(key, current)) {
          resizesTotal.inc({ result: 'stale' });
          const first = plan.decisions[0] as Decision;
          deps.audit.record([
            {
              ...first,
              id: first.id.replace(`:${first.kind}:`, ':SkipStale:'),
              kind: 'SkipStale',
              reason: `the view has not seen tollgate's last write to this pod yet; ${first.kind} decided again next pass`,
              outcome: { result: 'recorded' },
            },
          ]);
          skipped.set(key, 'stale');
          return;
        }
        const kind = plan.decisions.some((d) => d.kind === 'Rollback') ? 'Rollback' : 'Resize';
        const verdict = guard.requireLive?.(key, kind, deps.cacheLagMs?.());
        if (verdict?.action === 'hold') {
          skipped.set(key, verdict.reason);
          return;
        }
        if (verdict?.action === 'liveRead' && deps.readPod && round === 0) {
          // Destructive and the cache may be behind: decide again from the live pod if
          // it moved (the write's resourceVersion precondition guards the rest).
          const live = await deps
            .readPod(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '')
            .catch(() => undefined);
          if (!live || live.metadata?.uid !== current.metadata?.uid) {
            skipped.set(key, `${kind}: live read found the pod gone or replaced`);
            return;
          }
          if (live.metadata?.resourceVersion !== current.metadata?.resourceVersion) {
            log.info({ pod: key, kind }, 'resize: live read newer than the cache; decided again');
            current = live;
            continue;
          }
        }
        refused.delete(key);
        const intents = plan.decisions.filter((d) => d.outcome.result === 'pending');
        const records = plan.decisions.filter((d) => d.outcome.result !== 'pending');
        try {
          await deps.audit.recordIntents(intents);
        } catch (error) {
          log.error(
            { err: errorText(error), pod: key },
            'audit intents not recorded; no write sent',
          );
          skipped.set(key, `audit intents not recorded: ${errorText(error)}`);
          return;
        }
        if (records.length) deps.audit.record(records);
        for (const d of records) await emit(current, d);
        const result = await execute(current, { ...plan, decisions: intents }, rp.tenant, hold);
        if (result !== 'conflict' || !deps.readPod) return;
        const fresh = await deps
          .readPod(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '')
          .catch(() => undefined);
        if (!fresh) return;
        current = fresh;
        log.info({ pod: key }, 'resize write conflicted; decided again from a fresh read');
      } finally {
        // A step not admitted frees its room at once; with no quota source to confirm
        // against, an admitted one is released once its write has ended.
        if (hold && (!hold.writtenAt || !deps.quotasSeenThrough)) quotaHolds.delete(hold);
      }
    }
  }

  async function runPass(): Promise<PassSummary> {
    const policy = deps.policy();
    const all: Decision[] = [];
    const skipped = new Map<ObjectKey, string>();
    if (!policy || !deps.view.synced) return { pods: 0, decisions: all, skipped };
    const now = clock.now();
    let count = 0;
    const work: Promise<void>[] = [];
    for (const [rp, pods] of podsByPolicy(policy)) {
      const candidates = pods.filter(
        (p) => !busy.has(objectKey(p.metadata?.namespace ?? '', p.metadata?.name ?? '')),
      );
      count += candidates.length;
      if (candidates.length === 0) continue;
      const { readings, slo } = await readingsFor(rp, candidates, now);
      for (const pod of candidates) {
        const key = objectKey(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
        busy.add(key);
        work.push(
          handlePod(rp, policy, pod, readings.get(key) ?? [], slo.get(key), now, all, skipped)
            .catch((error: unknown) => {
              log.error({ err: errorText(error), pod: key }, 'resize of pod failed');
              skipped.set(key, `error: ${errorText(error)}`);
            })
            .finally(() => busy.delete(key)),
        );
      }
    }
    await Promise.all(work);
    updateGauges();
    return { pods: count, decisions: all, skipped };
  }

  function pass(): Promise<PassSummary> {
    // One pass at a time: a pass asked for while one runs waits for it and runs after.
    const previous = running ?? Promise.resolve(undefined);
    const next = previous.then(
      () => runPass(),
      () => runPass(),
    );
    running = next;
    return next;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      pass()
        .catch((error: unknown) => log.error({ err: errorText(error) }, 'resize pass failed'))
        .finally(schedule);
    }, deps.intervalMs);
    timer.unref?.();
  }
  schedule();

  return {
    pass,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      abort.abort();
      unsubscribe();
      await running?.catch(() => undefined);
    },
  };
}
