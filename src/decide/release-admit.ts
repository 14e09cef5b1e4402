/**
 * Phase 4 of a gate-release pass: admit release units, highest priority first and fair
 * across tenants by weight (lowest virtual time next), each unit checked against its
 * tenant's budget (ramped after an increase), then max in flight, batch size and the
 * token buckets, each at three scopes: global, tenant, policy. A scope that blocks one
 * unit blocks every later unit of that scope this pass (they are held with the same
 * reason), except Budget: a smaller unit behind may still fit. A unit behind a blocked
 * scope that would not fit its tenant's budget after the units queued ahead of it is held
 * by Budget, the limit that lasts: its reason does not flip with whichever limit stopped
 * this pass first (`queuedHolds`).
 *
 * Safety never depends on the carried state: usage and in-flight counts come from the
 * classification of this pass's snapshot.
 */
import { byCodeUnits } from '../lib/compare.ts';
import {
  addUsage,
  budgetFits,
  budgetReadsAs,
  emptyUsage,
  evaluateBudget,
  type BudgetLimits,
  type Usage,
} from './conditions.ts';
import type { ConditionInput } from './decision.ts';
import { matchesSelector } from './gates.ts';
import {
  bucketCapacity,
  canTake,
  combinePacing,
  msUntil,
  rampBudget,
  refill,
  rejoinServed,
  take,
  virtualTime,
  type Bucket,
  type Ramp,
} from './pacing.ts';
import type { Classification } from './release-classify.ts';
import type { PlanState } from './release-plan.ts';
import { holdVerdict, type ReleaseUnit, type Verdict } from './release-verdict.ts';
import type { GatePolicy, Pacing, Policy, Tenant } from '../policy/model.ts';

export interface Admission {
  /** Releases and holds (Budget, Pacing), in the order the units were considered. */
  readonly verdicts: readonly Verdict[];
  /** The token buckets this pass refilled or took from. */
  readonly buckets: Readonly<Record<string, Bucket>>;
  /** Releases served per backlogged tenant, including this pass's. */
  readonly served: Record<string, number>;
  readonly ramps: Record<string, Record<string, Ramp>>;
  /** When a ramp completes or a bucket has room again. */
  readonly wakeups: readonly number[];
}

type Scope = 'global' | 'tenant' | 'policy';

/** What this pass has admitted so far, on top of the cluster's counts. */
interface Ledger {
  readonly usage: Map<string, Usage>;
  readonly inFlight: Map<string, number>;
  globalInFlight: number;
  readonly policyInFlight: Map<string, number>;
  released: number;
  readonly releasedByTenant: Map<string, number>;
  readonly releasedByPolicy: Map<string, number>;
  readonly buckets: Record<string, Bucket>;
  readonly served: Record<string, number>;
  /** Per scope: why it admits nothing more this pass. */
  globalBlock?: string;
  readonly tenantBlock: Map<string, string>;
  readonly policyBlock: Map<string, string>;
  /** Per tenant: requests of the units held behind a blocked scope, in serving order. */
  readonly queuedAhead: Map<string, Usage>;
  /** Per pacing reason: the input and reason its holds share (`pacingHoldOf`), kept per policy snapshot. */
  readonly pacingHolds: Map<string, PacingHold>;
  /** The Budget input this pass made last (`budgetInput`). */
  lastBudget?: ConditionInput;
}

export function admitUnits(options: {
  readonly policy: Policy;
  readonly units: readonly ReleaseUnit[];
  readonly classified: Classification;
  readonly state: Pick<PlanState, 'buckets' | 'served' | 'ramps'>;
  readonly now: number;
  readonly rampMs: number;
}): Admission {
  const { policy, classified, state, now } = options;
  const verdicts: Verdict[] = [];
  const wakeups: number[] = [];
  const budgets = rampedBudgets(policy, state.ramps, now, options.rampMs);
  wakeups.push(...budgets.wakeups);
  const queues = tenantQueues(options.units);
  const backlogged = queues.map(({ tenant: name }) => ({
    name,
    weight: (policy.tenants.get(name) as Tenant).weight,
  }));
  const ledger: Ledger = {
    usage: new Map(
      [...classified.usage].map(([name, used]) => [name, addUsage(emptyUsage(), used)]),
    ),
    inFlight: new Map(classified.inFlight),
    globalInFlight: classified.globalInFlight,
    policyInFlight: new Map(),
    released: 0,
    releasedByTenant: new Map(),
    releasedByPolicy: new Map(),
    buckets: {},
    served: rejoinServed(state.served, backlogged),
    tenantBlock: new Map(),
    policyBlock: new Map(),
    queuedAhead: new Map(),
    pacingHolds: pacingHoldsOf(policy),
  };
  const context = { policy, classified, state, now, ledger, wakeups };
  for (let unit = nextUnit(queues, ledger.served); unit; unit = nextUnit(queues, ledger.served)) {
    admitUnit(unit, budgets.limits.get(unit.tenant.name) as BudgetLimits, context, verdicts);
  }
  return {
    verdicts,
    buckets: ledger.buckets,
    served: ledger.served,
    ramps: budgets.ramps,
    wakeups,
  };
}

/** Each tenant's budget limits, ramped after an increase (hysteresis). */
export function rampedBudgets(
  policy: Policy,
  previous: PlanState['ramps'],
  now: number,
  rampMs: number,
): {
  ramps: Record<string, Record<string, Ramp>>;
  limits: Map<string, BudgetLimits>;
  wakeups: number[];
} {
  const ramps: Record<string, Record<string, Ramp>> = {};
  const limits = new Map<string, BudgetLimits>();
  const wakeups: number[] = [];
  for (const tenant of policy.tenants.values()) {
    const ramped = rampBudget(previous[tenant.name], tenant.budget, now, rampMs);
    ramps[tenant.name] = ramped.ramps;
    limits.set(tenant.name, ramped.limits);
    if (ramped.rampingUntil !== undefined) wakeups.push(ramped.rampingUntil);
  }
  return { ramps, limits, wakeups };
}

/**
 * A tenant's units in serving order, and the index of the next one to serve: taken by
 * moving the index, never by `shift()`, which copies the whole array when it is large
 * (a pass of 50,000 pods in one tenant spent most of its admission time there).
 */
export interface TenantQueue {
  readonly tenant: string;
  readonly units: readonly ReleaseUnit[];
  next: number;
}

/**
 * Per tenant (in the order its first unit comes), its units by priority (highest first),
 * then oldest, then key. A list, not a map: `nextUnit` looks at every queue for every
 * unit, and a map's iterator was an object per unit.
 */
export function tenantQueues(units: readonly ReleaseUnit[]): TenantQueue[] {
  const lists = new Map<string, ReleaseUnit[]>();
  for (let i = 0; i < units.length; i++) {
    const unit = units[i] as ReleaseUnit;
    const list = lists.get(unit.tenant.name) ?? [];
    list.push(unit);
    lists.set(unit.tenant.name, list);
  }
  const queues: TenantQueue[] = [];
  for (const [name, list] of lists) {
    list.sort(
      (a, b) =>
        b.gatePolicy.priority - a.gatePolicy.priority ||
        a.order - b.order ||
        byCodeUnits(a.key, b.key),
    );
    queues.push({ tenant: name, units: list, next: 0 });
  }
  return queues;
}

/**
 * Takes the next unit off its queue: the highest priority among the queue heads, then
 * the lowest virtual time (served / weight), then the tenant name.
 */
export function nextUnit(
  queues: readonly TenantQueue[],
  served: Readonly<Record<string, number>>,
): ReleaseUnit | undefined {
  // The best head so far, in three variables: an object per comparison (and an entry per
  // queue) was a tenth of a steady 10,000-pod pass's garbage.
  let bestTenant = '';
  let bestUnit: ReleaseUnit | undefined;
  let bestQueue: TenantQueue | undefined;
  for (let i = 0; i < queues.length; i++) {
    const queue = queues[i] as TenantQueue;
    const name = queue.tenant;
    const head = queue.units[queue.next];
    if (!head) continue;
    if (
      !bestUnit ||
      head.gatePolicy.priority > bestUnit.gatePolicy.priority ||
      (head.gatePolicy.priority === bestUnit.gatePolicy.priority &&
        (virtualTime(served, name, head.tenant.weight) <
          virtualTime(served, bestTenant, bestUnit.tenant.weight) ||
          (virtualTime(served, name, head.tenant.weight) ===
            virtualTime(served, bestTenant, bestUnit.tenant.weight) &&
            name < bestTenant)))
    ) {
      bestTenant = name;
      bestUnit = head;
      bestQueue = queue;
    }
  }
  if (!bestQueue) return undefined;
  bestQueue.next += 1;
  return bestUnit;
}

interface AdmitContext {
  readonly policy: Policy;
  readonly classified: Classification;
  readonly state: Pick<PlanState, 'buckets'>;
  readonly now: number;
  readonly ledger: Ledger;
  readonly wakeups: number[];
}

/**
 * One unit: held by a blocked scope, its budget or pacing; else released and counted. Its
 * verdicts go into `out` (no list per unit).
 */
function admitUnit(
  unit: ReleaseUnit,
  limits: BudgetLimits,
  context: AdmitContext,
  out: Verdict[],
): void {
  const { ledger } = context;
  const { tenant, gatePolicy } = unit;
  const cost = unit.members.length;
  const blocked =
    ledger.globalBlock ??
    ledger.tenantBlock.get(tenant.name) ??
    (ledger.policyBlock.size > 0
      ? ledger.policyBlock.get(policyKeyOf(tenant, gatePolicy))
      : undefined);
  const wantsBudget = judgesBudget(gatePolicy);
  if (blocked !== undefined) return queuedHolds(unit, blocked, wantsBudget, limits, ledger, out);

  // Budget first: it is a condition of the pod, and a smaller unit behind may still fit.
  let budget: ConditionInput | undefined;
  if (wantsBudget) {
    const used = ledger.usage.get(tenant.name) as Usage;
    const why =
      cost > 1 ? `budget does not fit the whole gang (${cost} pods)` : 'waiting for Budget';
    const before = heldBefore.get(unit);
    if (
      before?.reason === why &&
      budgetReadsAs(addedTo(before), used, undefined, unit.requests, limits)
    ) {
      out.push(before);
      return;
    }
    budget = budgetInput(used, unit.requests, limits, ledger);
    if (!budget.met) return heldAs(unit, budget, why, 'Budget', out);
  }

  const policyKey = policyKeyOf(tenant, gatePolicy);
  const pacing = {
    global: context.policy.settings.pacing,
    tenant: tenant.pacing,
    policy: combinePacing(tenant.pacing, gatePolicy.pacing),
  };
  const inFlight =
    ledger.policyInFlight.get(policyKey) ??
    policyInFlight(context.classified.inFlightPods, tenant, gatePolicy);
  ledger.policyInFlight.set(policyKey, inFlight);
  if (
    cost > pacing.global.maxInFlight ||
    cost > pacing.tenant.maxInFlight ||
    cost > pacing.policy.maxInFlight
  ) {
    const why = `unit of ${cost} pods is larger than maxInFlight; it can never be released`;
    return pacingHolds(unit, why, ledger, out);
  }
  const failed = pacingChecks(unit, pacing, inFlight, context).find(([, ok]) => !ok);
  if (failed) {
    const [scope, , why] = failed;
    if (scope === 'global') ledger.globalBlock = why;
    else if (scope === 'tenant') ledger.tenantBlock.set(tenant.name, why);
    else ledger.policyBlock.set(policyKey, why);
    return queuedHolds(unit, why, wantsBudget, limits, ledger, out);
  }
  countAdmitted(unit, policyKey, inFlight, ledger);
  for (const m of unit.members)
    out.push({
      kind: 'Release',
      pod: m.pod,
      tenant,
      gatePolicy,
      inputs: budget !== undefined ? [...m.inputs, budget] : m.inputs,
      reason: cost > 1 ? `${m.reasonPrefix}; gang of ${cost} released together` : m.reasonPrefix,
      gate: m.owned,
      expiryForced: m.expiryForced,
      ...(cost > 1 ? { unit: unit.key } : {}),
    });
}

function policyKeyOf(tenant: Tenant, gatePolicy: GatePolicy): string {
  return `${tenant.name}/${gatePolicy.name}`;
}

/** Whether the GatePolicy has a Budget condition. */
function judgesBudget(gatePolicy: GatePolicy): boolean {
  const { conditions } = gatePolicy;
  for (let i = 0; i < conditions.length; i++)
    if ((conditions[i] as GatePolicy['conditions'][number]).type === 'Budget') return true;
  return false;
}

/**
 * The Budget input of a unit: the one this pass made last when it reads the same (units
 * held alike by a full budget share one, read only), else a new one.
 */
function budgetInput(
  used: Usage,
  adding: Usage,
  limits: BudgetLimits,
  ledger: Ledger,
): ConditionInput {
  const last = ledger.lastBudget;
  if (last !== undefined && budgetReadsAs(last, used, undefined, adding, limits)) return last;
  const made = evaluateBudget(used, adding, limits);
  ledger.lastBudget = made;
  return made;
}

/**
 * The last Hold the admission phase made for a unit of one pod: the input it added to the
 * pod's own inputs (Budget or Pacing) is the last of its inputs. A unit of one is one
 * object per candidate object (release-units.ts), and a candidate one per pod object,
 * policy snapshot and condition inputs (release-judge.ts); so a unit held again by an
 * input that reads the same, for the same reason, is held by the same verdict: a steady
 * pass over 10,000 pods held by their budget or by pacing makes none. Only the verdict is
 * kept (a gang's unit is made anew each pass, so nothing is kept for it). Held weakly,
 * with its unit.
 */
const heldBefore = new WeakMap<ReleaseUnit, Verdict>();

/** The input the admission phase added to a Hold's inputs: its last. */
function addedTo(verdict: Verdict): ConditionInput {
  return verdict.inputs[verdict.inputs.length - 1] as ConditionInput;
}

/**
 * Every member held with `added` after its own inputs, for `reason`; a unit of one pod
 * remembers its verdict. A member with no inputs of its own (Budget its only condition)
 * is held by `[added]`, one list per input (`aloneWith`).
 */
function heldAs(
  unit: ReleaseUnit,
  added: ConditionInput,
  reason: string,
  reasonKey: string,
  out: Verdict[],
): void {
  for (const m of unit.members) {
    const inputs = m.inputs.length === 0 ? aloneWith(added) : [...m.inputs, added];
    const verdict = holdVerdict(m.pod, unit.tenant, unit.gatePolicy, inputs, reasonKey, reason);
    if (unit.members.length === 1) heldBefore.set(unit, verdict);
    out.push(verdict);
  }
}

/** `[input]`, one list per input object (read only), held weakly with it. */
function aloneWith(input: ConditionInput): readonly ConditionInput[] {
  let list = listsOfOne.get(input);
  if (list === undefined) {
    list = [input];
    listsOfOne.set(input, list);
  }
  return list;
}
const listsOfOne = new WeakMap<ConditionInput, readonly ConditionInput[]>();

/** Pods in flight that this policy selects in its tenant's namespaces. */
function policyInFlight(
  inFlightPods: Classification['inFlightPods'],
  tenant: Tenant,
  gatePolicy: GatePolicy,
): number {
  return inFlightPods.filter(
    (p) =>
      tenant.namespaces.includes(p.metadata?.namespace ?? '') &&
      matchesSelector(p.metadata?.labels ?? {}, gatePolicy.selector),
  ).length;
}

type ScopedPacing = Readonly<Record<Scope, Pacing>>;

/** The bucket of each scope, keyed in the plan state. */
function bucketKeys(tenant: Tenant, policyKey: string): readonly [Scope, string][] {
  return [
    ['global', 'global'],
    ['tenant', `tenant:${tenant.name}`],
    ['policy', `policy:${policyKey}`],
  ];
}

/** The bucket refilled to now, once per pass per key. */
function bucketOf(key: string, pacing: Pacing, context: AdmitContext): Bucket {
  const { buckets } = context.ledger;
  buckets[key] ??= refill(
    context.state.buckets[key],
    pacing.releasesPerSecond,
    bucketCapacity(pacing),
    context.now,
  );
  return buckets[key];
}

/**
 * Max in flight, batch size and release rate at each scope, in that order; the first
 * that fails holds the unit. A bucket without room also sets a wakeup for when it has.
 */
function pacingChecks(
  unit: ReleaseUnit,
  pacing: ScopedPacing,
  policyInFlightNow: number,
  context: AdmitContext,
): [scope: Scope, ok: boolean, why: string][] {
  const { ledger } = context;
  const tenant = unit.tenant.name;
  const policyKey = `${tenant}/${unit.gatePolicy.name}`;
  const cost = unit.members.length;
  const batchFits = (released: number, batchSize: number): boolean =>
    released === 0 || released + cost <= batchSize;
  const checks: [scope: Scope, ok: boolean, why: string][] = [
    [
      'global',
      ledger.globalInFlight + cost <= pacing.global.maxInFlight,
      `global maxInFlight ${pacing.global.maxInFlight} reached`,
    ],
    [
      'tenant',
      (ledger.inFlight.get(tenant) ?? 0) + cost <= pacing.tenant.maxInFlight,
      `tenant maxInFlight ${pacing.tenant.maxInFlight} reached`,
    ],
    [
      'policy',
      policyInFlightNow + cost <= pacing.policy.maxInFlight,
      `policy maxInFlight ${pacing.policy.maxInFlight} reached`,
    ],
    [
      'global',
      batchFits(ledger.released, pacing.global.batchSize),
      `global batch of ${pacing.global.batchSize} done`,
    ],
    [
      'tenant',
      batchFits(ledger.releasedByTenant.get(tenant) ?? 0, pacing.tenant.batchSize),
      `tenant batch of ${pacing.tenant.batchSize} done`,
    ],
    [
      'policy',
      batchFits(ledger.releasedByPolicy.get(policyKey) ?? 0, pacing.policy.batchSize),
      `policy batch of ${pacing.policy.batchSize} done`,
    ],
  ];
  for (const [scope, key] of bucketKeys(unit.tenant, policyKey)) {
    const scopePacing = pacing[scope];
    const bucket = bucketOf(key, scopePacing, context);
    const capacity = bucketCapacity(scopePacing);
    const ok = canTake(bucket, cost, capacity);
    if (!ok) {
      context.wakeups.push(
        context.now + msUntil(bucket, cost, scopePacing.releasesPerSecond, capacity),
      );
    }
    checks.push([scope, ok, `${scope} release rate ${scopePacing.releasesPerSecond}/s`]);
  }
  return checks;
}

/** The admitted unit takes its tokens, charges its budget and counts in flight and served. */
function countAdmitted(
  unit: ReleaseUnit,
  policyKey: string,
  policyInFlightNow: number,
  ledger: Ledger,
): void {
  const tenant = unit.tenant.name;
  const cost = unit.members.length;
  for (const [, key] of bucketKeys(unit.tenant, policyKey)) {
    ledger.buckets[key] = take(ledger.buckets[key] as Bucket, cost);
  }
  addUsage(ledger.usage.get(tenant) as Usage, unit.requests);
  ledger.inFlight.set(tenant, (ledger.inFlight.get(tenant) ?? 0) + cost);
  ledger.globalInFlight += cost;
  ledger.policyInFlight.set(policyKey, policyInFlightNow + cost);
  ledger.released += cost;
  ledger.releasedByTenant.set(tenant, (ledger.releasedByTenant.get(tenant) ?? 0) + cost);
  ledger.releasedByPolicy.set(policyKey, (ledger.releasedByPolicy.get(policyKey) ?? 0) + cost);
  ledger.served[tenant] = (ledger.served[tenant] ?? 0) + cost;
}

/**
 * A unit behind a blocked scope: held by Budget when the units queued ahead of it in its
 * tenant (held by a blocked scope too, released before it) already fill the budget, else
 * by the scope, and then counted as queued ahead of the units behind it.
 */
function queuedHolds(
  unit: ReleaseUnit,
  why: string,
  wantsBudget: boolean,
  limits: BudgetLimits,
  ledger: Ledger,
  out: Verdict[],
): void {
  if (!wantsBudget) return pacingHolds(unit, why, ledger, out);
  const { tenant } = unit;
  const ahead = ledger.queuedAhead.get(tenant.name) ?? emptyUsage();
  ledger.queuedAhead.set(tenant.name, ahead);
  const used = ledger.usage.get(tenant.name) as Usage;
  if (!budgetFits(used, ahead, unit.requests, limits)) {
    const reason = 'waiting for Budget: the pods queued ahead of it fill it';
    const before = heldBefore.get(unit);
    if (
      before?.reason === reason &&
      budgetReadsAs(addedTo(before), used, ahead, unit.requests, limits)
    ) {
      out.push(before);
      return;
    }
    // The full input (every limited dimension, the one exceeded) only for a unit held by it.
    const budget = evaluateBudget(
      addUsage(addUsage(emptyUsage(), used), ahead),
      unit.requests,
      limits,
    );
    const input: ConditionInput = {
      ...budget,
      value: { ...(budget.value as object), queuedAhead: ahead.pods },
    };
    return heldAs(unit, input, reason, 'Budget', out);
  }
  addUsage(ahead, unit.requests);
  return pacingHolds(unit, why, ledger, out);
}

/**
 * Every member held by pacing, with the reason as a Pacing input. Members judged alike
 * share their inputs list (a gang's GangComplete, release-judge.ts), so they share the
 * list with the Pacing input added too: one per gang, not one per member. A unit held
 * again for the same reason is held by the same verdicts (`heldBefore`).
 */
function pacingHolds(unit: ReleaseUnit, why: string, ledger: Ledger, out: Verdict[]): void {
  const { input, inputsAlone, reason } = pacingHoldOf(why, ledger);
  const before = heldBefore.get(unit);
  if (before?.reason === reason && addedTo(before) === input) {
    out.push(before);
    return;
  }
  let judged: readonly ConditionInput[] | undefined;
  let held: readonly ConditionInput[] = inputsAlone;
  for (const m of unit.members) {
    if (m.inputs !== judged) {
      judged = m.inputs;
      held = m.inputs.length === 0 ? inputsAlone : [...m.inputs, input];
    }
    const verdict = holdVerdict(m.pod, unit.tenant, unit.gatePolicy, held, 'Pacing', reason);
    if (unit.members.length === 1) heldBefore.set(unit, verdict);
    out.push(verdict);
  }
}

/** The Pacing input and the reason of a hold by pacing. */
interface PacingHold {
  readonly input: ConditionInput;
  /** The inputs of a pod with no other input (Budget its only condition): `[input]`, shared. */
  readonly inputsAlone: readonly ConditionInput[];
  readonly reason: string;
}

/**
 * One Pacing input and reason per pacing reason, shared (read only) by the holds that
 * name it: once a scope blocks, every later unit of it is held with the same reason, and a
 * pass of 50,000 pods made an input and a reason text for each of 49,000. Kept per policy
 * snapshot (`pacingHoldsOf`), so the next pass names the same input and a unit held again
 * for the same reason is held by the same verdicts.
 */
function pacingHoldOf(why: string, ledger: Ledger): PacingHold {
  let hold = ledger.pacingHolds.get(why);
  if (hold === undefined) {
    const input: ConditionInput = { condition: 'Pacing', met: false, value: why };
    hold = { input, inputsAlone: [input], reason: `queued: ${why}` };
    ledger.pacingHolds.set(why, hold);
  }
  return hold;
}

/**
 * The pacing holds of a policy snapshot, by reason. Its reasons are texts of its own
 * pacing settings (a limit and its scope) and of the sizes of gangs larger than a
 * maxInFlight: a few per snapshot, gone with it.
 */
function pacingHoldsOf(policy: Policy): Map<string, PacingHold> {
  let holds = pacingHoldsByPolicy.get(policy);
  if (holds === undefined) {
    holds = new Map();
    pacingHoldsByPolicy.set(policy, holds);
  }
  return holds;
}
const pacingHoldsByPolicy = new WeakMap<Policy, Map<string, PacingHold>>();
