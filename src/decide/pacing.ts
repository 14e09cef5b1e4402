/**
 * Release pacing as pure data transformations: token buckets, fair-share accounting
 * across tenants, and the budget ramp that keeps a raised budget from releasing a
 * thundering herd. All state is passed in and returned; the loop keeps it between
 * passes. State is an optimisation, never a safety input: a restarted controller starts
 * from empty state and the hard limits (budget, max in flight) are recomputed from the
 * cluster every pass.
 */
import type { Pacing } from '../policy/model.ts';
import type { BudgetLimits } from './conditions.ts';

export interface Bucket {
  readonly tokens: number;
  readonly at: number;
}

/** Burst: one second's worth of releases, bounded by the batch size, at least one. */
export function bucketCapacity(pacing: Pick<Pacing, 'releasesPerSecond' | 'batchSize'>): number {
  return Math.max(1, Math.min(pacing.batchSize, Math.ceil(pacing.releasesPerSecond)));
}

export function refill(
  bucket: Bucket | undefined,
  ratePerSecond: number,
  capacity: number,
  now: number,
): Bucket {
  if (!bucket) return { tokens: capacity, at: now };
  const elapsed = Math.max(0, now - bucket.at);
  return { tokens: Math.min(capacity, bucket.tokens + (elapsed / 1000) * ratePerSecond), at: now };
}

/**
 * Whether `cost` tokens may be taken. A unit bigger than the whole burst (a large gang)
 * may go when the bucket is full and leaves it in debt, so the long-run rate still holds.
 */
export function canTake(bucket: Bucket, cost: number, capacity: number): boolean {
  return bucket.tokens >= cost - 1e-9 || (cost > capacity && bucket.tokens >= capacity - 1e-9);
}

export function take(bucket: Bucket, cost: number): Bucket {
  return { tokens: bucket.tokens - cost, at: bucket.at };
}

/** Milliseconds until `cost` tokens (at most a full bucket) are available. */
export function msUntil(
  bucket: Bucket,
  cost: number,
  ratePerSecond: number,
  capacity: number,
): number {
  const need = Math.min(cost, capacity) - bucket.tokens;
  if (need <= 0) return 0;
  if (ratePerSecond <= 0) return Number.POSITIVE_INFINITY;
  return Math.ceil((need / ratePerSecond) * 1000);
}

/** Per-policy pacing applies on top of the tenant's: the tighter of the two wins. */
export function combinePacing(tenant: Pacing, policy: Partial<Pacing> | undefined): Pacing {
  return {
    maxInFlight: Math.min(tenant.maxInFlight, policy?.maxInFlight ?? Number.POSITIVE_INFINITY),
    releasesPerSecond: Math.min(
      tenant.releasesPerSecond,
      policy?.releasesPerSecond ?? Number.POSITIVE_INFINITY,
    ),
    batchSize: Math.min(tenant.batchSize, policy?.batchSize ?? Number.POSITIVE_INFINITY),
  };
}

/**
 * Weighted fair share: each tenant's service so far divided by its weight is its
 * virtual time; the next release goes to the backlogged tenant with the lowest one
 * (within the highest priority waiting). A tenant that was idle rejoins at the lowest
 * virtual time of the others, so idleness banks no credit.
 */
export function virtualTime(
  served: Readonly<Record<string, number>>,
  tenant: string,
  weight: number,
): number {
  return (served[tenant] ?? 0) / Math.max(weight, 1e-9);
}

export function rejoinServed(
  served: Readonly<Record<string, number>>,
  backlogged: readonly { name: string; weight: number }[],
): Record<string, number> {
  const active = backlogged.filter((t) => served[t.name] !== undefined);
  const floor = active.length
    ? Math.min(...active.map((t) => virtualTime(served, t.name, t.weight)))
    : 0;
  const next: Record<string, number> = {};
  for (const t of backlogged) next[t.name] = served[t.name] ?? floor * t.weight;
  return next;
}

/** Shifts virtual times so the smallest is zero (keeps numbers small; order unchanged). */
export function normaliseServed(
  served: Readonly<Record<string, number>>,
  weights: ReadonlyMap<string, number>,
): Record<string, number> {
  const names = Object.keys(served);
  if (names.length === 0) return {};
  const floor = Math.min(...names.map((n) => virtualTime(served, n, weights.get(n) ?? 1)));
  const next: Record<string, number> = {};
  for (const n of names) next[n] = (served[n] as number) - floor * (weights.get(n) ?? 1);
  return next;
}

/** A budget being raised toward `to`, from `from`, since `startedAt`. */
export interface Ramp {
  readonly from: number;
  readonly to: number;
  readonly startedAt: number;
}

/**
 * Hysteresis for budget increases: a raised limit opens linearly over `rampMs`, so a
 * policy commit that doubles a budget releases the extra pods at a pace the scheduler
 * and the autoscaler can absorb. A lowered limit applies at once (safety first). The
 * first limit seen (e.g. after a restart) applies at once: the cluster already holds
 * whatever the previous controller released.
 */
export function stepRamp(
  ramp: Ramp | undefined,
  target: number,
  now: number,
  rampMs: number,
): { ramp: Ramp; limit: number } {
  const current = ramp ? rampValue(ramp, now, rampMs) : target;
  if (!ramp || target <= current)
    return { ramp: { from: target, to: target, startedAt: now }, limit: target };
  if (ramp.to !== target) {
    const next = { from: current, to: target, startedAt: now };
    return { ramp: next, limit: Math.floor(current) };
  }
  return { ramp, limit: Math.floor(current) };
}

export function rampValue(ramp: Ramp, now: number, rampMs: number): number {
  if (ramp.to <= ramp.from || rampMs <= 0) return ramp.to;
  const progress = Math.min(1, Math.max(0, (now - ramp.startedAt) / rampMs));
  return ramp.from + (ramp.to - ramp.from) * progress;
}

export function rampDone(ramp: Ramp, now: number, rampMs: number): boolean {
  return rampValue(ramp, now, rampMs) >= ramp.to;
}

/** Applies the ramp to each limited dimension of a tenant budget. Keys: "pods", resource names. */
export function rampBudget(
  ramps: Readonly<Record<string, Ramp>> | undefined,
  budget: BudgetLimits,
  now: number,
  rampMs: number,
): { limits: BudgetLimits; ramps: Record<string, Ramp>; rampingUntil?: number } {
  const next: Record<string, Ramp> = {};
  let rampingUntil: number | undefined;
  const one = (key: string, target: number): number => {
    const { ramp, limit } = stepRamp(ramps?.[key], target, now, rampMs);
    next[key] = ramp;
    if (!rampDone(ramp, now, rampMs)) rampingUntil = Math.min(rampingUntil ?? Infinity, now + 1000);
    return limit;
  };
  const resources: Record<string, number> = {};
  for (const [name, target] of Object.entries(budget.resources))
    resources[name] = one(name, target);
  const limits: BudgetLimits =
    budget.pods !== undefined ? { pods: one('pods', budget.pods), resources } : { resources };
  return rampingUntil === undefined
    ? { limits, ramps: next }
    : { limits, ramps: next, rampingUntil };
}
