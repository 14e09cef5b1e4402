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
import type { AuditSink } from '../audit/types.ts';
import type { ClusterView, ObjectKey, ViewChange } from '../cluster/types.ts';
import type { LiveDecision } from '../cluster/stale-guard.ts';
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
import type { Dispatcher, WriteRequest, WriteResult } from '../dispatch/types.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import type { DecisionKindName, Policy } from '../policy/model.ts';
import {
  expiredTotal,
  gateDwellSeconds,
  precreateGateReleaseSeries,
  publishSummary,
  releasesTotal,
  type ReleaseResult,
} from './gate-release-metrics.ts';

/** The stale-guard as this loop uses it (src/cluster/stale-guard.ts implements it). */
export interface GateReleaseStaleGuard {
  /** False while the view has not yet seen tollgate's own last write to the pod. */
  isFresh(key: ObjectKey, pod: V1Pod): boolean;
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
  readonly clock?: Clock;
  readonly log?: Logger;
  /** A live GET, taken before a destructive write (Cancel deletes the pod) when the stale-guard asks for it. */
  readonly readPod?: (namespace: string, name: string) => Promise<V1Pod | undefined>;
  /**
   * At most this many intents go into a pass's first audit commit; the rest follow in a
   * second one while the first writes are out. Default 500.
   */
  readonly firstIntentBatch?: number;
  /**
   * At most this many of the loop's writes wait in the dispatcher at once; the others
   * wait here, in plan order, each woken alone. Default 500.
   */
  readonly maxQueuedWrites?: number;
  /** The view's measured lag behind the API server (LiveClusterView.cacheLag); undefined = unknown. */
  readonly cacheLagMs?: () => number | undefined;
  /** Quiet time after a change before a pass runs, so a burst of watch events is one pass. Default 100 ms. */
  readonly debounceMs?: number;
  /**
   * The share of the event loop passes may take (default 0.25): after a pass that took P
   * ms, the next starts no sooner than P * (1 / share - 1) ms after it ended. A pass over
   * 10,000 pods takes about 100 ms; with a change every 200 ms, passes back to back
   * left the audit writer's Git push (in this process) waiting seconds behind them, and
   * every strict release waits for that push.
   */
  readonly passShare?: number;
  /** How long a write stays useful in the queue. Default 60 s. */
  readonly writeDeadlineMs?: number;
  /** Hysteresis: how long a raised budget takes to open fully. Default 10 s. */
  readonly budgetRampMs?: number;
  /** Start passes on view changes and timers (default true); false = only explicit `pass()`. */
  readonly autoStart?: boolean;
}

export interface PassReport {
  readonly decisions: readonly Decision[];
  /** Writes decided; each is sent once the intents of its pass are recorded. */
  readonly sent: number;
  readonly skipped: ReadonlyMap<ObjectKey, string>;
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

const uidOf = (s: { write: PlannedWrite }): string => s.write.target.uid;

function withoutActing(state: PlanState, uids: readonly string[]): PlanState {
  if (!uids.some((uid) => uid in state.acting)) return state;
  // One copy for all: a copy per pod made dropping 10,000 pods quadratic (tens of seconds).
  const acting = { ...state.acting };
  for (const uid of uids) delete acting[uid];
  return { ...state, acting };
}

export function startGateReleaseLoop(deps: GateReleaseDeps): GateReleaseLoop {
  const clock = deps.clock ?? systemClock;
  const log = deps.log ?? silentLogger;
  const debounceMs = deps.debounceMs ?? 100;
  const passShare = deps.passShare ?? 0.25;
  if (!(passShare > 0 && passShare <= 1))
    throw new Error(`gate-release: passShare must be in (0, 1], got ${passShare}`);
  /** When the last pass ended and how long its work took (waiting for the view excluded). */
  let lastPassEnd = Number.NEGATIVE_INFINITY;
  let lastPassMs = 0;
  let passStartedAt: number | undefined;
  /** Spacing never exceeds this, however slow a pass was. */
  const maxSpacingMs = 1_000;
  const firstIntentBatch = deps.firstIntentBatch ?? 500;
  const maxQueuedWrites = deps.maxQueuedWrites ?? 500;
  const deadlineMs = deps.writeDeadlineMs ?? 60_000;
  const autoStart = deps.autoStart ?? true;

  let state: PlanState = emptyPlanState;
  let stopped = false;
  let running: Promise<PassReport> | undefined;
  let rerun = false;
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Number.POSITIVE_INFINITY;
  const dirty = new Set<ObjectKey>();
  /** key -> the resourceVersion a write conflicted on: decided again only once the view has moved past it. */
  const conflicted = new Map<ObjectKey, { resourceVersion: string; at: number }>();
  const pending = new Set<Promise<void>>();
  let lastCommit: string | undefined;

  const schedule = (wantedMs: number): void => {
    if (stopped || !autoStart) return;
    const now = clock.now();
    const spacing = Math.min(maxSpacingMs, lastPassMs * (1 / passShare - 1));
    const delayMs = Math.max(wantedMs, lastPassEnd + spacing - now);
    const at = now + Math.max(0, delayMs);
    if (timer && at >= timerAt) return;
    if (timer) clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(
      () => {
        timer = undefined;
        timerAt = Number.POSITIVE_INFINITY;
        void runPass().catch((error: unknown) =>
          log.error({ err: error }, 'gate-release pass failed'),
        );
      },
      Math.max(0, delayMs),
    );
    timer.unref?.();
  };

  const unsubscribe = deps.view.onChange((change: ViewChange) => {
    if (change.resource === 'pods') dirty.add(change.key);
    schedule(debounceMs);
  });

  const record = (decision: Decision, outcome: Outcome): void => {
    deps.audit.record([{ ...decision, outcome }]);
  };

  const emit = (
    pod: V1Pod | undefined,
    type: 'Normal' | 'Warning',
    reason: string,
    action: string,
    message: string,
  ): void => {
    if (!deps.events || !pod) return;
    Promise.resolve(
      deps.events(pod, { type, reason, action, message: message.slice(0, 1000) }),
    ).catch((error: unknown) =>
      log.warn({ err: error, pod: pod.metadata?.name }, 'could not record event'),
    );
  };

  const settle = (
    decision: Decision,
    write: PlannedWrite,
    pod: V1Pod | undefined,
    result: WriteResult,
  ): void => {
    const outcome: Outcome = result;
    record(decision, outcome);
    const key = write.key;
    if (write.op.type === 'removeGate')
      releasesTotal.inc({ tenant: write.tenant, result: result.result satisfies ReleaseResult });
    if (result.result === 'succeeded') {
      deps.staleGuard?.recordWrite(key, result.resourceVersion);
      if (write.op.type === 'removeGate') {
        const created = timestampMs(pod?.metadata?.creationTimestamp);
        if (created !== undefined)
          gateDwellSeconds.observe(
            { tenant: write.tenant },
            Math.max(0, clock.now() - created) / 1000,
          );
        emit(
          pod,
          'Normal',
          'GateReleased',
          'Release',
          `removed gate ${write.op.gate}: ${decision.reason}`,
        );
      } else if (write.op.type === 'annotate') {
        emit(
          pod,
          'Warning',
          'GateReview',
          'Review',
          `awaiting a human decision: ${decision.reason}`,
        );
      } else if (write.op.type === 'delete') {
        emit(pod, 'Warning', 'GateCancelled', 'Delete', decision.reason);
      }
      return;
    }
    // Anything but success: the pod is decided again from the cluster, not from memory.
    state = withoutActing(state, [write.target.uid]);
    if (result.result === 'conflict')
      conflicted.set(key, { resourceVersion: write.target.resourceVersion, at: clock.now() });
    log.info({ pod: key, kind: decision.kind, result }, 'gate-release write did not succeed');
    schedule(debounceMs);
  };

  const send = async (
    decision: Decision,
    write: PlannedWrite,
    pod: V1Pod | undefined,
  ): Promise<void> => {
    // The StalenessPolicy says which kinds are destructive (by default Cancel, which
    // deletes the pod, and a Release forced by expiry); the guard answers proceed for the
    // others. Without a guard only a delete takes the live read.
    const guardKind: DecisionKindName | undefined =
      write.op.type === 'delete'
        ? 'Cancel'
        : write.op.type === 'removeGate'
          ? write.expiryForced
            ? 'ExpireRelease'
            : 'Release'
          : undefined;
    const verdict: LiveDecision | undefined =
      guardKind === undefined
        ? undefined
        : (deps.staleGuard?.requireLive?.(write.key, guardKind, deps.cacheLagMs?.()) ??
          (write.op.type === 'delete'
            ? { action: 'liveRead', reason: `${decision.kind}: no stale-guard to judge the cache` }
            : undefined));
    if (verdict?.action === 'hold') {
      settle(decision, write, pod, { result: 'cancelled', message: verdict.reason });
      return;
    }
    if (verdict?.action === 'proceed')
      log.debug(
        { pod: write.key, kind: decision.kind },
        'destructive write from the cache: lag within bounds',
      );
    if (verdict?.action === 'liveRead' && deps.readPod) {
      // Destructive and the cache may be behind: confirm on a live read that the pod is
      // still the one decided on (the delete's uid + resourceVersion precondition guards
      // the proceed path).
      log.debug({ pod: write.key, reason: verdict.reason }, 'live read before a destructive write');
      const live = await deps.readPod(write.target.namespace, write.target.name);
      const policy = deps.policy();
      if (
        !live ||
        live.metadata?.uid !== write.target.uid ||
        live.metadata?.resourceVersion !== write.target.resourceVersion ||
        !policy ||
        !ownedGate(live, policy)
      ) {
        settle(decision, write, pod, {
          result: 'cancelled',
          message: 'live read: the pod changed since the decision',
        });
        return;
      }
    }
    const request: WriteRequest = {
      key: write.key,
      target: write.target,
      op: write.op,
      priority: write.priority,
      tenant: write.tenant,
      deadline: clock.now() + deadlineMs,
      decisionId: write.decisionId,
    };
    for (;;) {
      const enqueued = deps.dispatcher.enqueue(request);
      if (enqueued.accepted) {
        settle(decision, write, pod, await enqueued.done);
        return;
      }
      if (enqueued.reason === 'closed' || stopped) {
        settle(decision, write, pod, { result: 'cancelled', message: 'dispatcher closed' });
        return;
      }
      await deps.dispatcher.whenNotFull();
    }
  };

  // Slots for writes in the dispatcher. Without them a pass of 10,000 releases parked
  // 9,000 senders on `whenNotFull`, and every freed place woke all of them to find the
  // queue full again: the event loop spent itself on that (lease renewals starved,
  // shutdown did not finish in 30 s).
  let freeSlots = maxQueuedWrites;
  const slotWaiters: (() => void)[] = [];
  const sendInTurn = async (
    decision: Decision,
    write: PlannedWrite,
    pod: V1Pod | undefined,
  ): Promise<void> => {
    if (freeSlots > 0) freeSlots -= 1;
    else await new Promise<void>((resolve) => slotWaiters.push(resolve));
    try {
      if (stopped) {
        settle(decision, write, pod, {
          result: 'cancelled',
          message: 'gate-release loop stopped before the write was queued',
        });
        return;
      }
      await send(decision, write, pod);
    } catch (error) {
      settle(decision, write, pod, {
        result: 'failed',
        message: error instanceof Error ? error.message : String(error),
      });
    } finally {
      const next = slotWaiters.shift();
      if (next) next();
      else freeSlots += 1;
    }
  };

  const onePass = async (): Promise<PassReport> => {
    const policy = deps.policy();
    const nothing: PassReport = {
      decisions: [],
      sent: 0,
      skipped: new Map(),
      settled: Promise.resolve(),
    };
    if (!policy || stopped) return nothing;
    if (!deps.view.synced) await deps.view.whenSynced();
    passStartedAt = performance.now();
    if (policy.commit !== lastCommit) {
      precreateGateReleaseSeries(policy);
      lastCommit = policy.commit;
      log.info({ commit: policy.commit }, 'gate-release: policy in force');
    }
    dirty.clear();
    const now = clock.now();
    const startedAt = performance.now();
    const plan: Plan = planReleases(policy, deps.view, state, now, {
      ...(deps.budgetRampMs !== undefined ? { budgetRampMs: deps.budgetRampMs } : {}),
    });
    let nextState = plan.nextState;
    publishSummary(policy, plan.summary);

    // Stale-guard: never act on a pod whose cache is behind tollgate's own write, or still
    // at the resourceVersion a write of ours conflicted on.
    const skipped = new Map<ObjectKey, string>();
    const byId = new Map(plan.decisions.map((d) => [d.id, d]));
    const toSend: { decision: Decision; write: PlannedWrite; pod: V1Pod | undefined }[] = [];
    const records: Decision[] = [];
    const skipDecisions: Decision[] = [];
    for (const write of plan.writes) {
      const decision = byId.get(write.decisionId) as Decision;
      const pod = deps.view.pod(write.target.namespace, write.target.name);
      const conflict = conflicted.get(write.key);
      let why: string | undefined;
      if (pod && deps.staleGuard && !deps.staleGuard.isFresh(write.key, pod)) {
        why = "the view has not yet seen tollgate's last write to this pod";
      } else if (
        conflict &&
        conflict.resourceVersion === write.target.resourceVersion &&
        now - conflict.at < policy.staleness.requeue.maxMs
      ) {
        why = `a write at resourceVersion ${conflict.resourceVersion} conflicted; waiting for the view to move past it`;
      }
      if (why) {
        skipped.set(write.key, why);
        nextState = withoutActing(nextState, [write.target.uid]);
        skipDecisions.push({
          ...decision,
          id: `gate-release:SkipStale:${decision.target.uid}:${decision.target.resourceVersion}:${now}`,
          kind: 'SkipStale',
          reason: `${decision.kind} skipped: ${why}`,
          outcome: { result: 'recorded' },
        });
        if (write.op.type === 'removeGate')
          releasesTotal.inc({ tenant: write.tenant, result: 'stale' });
        continue;
      }
      if (conflict) conflicted.delete(write.key);
      toSend.push({ decision, write, pod });
    }
    const writing = new Set(toSend.map((s) => s.decision.id));
    for (const decision of plan.decisions) {
      if (!writing.has(decision.id) && decision.outcome.result === 'recorded')
        records.push(decision);
    }
    records.push(...skipDecisions);
    state = nextState;
    if (skipped.size > 0) schedule(policy.staleness.requeue.baseMs);
    if (plan.requeueAfterMs !== undefined) schedule(plan.requeueAfterMs);

    for (const d of plan.decisions) {
      if (d.kind === 'Expire') {
        const action = policy.gatePolicies.find(
          (g) => g.name === d.policy.name && g.tenant === d.tenant,
        )?.expiry?.action;
        if (action) expiredTotal.inc({ action });
        emit(
          deps.view.pod(d.target.namespace, d.target.name),
          'Warning',
          'GateExpired',
          'Expire',
          d.reason,
        );
      } else if (d.kind === 'Hold') {
        emit(
          deps.view.pod(d.target.namespace, d.target.name),
          'Normal',
          'GateHeld',
          'Hold',
          d.reason,
        );
      }
    }
    if (records.length > 0) deps.audit.record(records);

    if (toSend.length === 0)
      return { decisions: plan.decisions, sent: 0, skipped, settled: Promise.resolve() };
    const planMs = Math.round(performance.now() - startedAt);
    // Strict audit: the intents are pushed before any write is sent. The push runs beside
    // the next passes, which see these pods as acting (released, charged to the budget),
    // so a slow push costs latency, not throughput: the audit writer folds the intents
    // of passes that arrive meanwhile into its next commit.
    // A large pass (a restart with thousands of pods ready) pushes its first
    // `firstIntentBatch` intents alone and sends their writes while the rest are pushed:
    // one commit of 10,000 intents kept the first write waiting seconds, while the
    // dispatcher sends only `--api-qps` writes a second anyway.
    const parts =
      toSend.length > firstIntentBatch
        ? [toSend.slice(0, firstIntentBatch), toSend.slice(firstIntentBatch)]
        : [toSend];
    const carryOut = async (): Promise<void> => {
      const sending: Promise<void>[] = [];
      for (const [index, part] of parts.entries()) {
        if (index > 0 && stopped) {
          // Stopping: the rest gets no intent and no write; the next term decides it again.
          state = withoutActing(
            state,
            parts.slice(index).flatMap((s) => s.map(uidOf)),
          );
          break;
        }
        const before = performance.now();
        try {
          await deps.audit.recordIntents(part.map((s) => s.decision));
        } catch (error) {
          // No record, no write. Every pod of this part and the ones after it is decided again later.
          const unrecorded = parts.slice(index).flat();
          log.error(
            { err: error, writes: unrecorded.length },
            'audit intents not recorded; no write sent',
          );
          state = withoutActing(state, unrecorded.map(uidOf));
          for (const s of unrecorded) {
            if (s.write.op.type === 'removeGate')
              releasesTotal.inc({ tenant: s.write.tenant, result: 'unrecorded' });
          }
          schedule(policy.staleness.requeue.maxMs);
          break;
        }
        log.info(
          {
            writes: part.length,
            ...(parts.length > 1 ? { part: `${index + 1}/${parts.length}` } : {}),
            decisions: plan.decisions.length,
            skipped: skipped.size,
            planMs,
            intentsMs: Math.round(performance.now() - before),
            queue: deps.dispatcher.depth,
          },
          'gate-release pass',
        );
        if (stopped) {
          // Stopped while these intents were pushed: one outcome record for all of them.
          // One by one (a log line, an audit record and a wake-up each) 10,000 of them held
          // the event loop for tens of seconds on a busy machine, past the renew deadline.
          const message = 'gate-release loop stopped before the write was queued';
          deps.audit.record(
            part.map((s) => ({ ...s.decision, outcome: { result: 'cancelled', message } })),
          );
          state = withoutActing(state, part.map(uidOf));
          for (const s of part) {
            if (s.write.op.type === 'removeGate')
              releasesTotal.inc({ tenant: s.write.tenant, result: 'cancelled' });
          }
          log.info({ writes: part.length }, `gate-release writes cancelled: ${message}`);
          continue;
        }
        for (const s of part) sending.push(sendInTurn(s.decision, s.write, s.pod));
      }
      await Promise.all(sending);
    };
    const settled = carryOut();
    pending.add(settled);
    void settled.finally(() => pending.delete(settled));
    return { decisions: plan.decisions, sent: toSend.length, skipped, settled };
  };

  const runPass = async (): Promise<PassReport> => {
    if (running) {
      rerun = true;
      return running;
    }
    passStartedAt = undefined;
    running = onePass();
    try {
      return await running;
    } finally {
      lastPassMs = passStartedAt === undefined ? 0 : performance.now() - passStartedAt;
      lastPassEnd = clock.now();
      running = undefined;
      if (rerun && !stopped) {
        rerun = false;
        schedule(debounceMs);
      }
    }
  };

  if (autoStart) schedule(0);

  return {
    async pass() {
      while (running) await running.catch(() => undefined);
      return runPass();
    },
    async stop() {
      stopped = true;
      unsubscribe();
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
      await Promise.allSettled([...pending]);
    },
    get inFlight() {
      return pending.size;
    },
  };
}
