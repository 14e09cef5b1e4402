/**
 * The resize decision for one pod: pure, from (policy, pod, node, quotas, signal
 * samples, approvals, now) to decisions with reasons and the ordered writes that carry
 * them out. The order of the checks is the order of precedence:
 *
 * 1. not resizable (not running, no node, BestEffort, no resize status) -> nothing
 * 2. paused -> Resume when a new Approval names the workload, else nothing
 * 3. OOMKilled after tollgate lowered memory -> Rollback + Pause
 * 4. SLO breached for `forMs` after a tollgate resize -> Rollback + Pause
 * 5. a resize in flight: Infeasible -> a smaller target (halfway back) or mark and revert;
 *    Deferred / InProgress Error -> Defer (re-checked with backoff) until the deadline,
 *    then revert; otherwise wait for the kubelet
 * 6. cooldown since the last applied resize -> nothing
 * 7. signals over the window -> one step up or down within bounds, the node's
 *    allocatable, the namespace quota, the QoS class and the containers' resizePolicy
 *
 * Writes are sequential: each one uses the resourceVersion the previous returned. The
 * state annotation goes first, so a crash between the two writes leaves a recorded
 * target that the spec does not match, which the next pass treats as never applied
 * (no cooldown, decide again) rather than a resize whose last-good resources were lost.
 */
import type {
  ResizeConditionLike as V1PodCondition,
  ResizeNodeLike as V1Node,
  ResizePodLike as V1Pod,
  ResizeWriteOperation as WriteOperation,
  ResourceQuotaLike as V1ResourceQuota,
} from './resize-objects.ts';
import { timestampMs } from './resize-objects.ts';
import type { Decision, DecisionKind, ConditionInput } from './decision.ts';
import type { Approval, Bounds, ResizePolicy, ResourceBounds } from '../policy/model.ts';
import {
  type Amounts,
  type PodResources,
  type Requirements,
  type ResizableResource,
  actualResources,
  desiredResources,
  fromRecord,
  moveRequest,
  podLimits,
  podRequests,
  qosClass,
  resizableResources,
  restartPolicyOf,
  sameRequirements,
  sameResources,
  stepWithin,
  toRecord,
  toResourceList,
} from './resize-resources.ts';
import {
  type Direction,
  type SignalRead,
  type SignalVerdict,
  type WindowSample,
  bothResources,
  combineVerdicts,
  judgeSlo,
  judgeWindow,
  unreadable,
} from './resize-signals.ts';
import { podBudgetProblems } from './resize-budget.ts';
import {
  apiRefusal,
  nodeResizeSupport,
  podLevelResizeFeature,
  type ApiResizeSupport,
} from './resize-features.ts';
import {
  type DeferredSchedule,
  type PauseCause,
  type PausedState,
  type RejectedState,
  type ResizeState,
  type StateSealer,
  type StateTrust,
  readResizeState,
  stateAnnotations,
  withinPolicyBounds,
} from './resize-state.ts';
import { toStoredAmount } from '../lib/quantity.ts';

/** Samples of one signal for this pod (and container, for `$container` queries). */
export interface SignalReading {
  readonly signal: string;
  readonly container?: string;
  readonly samples?: readonly WindowSample[];
  /** Set when the query failed: the signal then holds. */
  readonly error?: string;
}

/**
 * The loop's memory of a pod's Deferred re-checks: the schedule is also stored on the pod
 * (`ResizeState.deferred`); this covers the passes before the view shows that write.
 */
export interface PodMemo {
  /**
   * Since when a signal or the SLO has been unreadable, as this process saw it; the time
   * is also stored on the pod (`ResizeState.unreadableSince`), which a restart keeps.
   */
  readonly unreadableSince?: number;
  /**
   * The unreadable time this process last wrote to the pod (null: cleared) and the
   * resourceVersion it wrote on: not written again until the view shows the pod moved.
   */
  readonly clockWrite?: { readonly since: number | null; readonly on: string };
  readonly deferredGeneration?: number;
  readonly deferredChecks?: number;
  readonly nextDeferredCheck?: number;
}

export interface PodResizeInput {
  readonly policy: ResizePolicy;
  readonly commit: string;
  readonly pod: V1Pod;
  readonly node?: V1Node;
  readonly quotas?: readonly V1ResourceQuota[];
  readonly readings: readonly SignalReading[];
  readonly slo?: { readonly samples?: readonly WindowSample[]; readonly error?: string };
  readonly approvals: readonly Approval[];
  readonly now: number;
  /** Resolution of the samples (range-query step). */
  readonly stepMs: number;
  readonly memo?: PodMemo;
  /**
   * The keys that seal and verify the state stored on the pod (`tollgate run`), or
   * `preview` (`tollgate plan`: read unverified, never written).
   */
  readonly stateKeys: StateTrust;
  /** The API server refused this pod's last resize write (403/422), as the loop saw it. */
  readonly refused?: { readonly code?: number; readonly message: string };
  /** What the API server answered about resize (discovery, dry-run); undefined = not asked. */
  readonly api?: ApiResizeSupport;
}

export interface PlannedWrite {
  readonly decisionId: string;
  readonly op: WriteOperation;
  readonly priority: number;
  readonly deadline: number;
}

export interface PodResizePlan {
  /** Decisions that write carry outcome `pending`; the others `recorded`. */
  readonly decisions: readonly Decision[];
  /** In order; each uses the resourceVersion the previous one returned. */
  readonly writes: readonly PlannedWrite[];
  readonly memo?: PodMemo;
  /** Why nothing was decided (for logs and tests), when nothing was. */
  readonly skip?: string;
  /** Set when the pod is paused after this plan (for the paused-workloads gauge). */
  readonly paused: boolean;
  /** Set when this plan pauses the workload: why. */
  readonly pauseCause?: PauseCause;
  /** Set on a Defer re-check (not a revert), for `tollgate_resizes_total{result="deferred"}`. */
  readonly deferredCheck?: boolean;
  /** Pending condition seen on the pod, for the pending gauge. */
  readonly pending?: 'Deferred' | 'Infeasible';
  /**
   * Set on a Hold (a step-down held because a signal or the SLO cannot be read): what
   * it was held on, without error texts, so the loop records it once per change.
   */
  readonly holdKey?: string;
  /** What a Hold is on: an unreadable signal or SLO, or a ResourceQuota without room. */
  readonly holdCause?: 'unreadable' | 'quota';
  /**
   * Stored state whose seal did not verify, ignored by this plan: a recorded decision
   * (no write) and what was rejected, for the loop to record once per change, meter and
   * raise an Event on.
   */
  readonly stateRejected?: {
    readonly decision: Decision;
    readonly rejected: readonly RejectedState[];
  };
}

export const resizePriority = {
  rollback: 100,
  revert: 80,
  up: 60,
  annotate: 50,
  down: 40,
} as const;

/** Backoff between Defer re-checks: 5 s doubling, capped at a quarter of the deadline. */
export function deferredBackoffMs(checks: number, deferredTimeoutMs: number): number {
  const cap = Math.max(1000, Math.floor(deferredTimeoutMs / 4));
  return Math.min(cap, 5000 * 2 ** checks);
}

interface Context {
  readonly input: PodResizeInput;
  readonly desired: PodResources;
  readonly actual: PodResources;
  readonly stored: ReturnType<typeof readResizeState>;
  readonly generation: number;
  /** A container OOMKilled after tollgate lowered memory, with no last good to roll back to. */
  readonly oomAfterDecrease?: string;
  /** Since when a signal or the SLO has been unreadable for this pod; undefined = readable. */
  readonly unreadableSince?: number;
}

function condition(pod: V1Pod, type: string): V1PodCondition | undefined {
  return pod.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

function decision(
  ctx: Context,
  kind: DecisionKind,
  reason: string,
  inputs: ConditionInput[],
  writes: boolean,
): Decision {
  const { pod, policy, commit, now } = ctx.input;
  const meta = pod.metadata ?? {};
  const uid = meta.uid ?? '';
  const resourceVersion = meta.resourceVersion ?? '';
  return {
    // Every id carries the time: a record without a write repeats on one resourceVersion
    // (Defer re-checks), and so does a write whose intent was never pushed (strict audit:
    // the writer records it cancelled and the next pass decides it again).
    id: `resize:${kind}:${uid}:${resourceVersion}:${now}`,
    at: now,
    loop: 'resize',
    kind,
    tenant: policy.tenant,
    target: { namespace: meta.namespace ?? '', name: meta.name ?? '', uid, resourceVersion },
    policy: { commit, file: policy.source.file, name: policy.name },
    inputs,
    reason,
    outcome: writes ? { result: 'pending' } : { result: 'recorded' },
  };
}

/** What seals the state this plan stores on the pod. */
function sealerOf(ctx: Context): StateSealer {
  return { trust: ctx.input.stateKeys, uid: ctx.input.pod.metadata?.uid ?? '' };
}

function resourcesInput(name: string, resources: PodResources): ConditionInput {
  return { condition: name, met: true, value: toRecord(resources) };
}

function nothing(skip: string, paused = false, memo?: PodMemo): PodResizePlan {
  return { decisions: [], writes: [], skip, paused, ...(memo ? { memo } : {}) };
}

/** The resize operation that moves the pod from `from` to `to` (only changed units). */
export function resizeOperation(from: PodResources, to: PodResources): WriteOperation {
  const containers = Object.entries(to.containers)
    .filter(([name, req]) => !sameRequirements(from.containers[name], req))
    .map(([name, req]) => ({ name, resources: toResourceList(req) }));
  const podChanged = to.pod && !sameRequirements(from.pod, to.pod);
  return {
    type: 'resize',
    containers,
    ...(podChanged && to.pod ? { pod: toResourceList(to.pod) } : {}),
  };
}

function restartCounts(pod: V1Pod): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of pod.status?.containerStatuses ?? []) out[s.name] = s.restartCount ?? 0;
  return out;
}

function directionsBetween(
  from: PodResources,
  to: PodResources,
): Partial<Record<ResizableResource, 'up' | 'down'>> {
  const out: Partial<Record<ResizableResource, 'up' | 'down'>> = {};
  const before = podRequests(from);
  const after = podRequests(to);
  for (const r of resizableResources) {
    const a = before[r];
    const b = after[r];
    if (a !== undefined && b !== undefined && a !== b) out[r] = b > a ? 'up' : 'down';
  }
  return out;
}

/** Writes that request `to`: the state annotation (and others) first, then the resize. */
function requestWrites(
  ctx: Context,
  decisionId: string,
  to: PodResources,
  state: ResizeState,
  priority: number,
  extra: Parameters<typeof stateAnnotations>[1] = {},
): PlannedWrite[] {
  const deadline = ctx.input.now + Math.max(60_000, ctx.input.policy.cooldownMs);
  return [
    {
      decisionId,
      op: { type: 'annotate', annotations: stateAnnotations(sealerOf(ctx), { ...extra, state }) },
      priority,
      deadline,
    },
    { decisionId, op: resizeOperation(ctx.desired, to), priority, deadline },
  ];
}

function newState(
  ctx: Context,
  to: PodResources,
  attempts: number,
  base: PodResources,
  infeasible?: ResizeState['infeasible'],
): ResizeState {
  return {
    target: toRecord(to),
    requestedAt: ctx.input.now,
    direction: directionsBetween(base, to),
    attempts,
    restarts: restartCounts(ctx.input.pod),
    ...(infeasible ? { infeasible } : {}),
    ...withClock(ctx),
  };
}

/** The unreadable time to keep in a state tollgate writes: the one in force, if any. */
function withClock(ctx: Context): Pick<ResizeState, 'unreadableSince'> {
  return ctx.unreadableSince === undefined ? {} : { unreadableSince: ctx.unreadableSince };
}

function matchingResumeApprovals(ctx: Context): Approval[] {
  const { policy, pod, approvals, now } = ctx.input;
  return approvals.filter(
    (a) =>
      a.action === 'Resume' &&
      a.target.kind === 'ResizePolicy' &&
      a.target.name === policy.name &&
      (a.target.namespace === undefined || a.target.namespace === pod.metadata?.namespace) &&
      (a.target.pod === undefined || a.target.pod === pod.metadata?.name) &&
      (a.expiresAt === undefined || a.expiresAt > now),
  );
}

function oomKilledSinceRequest(ctx: Context): string | undefined {
  const { state } = ctx.stored;
  if (state.direction?.memory !== 'down' || state.requestedAt === undefined) return undefined;
  for (const s of ctx.input.pod.status?.containerStatuses ?? []) {
    const terminated = s.lastState?.terminated ?? s.state?.terminated;
    if (terminated?.reason !== 'OOMKilled') continue;
    const before = state.restarts?.[s.name];
    const restartedSince = before !== undefined && (s.restartCount ?? 0) > before;
    const finishedAt = timestampMs(terminated.finishedAt);
    const finishedSince = finishedAt !== undefined && finishedAt >= state.requestedAt;
    if (restartedSince || finishedSince) return s.name;
  }
  return undefined;
}

/**
 * Rollback to the last good resources and, per policy, Pause. Without a last good one
 * to trust (never stored, or rejected): undefined, so the decision goes on, and an OOM
 * kill then asks for one memory step up within bounds like any other.
 */
function rollback(ctx: Context, why: string, inputs: ConditionInput[]): PodResizePlan | undefined {
  const { policy } = ctx.input;
  const lastGood = ctx.stored.lastGood ? fromRecord(ctx.stored.lastGood) : undefined;
  if (!lastGood) return undefined;
  const to = mergeOnto(ctx.desired, lastGood);
  const pause = policy.rollback.pauseForReview;
  const decisions: Decision[] = [];
  const rollbackDecision = decision(
    ctx,
    'Rollback',
    `${why}: restoring the last good resources`,
    [
      ...inputs,
      ...(ctx.stored.problems.length > 0
        ? [{ condition: 'StoredState', met: false, value: ctx.stored.problems }]
        : []),
      resourcesInput('current', ctx.desired),
      resourcesInput('actual', ctx.actual),
      resourcesInput('target', to),
    ],
    true,
  );
  decisions.push(rollbackDecision);
  const paused = pause ? pausedState(ctx, why, 'rollback') : undefined;
  if (pause)
    decisions.push(
      pauseDecision(ctx, why, 'rollback', [
        { condition: 'rollback', met: true, value: { reason: why } },
      ]),
    );
  const state = newState(ctx, to, 0, ctx.desired);
  const writes = sameResources(ctx.desired, to)
    ? [
        {
          decisionId: rollbackDecision.id,
          op: {
            type: 'annotate' as const,
            annotations: stateAnnotations(sealerOf(ctx), { state, ...(paused ? { paused } : {}) }),
          },
          priority: resizePriority.rollback,
          deadline: ctx.input.now + 60_000,
        },
      ]
    : requestWrites(
        ctx,
        rollbackDecision.id,
        to,
        state,
        resizePriority.rollback,
        paused ? { paused } : {},
      );
  return {
    decisions,
    writes,
    paused: pause,
    ...(pause ? { pauseCause: 'rollback' as const } : {}),
  };
}

function pausedState(ctx: Context, why: string, cause: PauseCause): PausedState {
  return {
    reason: why,
    since: ctx.input.now,
    cause,
    approvalsSeen: matchingResumeApprovals(ctx).map((a) => a.name),
  };
}

function pauseDecision(
  ctx: Context,
  why: string,
  cause: PauseCause,
  inputs: ConditionInput[],
): Decision {
  return decision(
    ctx,
    'Pause',
    `${why}: automation paused for ${ctx.input.policy.name} until an Approval (action Resume) resumes it`,
    [...inputs, { condition: 'pause', met: true, value: { cause } }],
    true,
  );
}

/** Pause without a rollback: the pause stored on the pod, nothing resized. */
function pauseWorkload(
  ctx: Context,
  why: string,
  cause: Exclude<PauseCause, 'rollback'>,
  inputs: ConditionInput[],
): PodResizePlan {
  const d = pauseDecision(ctx, why, cause, [
    ...inputs,
    resourcesInput('current', ctx.desired),
    resourcesInput('actual', ctx.actual),
  ]);
  return {
    decisions: [d],
    writes: [
      {
        decisionId: d.id,
        op: {
          type: 'annotate',
          annotations: stateAnnotations(sealerOf(ctx), { paused: pausedState(ctx, why, cause) }),
        },
        priority: resizePriority.revert,
        deadline: ctx.input.now + 60_000,
      },
    ],
    paused: true,
    pauseCause: cause,
  };
}

/** Containers restarted `pause.restarts` times or more since tollgate's last resize: Pause. */
function pauseOnRestarts(ctx: Context): PodResizePlan | undefined {
  const { state } = ctx.stored;
  if (!state.restarts || state.requestedAt === undefined) return undefined;
  let since = 0;
  for (const s of ctx.input.pod.status?.containerStatuses ?? []) {
    const before = state.restarts[s.name];
    if (before !== undefined) since += Math.max(0, (s.restartCount ?? 0) - before);
  }
  const limit = ctx.input.policy.pause.restarts;
  if (since < limit) return undefined;
  return pauseWorkload(
    ctx,
    `containers restarted ${since} times since tollgate's last resize (pause.onRestarts ${limit})`,
    'restarts',
    [{ condition: 'restarts', met: false, value: { since, limit, before: state.restarts } }],
  );
}

/**
 * A tollgate resize the kubelet has neither carried out nor answered for
 * `pause.stuckMs` since the request: Pause; else undefined (keep waiting).
 */
function pauseIfStuck(ctx: Context, waiting: string): PodResizePlan | undefined {
  const { requestedAt } = ctx.stored.state;
  const limit = ctx.input.policy.pause.stuckMs;
  if (requestedAt === undefined || ctx.input.now - requestedAt < limit) return undefined;
  const elapsedMs = ctx.input.now - requestedAt;
  return pauseWorkload(
    ctx,
    `the resize requested ${elapsedMs} ms ago is still not carried out (${waiting}; pause.onStuckFor ${limit} ms)`,
    'stuck',
    [{ condition: 'stuck', met: false, value: { elapsedMs, limitMs: limit, waiting } }],
  );
}

/** A signal or the SLO unreadable for `pause.unreadableMs` (stored on the pod, or as this process saw it): Pause. */
function pauseOnUnreadable(ctx: Context): PodResizePlan | undefined {
  const since = ctx.unreadableSince;
  const limit = ctx.input.policy.pause.unreadableMs;
  if (since === undefined || ctx.input.now - since < limit) return undefined;
  const unreadable = unreadableInputs(ctx, verdictsFor(ctx));
  return pauseWorkload(
    ctx,
    `${describeUnreadable(unreadable)} since ${new Date(since).toISOString()} (pause.onUnreadableFor ${limit} ms)`,
    'unreadable',
    [
      {
        condition: 'unreadable',
        met: false,
        value: { since, limitMs: limit, signals: unreadable.map((u) => ({ ...u })) },
      },
    ],
  );
}

/** `partial` laid over `base`: units missing from `partial` keep `base`'s values. */
function mergeOnto(base: PodResources, partial: PodResources): PodResources {
  const containers: Record<string, Requirements> = { ...base.containers };
  for (const [name, req] of Object.entries(partial.containers)) {
    if (containers[name]) containers[name] = req;
  }
  const pod = partial.pod ?? base.pod;
  return pod ? { containers, pod } : { containers };
}

function boundsFor(policy: ResizePolicy, unit: string | undefined): ResourceBounds | undefined {
  return unit === undefined ? policy.pod : policy.containers[unit];
}

/** Each unit's requirements with every changed resource moved halfway back from `target` toward `actual`. */
function retreat(policy: ResizePolicy, target: PodResources, actual: PodResources): PodResources {
  const back = (
    req: Requirements,
    from: Requirements | undefined,
    bounds?: ResourceBounds,
  ): Requirements => {
    let out = req;
    for (const r of resizableResources) {
      const t = req.requests[r];
      const a = from?.requests[r];
      const b: Bounds | undefined = bounds?.[r];
      if (t === undefined || a === undefined || t === a) continue;
      // Halfway back toward what runs: the node refused the whole step, maybe not half
      // of it. A change smaller than a quarter step is not worth a resize; give up there.
      const halfway = a + Math.round((t - a) / 2);
      const minimum = (b?.step ?? Math.abs(t - a)) / 4;
      out = moveRequest(out, r, Math.abs(halfway - a) < minimum ? a : halfway);
    }
    return out;
  };
  const containers: Record<string, Requirements> = {};
  for (const [name, req] of Object.entries(target.containers)) {
    containers[name] = back(req, actual.containers[name], boundsFor(policy, name));
  }
  const pod = target.pod ? back(target.pod, actual.pod, policy.pod) : undefined;
  return pod ? { containers, pod } : { containers };
}

/**
 * A target that cannot fit the node: reported by the kubelet (PodResizePending
 * Infeasible) or refused by the API server before it reached the kubelet (since 1.36
 * kube-apiserver rejects a pods/resize beyond the node's allocatable with 403). Either
 * way: recorded, then a target halfway back toward what runs is tried while attempts
 * last; after that the workload is marked and scale-up left alone.
 */
function handleInfeasible(
  ctx: Context,
  refusal: {
    readonly by: 'kubelet' | 'api';
    readonly message: string;
    /** The target that did not fit. */
    readonly target: PodResources;
    /** What the pod runs with: where a failed retreat returns to. */
    readonly running: PodResources;
  },
): PodResizePlan {
  const { policy, now } = ctx.input;
  const attempts = ctx.stored.state.attempts + 1;
  const inputs: ConditionInput[] = [
    refusal.by === 'kubelet'
      ? {
          condition: 'PodResizePending',
          met: false,
          value: { reason: 'Infeasible', message: refusal.message },
        }
      : { condition: 'APIRefused', met: false, value: { message: refusal.message } },
    {
      condition: 'attempts',
      met: attempts < policy.maxAttempts,
      value: { attempts, maxAttempts: policy.maxAttempts },
    },
    resourcesInput('refusedTarget', refusal.target),
    resourcesInput('actual', ctx.actual),
  ];
  const infeasible = decision(
    ctx,
    'Infeasible',
    refusal.by === 'kubelet'
      ? `the kubelet reports the resize Infeasible: ${refusal.message}`
      : `the API server refused the resize: ${refusal.message}`,
    inputs,
    false,
  );
  const smaller = retreat(policy, refusal.target, refusal.running);
  const base = ctx.stored.lastGood
    ? mergeOnto(ctx.actual, fromRecord(ctx.stored.lastGood))
    : ctx.actual;
  const writesTo = (id: string, to: PodResources, state: ResizeState): PlannedWrite[] =>
    sameResources(to, ctx.desired)
      ? [
          {
            decisionId: id,
            op: { type: 'annotate', annotations: stateAnnotations(sealerOf(ctx), { state }) },
            priority: resizePriority.revert,
            deadline: now + 60_000,
          },
        ]
      : requestWrites(ctx, id, to, state, resizePriority.revert);
  if (attempts < policy.maxAttempts && !sameResources(smaller, refusal.running)) {
    const resize = decision(
      ctx,
      'Resize',
      `Infeasible target; trying halfway between it and the actual resources (attempt ${attempts} of ${policy.maxAttempts})`,
      [...inputs, resourcesInput('target', smaller)],
      true,
    );
    return {
      decisions: [infeasible, resize],
      writes: writesTo(resize.id, smaller, newState(ctx, smaller, attempts, base)),
      paused: false,
      pending: 'Infeasible',
    };
  }
  const why =
    attempts >= policy.maxAttempts
      ? `attempts exhausted (${attempts} of ${policy.maxAttempts})`
      : 'no smaller target within bounds';
  const mark = decision(
    ctx,
    'Infeasible',
    `${why}: desired resources kept at the actual ones; scale-up left alone until the signal falls`,
    [...inputs, resourcesInput('target', refusal.running)],
    true,
  );
  const state = newState(ctx, refusal.running, attempts, base, {
    at: now,
    reason: refusal.message || why,
  });
  return {
    decisions: [infeasible, mark],
    writes: writesTo(mark.id, refusal.running, state),
    paused: false,
    pending: 'Infeasible',
  };
}

function handleWaiting(
  ctx: Context,
  reason: 'Deferred' | 'Error',
  cond: V1PodCondition,
): PodResizePlan {
  const { policy, now } = ctx.input;
  const requestedAt = ctx.stored.state.requestedAt ?? now;
  const elapsed = now - requestedAt;
  const pending = reason === 'Deferred' ? ('Deferred' as const) : undefined;
  const inputs: ConditionInput[] = [
    {
      condition: reason === 'Deferred' ? 'PodResizePending' : 'PodResizeInProgress',
      met: false,
      value: {
        reason,
        message: cond.message ?? '',
        observedGeneration: cond.observedGeneration ?? null,
      },
    },
    {
      condition: 'deferredTimeout',
      met: elapsed < policy.deferredTimeoutMs,
      value: { elapsedMs: elapsed, deferredTimeoutMs: policy.deferredTimeoutMs },
    },
    resourcesInput('desired', ctx.desired),
    resourcesInput('actual', ctx.actual),
  ];
  if (elapsed >= policy.deferredTimeoutMs) {
    const attempts = ctx.stored.state.attempts + 1;
    const d = decision(
      ctx,
      'Defer',
      `${reason} for ${elapsed} ms, past deferredTimeout (${policy.deferredTimeoutMs} ms): desired resources returned to the actual ones`,
      [...inputs, resourcesInput('target', ctx.actual)],
      true,
    );
    const base = ctx.stored.lastGood
      ? mergeOnto(ctx.actual, fromRecord(ctx.stored.lastGood))
      : ctx.actual;
    const state = newState(ctx, ctx.actual, attempts, base);
    return {
      decisions: [d],
      writes: requestWrites(ctx, d.id, ctx.actual, state, resizePriority.revert),
      paused: false,
      ...(pending ? { pending } : {}),
    };
  }
  const schedule = currentSchedule(ctx);
  if (schedule && now < schedule.nextCheckAt) {
    return {
      ...nothing(`${reason}; next check at ${schedule.nextCheckAt}`, false, memoOf(schedule)),
      ...(pending ? { pending } : {}),
    };
  }
  const checks = schedule ? schedule.checks + 1 : 0;
  const next = now + deferredBackoffMs(checks, policy.deferredTimeoutMs);
  const deferred: DeferredSchedule = {
    generation: ctx.generation,
    checks,
    nextCheckAt: next,
    reason,
  };
  const d = decision(
    ctx,
    'Defer',
    reason === 'Deferred'
      ? `the kubelet deferred the resize (no room on the node yet); it retries as room appears, re-checked at ${new Date(next).toISOString()}, until ${policy.deferredTimeoutMs} ms after the request`
      : `the kubelet failed to actuate the resize: ${cond.message ?? 'no message'}; re-checked with backoff until the deadline`,
    [...inputs, { condition: 'schedule', met: true, value: deferred }],
    true,
  );
  // The schedule goes on the pod (sealed), so a restarted tollgate neither re-checks
  // early nor starts the backoff again.
  const { unreadableSince: _stored, ...kept } = ctx.stored.state;
  const state: ResizeState = { ...kept, deferred, ...withClock(ctx) };
  return {
    decisions: [d],
    writes: [
      {
        decisionId: d.id,
        op: { type: 'annotate', annotations: stateAnnotations(sealerOf(ctx), { state }) },
        priority: resizePriority.annotate,
        deadline: now + 60_000,
      },
    ],
    paused: false,
    deferredCheck: true,
    memo: memoOf(deferred),
    ...(pending ? { pending } : {}),
  };
}

/**
 * The re-check schedule in force for the pod's current generation: the one stored on
 * the pod or the loop's memory of a later check (the view may not show the last write
 * yet), whichever is further along.
 */
function currentSchedule(ctx: Context): DeferredSchedule | undefined {
  const { memo } = ctx.input;
  const stored = ctx.stored.state.deferred;
  const fromStore = stored?.generation === ctx.generation ? stored : undefined;
  const fromMemo =
    memo?.deferredGeneration === ctx.generation && memo.nextDeferredCheck !== undefined
      ? {
          generation: ctx.generation,
          checks: memo.deferredChecks ?? 0,
          nextCheckAt: memo.nextDeferredCheck,
        }
      : undefined;
  if (!fromMemo) return fromStore;
  if (!fromStore || fromMemo.checks > fromStore.checks)
    return { ...fromMemo, reason: fromStore?.reason ?? 'Deferred' };
  return fromStore;
}

function memoOf(schedule: DeferredSchedule): PodMemo {
  return {
    deferredGeneration: schedule.generation,
    deferredChecks: schedule.checks,
    nextDeferredCheck: schedule.nextCheckAt,
  };
}

/** The SLO as read for this decision, when the policy has one. */
function sloInputs(ctx: Context): ConditionInput[] {
  const slo = sloRead(ctx);
  if (!slo) return [];
  return [
    {
      condition: 'SLO',
      met: slo.read === 'ok',
      value: {
        read: slo.read,
        samples: slo.samples,
        ...(slo.error === undefined ? {} : { error: slo.error }),
      },
    },
  ];
}

/**
 * A step not taken, recorded (no write) with the pass's inputs, and a key the loop
 * uses to record it once per change of what it is held on.
 */
function hold(
  ctx: Context,
  reason: string,
  inputs: ConditionInput[],
  holdKey: string,
  holdCause: 'unreadable' | 'quota',
): PodResizePlan {
  const d = decision(
    ctx,
    'Hold',
    reason,
    [...inputs, resourcesInput('current', ctx.desired), resourcesInput('actual', ctx.actual)],
    false,
  );
  return { decisions: [d], writes: [], paused: false, holdKey, holdCause };
}

/** A step-down held because a signal or the SLO cannot be read. */
function holdStepDown(ctx: Context, stepped: SteppedTarget, inputs: ConditionInput[]) {
  const reason = `step-down of ${stepped.heldDown.join(', ')} held: ${describeUnreadable(stepped.unreadable)} (an unreadable signal never lets a pod shrink)`;
  const on = stepped.unreadable.map((u) => `${u.name}:${u.read}`).join(',');
  return hold(ctx, reason, inputs, `${stepped.heldDown.join(',')}|${on}`, 'unreadable');
}

/** A step the namespace ResourceQuota has no room for (tried again every pass). */
function holdForQuota(ctx: Context, stepped: SteppedTarget, inputs: ConditionInput[]) {
  const reason = `step held by quota: ${stepped.notes.join('; ')}`;
  return hold(ctx, reason, inputs, `quota|${stepped.quotaHeld.join(',')}`, 'quota');
}

function verdictsFor(ctx: Context): SignalVerdict[] {
  const { policy, now, stepMs, readings } = ctx.input;
  const window = {
    startMs: now - policy.windowMs,
    endMs: now,
    stepMs,
    hysteresis: policy.hysteresis,
  };
  const out: SignalVerdict[] = [];
  for (const reading of readings) {
    const signal = policy.signals.find((s) => s.name === reading.signal);
    if (!signal) continue;
    if (reading.error !== undefined || !reading.samples) {
      out.push({
        signal: signal.name,
        ...(reading.container === undefined ? {} : { container: reading.container }),
        direction: 'hold',
        covered: false,
        read: reading.error === undefined ? 'no-samples' : 'error',
        ...(reading.error === undefined ? {} : { error: reading.error }),
        resources: signal.resources ?? bothResources,
        samples: 0,
        reason: reading.error === undefined ? 'no samples' : `query failed: ${reading.error}`,
      });
      continue;
    }
    out.push(judgeWindow(signal, reading.samples, window, reading.container));
  }
  return out;
}

function verdictInput(v: SignalVerdict): ConditionInput {
  return {
    condition:
      v.container === undefined ? `signal:${v.signal}` : `signal:${v.signal}/${v.container}`,
    met: v.direction !== 'hold',
    value: {
      direction: v.direction,
      read: v.read,
      ...(v.error === undefined ? {} : { error: v.error }),
      resources: [...v.resources],
      covered: v.covered,
      samples: v.samples,
      ...(v.min === undefined ? {} : { min: v.min, max: v.max, last: v.last }),
      ...(v.upThreshold === undefined ? {} : { upThreshold: v.upThreshold }),
      ...(v.downThreshold === undefined ? {} : { downThreshold: v.downThreshold }),
      reason: v.reason,
    },
  };
}

function nodeAllocatable(node: V1Node | undefined): Amounts | undefined {
  const list = node?.status?.allocatable;
  if (!list) return undefined;
  const out: Amounts = {};
  for (const r of resizableResources)
    if (list[r] !== undefined) out[r] = toStoredAmount(r, list[r]);
  return out;
}

/** Remaining room per quota key, for the keys resize can change. */
function quotaHeadroom(quotas: readonly V1ResourceQuota[]): {
  key: string;
  resource: ResizableResource;
  kind: 'requests' | 'limits';
  room: number;
  quota: string;
}[] {
  const keys: Record<string, { resource: ResizableResource; kind: 'requests' | 'limits' }> = {
    cpu: { resource: 'cpu', kind: 'requests' },
    'requests.cpu': { resource: 'cpu', kind: 'requests' },
    memory: { resource: 'memory', kind: 'requests' },
    'requests.memory': { resource: 'memory', kind: 'requests' },
    'limits.cpu': { resource: 'cpu', kind: 'limits' },
    'limits.memory': { resource: 'memory', kind: 'limits' },
  };
  const out = [];
  for (const quota of quotas) {
    const hard = quota.status?.hard ?? quota.spec?.hard ?? {};
    const used = quota.status?.used ?? {};
    for (const [key, text] of Object.entries(hard)) {
      const meaning = keys[key];
      if (!meaning) continue;
      const room =
        toStoredAmount(meaning.resource, text) - toStoredAmount(meaning.resource, used[key] ?? '0');
      out.push({ key, ...meaning, room, quota: quota.metadata?.name ?? '' });
    }
  }
  return out;
}

function withUnit(
  resources: PodResources,
  unit: string | undefined,
  req: Requirements,
): PodResources {
  if (unit === undefined) return { containers: resources.containers, pod: req };
  const containers = { ...resources.containers, [unit]: req };
  return resources.pod ? { containers, pod: resources.pod } : { containers };
}

/** `target` with resource `r` of every unit put back to its value in `current`. */
export function revertResource(
  target: PodResources,
  current: PodResources,
  r: ResizableResource,
): PodResources {
  const put = (t: Requirements, c: Requirements | undefined): Requirements => {
    if (!c) return t;
    return {
      requests: { ...t.requests, [r]: c.requests[r] },
      limits: { ...t.limits, [r]: c.limits[r] },
    };
  };
  const clean = (req: Requirements): Requirements => ({
    requests: Object.fromEntries(Object.entries(req.requests).filter(([, v]) => v !== undefined)),
    limits: Object.fromEntries(Object.entries(req.limits).filter(([, v]) => v !== undefined)),
  });
  const containers: Record<string, Requirements> = {};
  for (const [name, req] of Object.entries(target.containers)) {
    containers[name] = clean(put(req, current.containers[name]));
  }
  const pod = target.pod ? clean(put(target.pod, current.pod)) : undefined;
  return pod ? { containers, pod } : { containers };
}

/** A signal or the SLO that cannot be read: it holds every step-down of the pod. */
interface UnreadableInput {
  readonly name: string;
  readonly read: SignalRead;
  readonly error?: string;
}

/** How the SLO was read over its `for` window; undefined without an SLO. */
function sloRead(ctx: Context): { read: SignalRead; error?: string; samples: number } | undefined {
  const { policy, slo, now } = ctx.input;
  if (!policy.slo) return undefined;
  if (slo?.error !== undefined) return { read: 'error', error: slo.error, samples: 0 };
  const from = now - policy.slo.forMs;
  const samples = (slo?.samples ?? []).filter(
    (x) => x.at >= from && x.at <= now && Number.isFinite(x.value),
  ).length;
  return { read: samples === 0 ? 'no-samples' : 'ok', samples };
}

function unreadableInputs(ctx: Context, verdicts: readonly SignalVerdict[]): UnreadableInput[] {
  const out: UnreadableInput[] = verdicts
    .filter((v) => unreadable(v.read))
    .map((v) => ({
      name: v.container === undefined ? v.signal : `${v.signal}/${v.container}`,
      read: v.read,
      ...(v.error === undefined ? {} : { error: v.error }),
    }));
  const slo = sloRead(ctx);
  if (slo && unreadable(slo.read))
    out.push({
      name: 'SLO',
      read: slo.read,
      ...(slo.error === undefined ? {} : { error: slo.error }),
    });
  return out;
}

function describeUnreadable(list: readonly UnreadableInput[]): string {
  return list
    .map(
      (u) =>
        `${u.name} ${u.read === 'error' ? `failed (${u.error ?? 'no message'})` : 'has no samples'}`,
    )
    .join(', ');
}

/**
 * A container of `unit` (every container, for the pod-level unit) OOMKilled inside the
 * window and after tollgate's last request: a signal for more memory. (An OOM kill
 * after tollgate lowered memory is a rollback instead, decided earlier.)
 */
function oomKilledRecently(ctx: Context, unit: string | undefined): string | undefined {
  const { pod, policy, now } = ctx.input;
  const afterDecrease = ctx.oomAfterDecrease;
  if (afterDecrease !== undefined && (unit === undefined || unit === afterDecrease))
    return afterDecrease;
  const since = Math.max(now - policy.windowMs, ctx.stored.state.requestedAt ?? -Infinity);
  for (const s of pod.status?.containerStatuses ?? []) {
    if (unit !== undefined && s.name !== unit) continue;
    const terminated = s.state?.terminated ?? s.lastState?.terminated;
    if (terminated?.reason !== 'OOMKilled') continue;
    const finishedAt = timestampMs(terminated.finishedAt);
    if (finishedAt !== undefined && finishedAt > since && finishedAt <= now) return s.name;
  }
  return undefined;
}

/** The direction of one resource of one unit, from the signals that speak for it (and OOM kills). */
function resourceDirection(
  ctx: Context,
  verdicts: readonly SignalVerdict[],
  unit: string | undefined,
  r: ResizableResource,
): { direction: Direction; cause?: string } {
  const relevant = verdicts.filter(
    (v) => (v.container === undefined || v.container === unit) && v.resources.includes(r),
  );
  const direction = combineVerdicts(relevant);
  if (r === 'memory' && direction !== 'up') {
    const oom = oomKilledRecently(ctx, unit);
    if (oom) return { direction: 'up', cause: `container ${oom} was OOMKilled` };
  }
  return { direction };
}

/** Why a restart-requiring change of `r` on `unit` may not be made; undefined when it may. */
function restartBlocked(
  ctx: Context,
  unit: string | undefined,
  r: ResizableResource,
): string | undefined {
  if (ctx.input.policy.allowRestart) return undefined;
  const containers = ctx.input.pod.spec?.containers ?? [];
  const affected = unit === undefined ? containers : containers.filter((c) => c.name === unit);
  const restarting = affected.find((c) => restartPolicyOf(c, r) === 'RestartContainer');
  if (!restarting) return undefined;
  return `resizePolicy of container ${restarting.name} is RestartContainer for ${r} and the policy does not allow restarts`;
}

interface SteppedTarget {
  readonly target: PodResources;
  /** Why a resource did not move (or moved less). */
  readonly notes: string[];
  /** Per unit and resource (`app cpu`, `(pod) memory`). */
  readonly directions: Record<string, Direction>;
  /** Resources whose step-down was held because a signal or the SLO cannot be read. */
  readonly heldDown: string[];
  readonly unreadable: readonly UnreadableInput[];
  /** Steps not taken for lack of quota room: `cpu requests.cpu team-quota`. */
  readonly quotaHeld: string[];
}

/** Steps every bounded resource of every unit in its own direction; notes why any did not move. */
function stepTarget(ctx: Context, verdicts: readonly SignalVerdict[]): SteppedTarget {
  const { policy } = ctx.input;
  const notes: string[] = [];
  const directions: Record<string, Direction> = {};
  const heldDown: string[] = [];
  const quotaHeld: string[] = [];
  const blocking = unreadableInputs(ctx, verdicts);
  let target = ctx.desired;
  const units: (string | undefined)[] = Object.keys(policy.containers).filter(
    (n) => ctx.desired.containers[n],
  );
  if (policy.pod && ctx.desired.pod) {
    const support = ctx.input.node ? nodeResizeSupport(ctx.input.node) : undefined;
    const refused = apiRefusal(ctx.input.api).podLevel;
    if (support && !support.podLevel)
      notes.push(
        `(pod): node ${support.node} does not declare ${podLevelResizeFeature}, so pod-level resources are left alone`,
      );
    else if (refused) notes.push(`(pod): ${refused}, so pod-level resources are left alone`);
    else units.push(undefined);
  }
  for (const unit of units) {
    const label = unit ?? '(pod)';
    const bounds = boundsFor(policy, unit);
    const current = unit === undefined ? ctx.desired.pod : ctx.desired.containers[unit];
    if (!bounds || !current) continue;
    let req = current;
    for (const r of resizableResources) {
      const b = bounds[r];
      if (!b) continue;
      const wanted = resourceDirection(ctx, verdicts, unit, r);
      let direction = wanted.direction;
      if (direction === 'down' && blocking.length > 0) {
        heldDown.push(`${label} ${r}`);
        direction = 'hold';
      }
      directions[`${label} ${r}`] = direction;
      if (direction === 'hold') continue;
      if (wanted.cause) notes.push(`${label} ${r}: ${wanted.cause}`);
      const now = current.requests[r];
      if (now === undefined) {
        notes.push(
          `${label} ${r}: no request set, so none is added (that would change the QoS class)`,
        );
        continue;
      }
      if (direction === 'up' && ctx.stored.state.infeasible) {
        notes.push(
          `${label} ${r}: marked Infeasible (${ctx.stored.state.infeasible.reason}); scale-up left alone`,
        );
        continue;
      }
      const blocked = restartBlocked(ctx, unit, r);
      if (blocked) {
        notes.push(`${label} ${r}: ${blocked}`);
        continue;
      }
      const next = stepWithin(now, direction, b);
      if (next === now)
        notes.push(`${label} ${r}: at the ${direction === 'up' ? 'max' : 'min'} bound (${now})`);
      req = moveRequest(req, r, next);
    }
    target = withUnit(target, unit, req);
  }
  if (heldDown.length > 0)
    notes.push(`step-down of ${heldDown.join(', ')} held: ${describeUnreadable(blocking)}`);
  // The pod-level budget: a target the API server would refuse is never sent.
  for (const { resource, problem } of podBudgetProblems(target)) {
    notes.push(`${problem} (pod-level budget)`);
    target = revertResource(target, ctx.desired, resource);
  }
  // The node: a pod asking for more than the node can ever give is Infeasible by
  // construction, so such a step is not taken.
  const allocatable = nodeAllocatable(ctx.input.node);
  if (allocatable) {
    const after = podRequests(target);
    for (const r of resizableResources) {
      const cap = allocatable[r];
      const want = after[r];
      const before = podRequests(ctx.desired)[r];
      if (cap !== undefined && want !== undefined && want > cap && want > (before ?? 0)) {
        notes.push(`${r}: target ${want} beyond the node's allocatable ${cap}`);
        target = revertResource(target, ctx.desired, r);
      }
    }
  }
  for (const room of quotaHeadroom(ctx.input.quotas ?? [])) {
    const sum = room.kind === 'requests' ? podRequests : podLimits;
    const delta = (sum(target)[room.resource] ?? 0) - (sum(ctx.desired)[room.resource] ?? 0);
    if (delta > 0 && delta > room.room) {
      notes.push(
        `${room.resource}: increase ${delta} exceeds ResourceQuota ${room.quota} ${room.key} room ${room.room}`,
      );
      quotaHeld.push(`${room.resource} ${room.key} ${room.quota}`);
      target = revertResource(target, ctx.desired, room.resource);
    }
  }
  return { target, notes, directions, heldDown, unreadable: blocking, quotaHeld };
}

/** The resize plan for one pod. */
export function decidePodResize(input: PodResizeInput): PodResizePlan {
  const ready = resizableContext(input);
  if (!('input' in ready)) return ready;
  const ctx = withUnreadableSince(ready);
  if (ctx.stored.paused) return withStateRejected(ctx, resumeIfApproved(ctx, ctx.stored.paused));
  const plan =
    rollbackIfHarmed(ctx) ??
    pauseOnRestarts(ctx) ??
    followResizeInFlight(ctx) ??
    answerRefusal(ctx) ??
    pauseOnUnreadable(ctx) ??
    waitForCooldown(ctx) ??
    stepWithinBounds(ctx);
  return withStateRejected(ctx, withUnreadableClock(ctx, plan));
}

/**
 * The plan, its memo carrying since when signals have been unreadable (for the next
 * pass), and, when that time differs from the one stored on the pod, a write storing it
 * (or clearing it) so that a restart keeps counting.
 */
function withUnreadableClock(ctx: Context, plan: PodResizePlan): PodResizePlan {
  const since = plan.paused ? undefined : ctx.unreadableSince;
  const store = clockToStore(ctx, plan, since);
  const stored = store === undefined ? plan : storeClock(ctx, plan, store);
  const { unreadableSince: _old, clockWrite: _written, ...rest } = stored.memo ?? {};
  const clockWrite =
    store === undefined
      ? ctx.input.memo?.clockWrite
      : { since: store, on: ctx.input.pod.metadata?.resourceVersion ?? '' };
  const memo: PodMemo = {
    ...rest,
    ...(since === undefined ? {} : { unreadableSince: since }),
    ...(clockWrite === undefined ? {} : { clockWrite }),
  };
  const { memo: _plain, ...without } = stored;
  return Object.keys(memo).length > 0 ? { ...without, memo } : without;
}

/**
 * The unreadable time to store on the pod (null: clear it), when the stored one differs
 * from `since` and nothing else in the plan writes the state; undefined: no write. Not
 * in observe-only mode or `tollgate plan` (they write nothing), nor again while the view
 * has not shown this process's own write of it.
 */
function clockToStore(
  ctx: Context,
  plan: PodResizePlan,
  since: number | undefined,
): number | null | undefined {
  const { policy, stateKeys, memo, pod } = ctx.input;
  if (plan.paused || plan.writes.length > 0) return undefined;
  if (policy.mode === 'Observe' || stateKeys === 'preview') return undefined;
  const wanted = since ?? null;
  if ((ctx.stored.state.unreadableSince ?? null) === wanted) return undefined;
  const last = memo?.clockWrite;
  if (last?.since === wanted && last.on === pod.metadata?.resourceVersion) return undefined;
  return wanted;
}

/** The plan with a recorded write of the unreadable time to the pod's sealed state. */
function storeClock(ctx: Context, plan: PodResizePlan, since: number | null): PodResizePlan {
  const { policy, now } = ctx.input;
  const limit = policy.pause.unreadableMs;
  const stored = ctx.stored.state.unreadableSince;
  const signals = unreadableInputs(ctx, verdictsFor(ctx));
  const at = (ms: number | undefined) => new Date(ms ?? now).toISOString();
  const reason =
    since === null
      ? `signals and SLO read again (unreadable since ${at(stored)}): the pause.onUnreadableFor clock stops`
      : `${describeUnreadable(signals)} since ${at(since)}: the workload pauses if this lasts pause.onUnreadableFor (${limit} ms); the time is kept on the pod so a restart keeps counting`;
  const d = decision(
    ctx,
    'Hold',
    reason,
    [
      {
        condition: 'unreadable',
        met: since === null,
        value: {
          since: since ?? stored ?? null,
          limitMs: limit,
          signals: signals.map((u) => ({ ...u })),
        },
      },
    ],
    true,
  );
  const { unreadableSince: _old, ...kept } = ctx.stored.state;
  const state: ResizeState = since === null ? kept : { ...kept, unreadableSince: since };
  const write: PlannedWrite = {
    decisionId: d.id,
    op: { type: 'annotate', annotations: stateAnnotations(sealerOf(ctx), { state }) },
    priority: resizePriority.annotate,
    deadline: now + 60_000,
  };
  return { ...plan, decisions: [...plan.decisions, d], writes: [write] };
}

/** The plan, carrying a record of the stored state it ignored because its seal failed. */
function withStateRejected(ctx: Context, plan: PodResizePlan): PodResizePlan {
  const { rejected } = ctx.stored;
  if (rejected.length === 0) return plan;
  const d = decision(
    ctx,
    'Hold',
    `resize state on the pod ignored (${rejected.map((r) => `${r.annotation}: ${r.reason}`).join(', ')}): tollgate honours only state it sealed for this pod`,
    [{ condition: 'StoredState', met: false, value: rejected.map((r) => ({ ...r })) }],
    false,
  );
  return { ...plan, stateRejected: { decision: d, rejected } };
}

/**
 * The pod as decided on: running on a node, not terminating, not BestEffort, with the
 * resources the kubelet reports; else a plan that does nothing, with the reason.
 */
function resizableContext(input: PodResizeInput): Context | PodResizePlan {
  const { pod } = input;
  if (pod.metadata?.deletionTimestamp) return nothing('pod is terminating');
  if (!pod.spec?.nodeName || pod.status?.phase !== 'Running')
    return nothing('pod is not running on a node');
  const desired = desiredResources(pod);
  if (qosClass(desired) === 'BestEffort') return nothing('BestEffort pod: no resources to resize');
  const actual = actualResources(pod);
  if (!actual) return nothing('the kubelet has not reported container resources yet');
  const support = input.node ? nodeResizeSupport(input.node) : undefined;
  if (support && !support.containers)
    return nothing(`node ${support.node} cannot resize in place: ${support.why ?? ''}`);
  const api = apiRefusal(input.api).all;
  if (api) return nothing(`${api}: nothing is resized`);
  return {
    input,
    desired,
    actual,
    // Only state tollgate sealed for this pod is read back, and even that may not widen
    // a decision (see resize-state.ts).
    stored: withinPolicyBounds(readResizeState(pod, input.stateKeys), input.policy, desired),
    generation: pod.metadata?.generation ?? 0,
  };
}

/** The context with since when its signals have been unreadable (none while paused). */
function withUnreadableSince(ctx: Context): Context {
  if (ctx.stored.paused) return ctx;
  const unreadable = unreadableInputs(ctx, verdictsFor(ctx)).length > 0;
  if (!unreadable) return ctx;
  // The earliest known start: stored on the pod (kept across restarts) or remembered by
  // this process (its write may not be in the view yet); a time ahead of now is ignored.
  const known = [ctx.stored.state.unreadableSince, ctx.input.memo?.unreadableSince].filter(
    (t): t is number => t !== undefined && t <= ctx.input.now,
  );
  return { ...ctx, unreadableSince: known.length > 0 ? Math.min(...known) : ctx.input.now };
}

/** Paused after a rollback: only a new Resume approval resumes automation. */
function resumeIfApproved(
  ctx: Context,
  paused: NonNullable<Context['stored']['paused']>,
): PodResizePlan {
  const seen = new Set(paused.approvalsSeen);
  const approval = matchingResumeApprovals(ctx).find((a) => !seen.has(a.name));
  if (!approval) return nothing(`paused: ${paused.reason}`, true);
  const d = decision(
    ctx,
    'Resume',
    `Approval ${approval.name} by ${approval.approvedBy} resumes automation: ${approval.reason}`,
    [
      {
        condition: 'Approved',
        met: true,
        value: {
          approval: approval.name,
          file: approval.source.file,
          approvedBy: approval.approvedBy,
        },
      },
      {
        condition: 'paused',
        met: true,
        value: { reason: paused.reason, since: paused.since },
      },
    ],
    true,
  );
  const state: ResizeState = { attempts: 0 };
  return {
    decisions: [d],
    writes: [
      {
        decisionId: d.id,
        op: {
          type: 'annotate',
          annotations: stateAnnotations(sealerOf(ctx), {
            paused: null,
            state,
            lastGood: toRecord(ctx.actual),
          }),
        },
        priority: resizePriority.annotate,
        deadline: ctx.input.now + 60_000,
      },
    ],
    paused: false,
  };
}

/** A rollback when a container was OOMKilled after a step down, or the SLO is breached. */
function rollbackIfHarmed(ctx: Context): PodResizePlan | undefined {
  const { policy, now } = ctx.input;
  if (policy.rollback.onOOMKilled) {
    const container = oomKilledSinceRequest(ctx);
    if (container) {
      // Without a last good to return to, the OOM kill asks for a memory step up at
      // once, however long ago it was: the decrease that caused it is inside the
      // cooldown by construction, and a late pass must not forget it.
      const killed = { ...ctx, oomAfterDecrease: container };
      return (
        rollback(ctx, `container ${container} was OOMKilled after tollgate lowered its memory`, [
          { condition: 'OOMKilled', met: true, value: { container } },
        ]) ??
        followResizeInFlight(killed) ??
        answerRefusal(killed) ??
        stepWithinBounds(killed)
      );
    }
  }
  const { desired, stored, input } = ctx;
  const lastGood = stored.lastGood ? mergeOnto(desired, fromRecord(stored.lastGood)) : undefined;
  if (!policy.slo || !input.slo || !lastGood || sameResources(desired, lastGood)) return undefined;
  if (input.slo.error !== undefined || !input.slo.samples) return undefined;
  const slo = judgeSlo(policy.slo, input.slo.samples, { endMs: now, stepMs: input.stepMs });
  if (!slo.breached) return undefined;
  return rollback(ctx, `SLO breached: ${slo.reason}`, [
    {
      condition: 'SLO',
      met: false,
      value: {
        above: policy.slo.above,
        forMs: policy.slo.forMs,
        min: slo.min ?? null,
        max: slo.max ?? null,
      },
    },
  ]);
}

/**
 * A resize in flight (spec differs from what runs, or the kubelet reports one pending
 * or in progress): only tollgate's own is followed, through Infeasible, Deferred and
 * Error; undefined when none is in flight.
 */
function followResizeInFlight(ctx: Context): PodResizePlan | undefined {
  const { input, desired, actual, stored, generation } = ctx;
  const { pod } = input;
  const observed = pod.status?.observedGeneration;
  const pendingCond = condition(pod, 'PodResizePending');
  const progressCond = condition(pod, 'PodResizeInProgress');
  const inFlight =
    !sameResources(desired, actual) || pendingCond !== undefined || progressCond !== undefined;
  if (!inFlight) return undefined;
  const ours =
    stored.state.target &&
    sameResources(desired, mergeOnto(desired, fromRecord(stored.state.target)));
  const current = (c: V1PodCondition | undefined): boolean =>
    c !== undefined && (c.observedGeneration === undefined || c.observedGeneration >= generation);
  if (!ours) return nothing('a resize tollgate did not request is in flight');
  if (current(pendingCond) && pendingCond?.reason === 'Infeasible')
    return handleInfeasible(ctx, {
      by: 'kubelet',
      message: pendingCond.message ?? 'no message',
      target: desired,
      running: actual,
    });
  if (current(pendingCond) && pendingCond?.reason === 'Deferred')
    return handleWaiting(ctx, 'Deferred', pendingCond);
  if (current(progressCond) && progressCond?.reason === 'Error')
    return handleWaiting(ctx, 'Error', progressCond);
  if (observed !== undefined && observed < generation) {
    const waiting = `the kubelet has not observed generation ${generation} yet (observed ${observed})`;
    return pauseIfStuck(ctx, waiting) ?? nothing(waiting);
  }
  return pauseIfStuck(ctx, 'resize in progress') ?? nothing('resize in progress');
}

/**
 * The API server refused the last resize (reported by the loop): handled like an
 * Infeasible answer, with the recorded target as the one that did not fit.
 */
function answerRefusal(ctx: Context): PodResizePlan | undefined {
  const { input, desired, stored } = ctx;
  if (!input.refused || !stored.state.target) return undefined;
  const refusedTarget = mergeOnto(desired, fromRecord(stored.state.target));
  if (sameResources(refusedTarget, desired)) return undefined;
  return handleInfeasible(ctx, {
    by: 'api',
    message: input.refused.message,
    target: refusedTarget,
    running: desired,
  });
}

/** Cooldown counts only from a request the spec shows was applied. */
function waitForCooldown(ctx: Context): PodResizePlan | undefined {
  const { input, desired, stored } = ctx;
  const { policy, now } = input;
  const target = stored.state.target
    ? mergeOnto(desired, fromRecord(stored.state.target))
    : undefined;
  const applied = target !== undefined && sameResources(desired, target);
  if (
    applied &&
    stored.state.requestedAt !== undefined &&
    now - stored.state.requestedAt < policy.cooldownMs
  ) {
    return nothing(
      `cooldown: last resize ${now - stored.state.requestedAt} ms ago < ${policy.cooldownMs} ms`,
    );
  }
  return undefined;
}

/** One step up or down within bounds, as the signals ask; nothing when they hold. */
function stepWithinBounds(ctx: Context): PodResizePlan {
  const { input, desired, actual, stored } = ctx;
  const { policy } = input;
  const verdicts = verdictsFor(ctx);
  const stepped = stepTarget(ctx, verdicts);
  const inputs: ConditionInput[] = [
    ...verdicts.map(verdictInput),
    {
      condition: 'bounds',
      met: true,
      value: { containers: policy.containers, pod: policy.pod ?? null },
    },
    ...sloInputs(ctx),
    { condition: 'directions', met: true, value: stepped.directions },
  ];
  const unchanged = sameResources(stepped.target, desired);
  if (unchanged && stepped.heldDown.length > 0) return holdStepDown(ctx, stepped, inputs);
  if (unchanged && stepped.quotaHeld.length > 0) return holdForQuota(ctx, stepped, inputs);
  if (Object.values(stepped.directions).every((d) => d === 'hold')) {
    return nothing('signals hold: no signal past a threshold for the whole window');
  }
  if (unchanged) {
    return nothing(`no change possible: ${stepped.notes.join('; ') || 'at bounds'}`);
  }
  if (qosClass(stepped.target) !== qosClass(desired)) {
    return nothing(
      `the target would change the QoS class from ${qosClass(desired)} to ${qosClass(stepped.target)}`,
    );
  }
  const up = Object.values(stepped.directions).includes('up');
  const d = decision(
    ctx,
    'Resize',
    `signals ask for ${up ? 'more' : 'less'}: one step ${up ? 'up' : 'down'} within bounds${stepped.notes.length ? ` (${stepped.notes.join('; ')})` : ''}`,
    [
      ...inputs,
      resourcesInput('current', desired),
      resourcesInput('actual', actual),
      resourcesInput('target', stepped.target),
    ],
    true,
  );
  // A scale-down clears an Infeasible mark: the workload asks for less, the mark is moot.
  const keepMark = up && stored.state.infeasible ? stored.state.infeasible : undefined;
  const state = newState(ctx, stepped.target, 1, desired, keepMark);
  return {
    decisions: [d],
    writes: requestWrites(
      ctx,
      d.id,
      stepped.target,
      state,
      up ? resizePriority.up : resizePriority.down,
      {
        lastGood: toRecord(desired),
      },
    ),
    paused: false,
  };
}
