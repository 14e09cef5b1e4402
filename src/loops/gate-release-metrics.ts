/**
 * Metrics of the gate-release loop. Label sets are closed (tenants come from the policy,
 * states and results from fixed lists) and pre-created at zero when a policy is first
 * seen; no per-pod labels.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Policy } from '../policy/model.ts';
import { chargeReasons, freeReasons, podStates } from '../decide/lifecycle.ts';
import type { PassSummary } from '../decide/release-plan.ts';
import { registry } from '../observe/metrics.ts';

/** How a release write ended, or why none was sent. */
export const releaseResults = [
  'succeeded',
  'conflict', // 409 / failed patch test: decided again from fresh state
  'failed', // final API error or retries exhausted
  'expired', // deadline passed in the queue
  'cancelled', // superseded, pod deleted, queue closed
  'stale', // skipped: the cache had not seen tollgate's last write to the pod
  'unrecorded', // strict audit could not record the intent, so nothing was sent
] as const;
export type ReleaseResult = (typeof releaseResults)[number];

export const expiryActions = ['Review', 'Cancel', 'Release'] as const;

function getOrCreate<T>(name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export const gatedPods = getOrCreate(
  'tollgate_gated_pods',
  () =>
    new Gauge({
      name: 'tollgate_gated_pods',
      help: 'Pods carrying a tollgate gate, by tenant and gate.',
      labelNames: ['tenant', 'gate'],
      registers: [registry],
    }),
);

export const oldestGatedPodTimestamp = getOrCreate(
  'tollgate_oldest_gated_pod_timestamp_seconds',
  () =>
    new Gauge({
      name: 'tollgate_oldest_gated_pod_timestamp_seconds',
      help: "When the tenant's oldest gated pod got its gate (Unix seconds; no series while the tenant has none). Its age is time() minus this, so it grows while nothing is released.",
      labelNames: ['tenant'],
      registers: [registry],
    }),
);

export const podsByState = getOrCreate(
  'tollgate_pods',
  () =>
    new Gauge({
      name: 'tollgate_pods',
      help: 'Pods of each tenant by lifecycle state (gated, review, waiting, pending, unschedulable, scheduled, running, succeeded, failed).',
      labelNames: ['tenant', 'state'],
      registers: [registry],
    }),
);

export const budgetChargedPods = getOrCreate(
  'tollgate_budget_charged_pods',
  () =>
    new Gauge({
      name: 'tollgate_budget_charged_pods',
      help: "Pods charged to each tenant's budget, by reason: released (tollgate removed its gate, annotation tollgate.io/released) or neverGated (tollgate never released it; charged only when the tenant's budget.neverGatedPods is Charge).",
      labelNames: ['tenant', 'reason'],
      registers: [registry],
    }),
);

export const budgetUnchargedPods = getOrCreate(
  'tollgate_budget_uncharged_pods',
  () =>
    new Gauge({
      name: 'tollgate_budget_uncharged_pods',
      help: "Pods that run or can be scheduled in a tenant's namespaces without being charged to its budget: tollgate did not release them and the tenant's budget.neverGatedPods is Ignore.",
      labelNames: ['tenant'],
      registers: [registry],
    }),
);

export const budgetFreedPods = getOrCreate(
  'tollgate_budget_freed_pods',
  () =>
    new Gauge({
      name: 'tollgate_budget_freed_pods',
      help: "Pods released in a tenant's namespaces that no longer take from its budget, by reason: nodeNotReady (bound to a node whose Ready condition has been False or Unknown for longer than the tenant's budget.unreadyNodeGrace) or terminating (being deleted).",
      labelNames: ['tenant', 'reason'],
      registers: [registry],
    }),
);

/** How a released pod's charge to its tenant's budget changed (the audit's Uncharge and Recharge). */
export const chargeChangeKinds = ['Uncharge', 'Recharge'] as const;

export const budgetChargeChangesTotal = getOrCreate(
  'tollgate_budget_charge_changes_total',
  () =>
    new Counter({
      name: 'tollgate_budget_charge_changes_total',
      help: "Released pods whose charge to a tenant's budget changed, by tenant and change: Uncharge (its node not Ready past budget.unreadyNodeGrace, or being deleted) or Recharge (its node Ready again: charged again, possibly above the tenant's limit).",
      labelNames: ['tenant', 'change'],
      registers: [registry],
    }),
);

export const budgetOverLimitPods = getOrCreate(
  'tollgate_budget_over_limit_pods',
  () =>
    new Gauge({
      name: 'tollgate_budget_over_limit_pods',
      help: "Pods charged to a tenant's budget beyond its pod limit (0 within it): pods charged again when their node came back Ready, or a lowered budget. No pod of the tenant is released while above 0.",
      labelNames: ['tenant'],
      registers: [registry],
    }),
);

export const gateDwellSeconds = getOrCreate(
  'tollgate_gate_dwell_seconds',
  () =>
    new Histogram({
      name: 'tollgate_gate_dwell_seconds',
      help: 'Time from pod creation (when its gate was set) to the successful removal of the gate.',
      labelNames: ['tenant'],
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400],
      registers: [registry],
    }),
);

export const passSeconds = getOrCreate(
  'tollgate_gate_release_pass_seconds',
  () =>
    new Histogram({
      name: 'tollgate_gate_release_pass_seconds',
      help: 'The decide step of each gate-release pass (plan over every pod, guard, records), during which nothing else in the process runs; its count is the passes run.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
);

export const releasesTotal = getOrCreate(
  'tollgate_releases_total',
  () =>
    new Counter({
      name: 'tollgate_releases_total',
      help: 'Gate removals decided, by tenant and how the write ended.',
      labelNames: ['tenant', 'result'],
      registers: [registry],
    }),
);

export const expiredTotal = getOrCreate(
  'tollgate_expired_total',
  () =>
    new Counter({
      name: 'tollgate_expired_total',
      help: 'Gates that outlived their policy expiry, by the action taken.',
      labelNames: ['action'],
      registers: [registry],
    }),
);

export const blockedWritesTotal = getOrCreate(
  'tollgate_blocked_writes_total',
  () =>
    new Counter({
      name: 'tollgate_blocked_writes_total',
      help: 'Pods whose write kept failing with a final API error (403, 404, 422) and is Blocked until the pod or the policy changes, by tenant and HTTP code.',
      labelNames: ['tenant', 'code'],
      registers: [registry],
    }),
);

/** Hold reasons as metric labels: a failing condition set is `Conditions`. */
export const holdReasons = [
  'Budget',
  'Pacing',
  'GangMember',
  'Review',
  'NoPolicy',
  'Orphaned',
  'Conditions',
] as const;

export function holdReasonLabel(reasonKey: string): (typeof holdReasons)[number] {
  return (holdReasons as readonly string[]).includes(reasonKey)
    ? (reasonKey as (typeof holdReasons)[number])
    : 'Conditions';
}

export const holdChangesTotal = getOrCreate(
  'tollgate_hold_changes_total',
  () =>
    new Counter({
      name: 'tollgate_hold_changes_total',
      help: 'Held pods whose exact hold reason changed, by tenant and the new reason (every change, also those the audit trail does not record: it records a Hold when the blocking condition set changes, debounced).',
      labelNames: ['tenant', 'reason'],
      registers: [registry],
    }),
);

const precreated = new Set<string>();

/** Creates every series of the policy's tenants at zero, once per tenant. */
export function precreateGateReleaseSeries(policy: Policy): void {
  for (const action of expiryActions) expiredTotal.inc({ action }, 0);
  for (const tenant of policy.tenants.keys()) {
    if (precreated.has(tenant)) continue;
    precreated.add(tenant);
    for (const result of releaseResults) releasesTotal.inc({ tenant, result }, 0);
    for (const state of podStates) podsByState.set({ tenant, state }, 0);
    for (const reason of holdReasons) holdChangesTotal.inc({ tenant, reason }, 0);
    for (const reason of chargeReasons) budgetChargedPods.set({ tenant, reason }, 0);
    for (const reason of freeReasons) budgetFreedPods.set({ tenant, reason }, 0);
    for (const change of chargeChangeKinds) budgetChargeChangesTotal.inc({ tenant, change }, 0);
    budgetOverLimitPods.set({ tenant }, 0);
    gateDwellSeconds.zero({ tenant });
  }
  for (const gp of policy.gatePolicies) gatedPods.set({ tenant: gp.tenant, gate: gp.gate }, 0);
}

/** Publishes a pass's view of the cluster: gated counts, lifecycle states, charged and freed pods by reason. */
export function publishSummary(policy: Policy, summary: PassSummary): void {
  gatedPods.reset();
  for (const gp of policy.gatePolicies) gatedPods.set({ tenant: gp.tenant, gate: gp.gate }, 0);
  for (const g of summary.gated) gatedPods.set({ tenant: g.tenant, gate: g.gate }, g.count);
  oldestGatedPodTimestamp.reset();
  for (const [tenant, at] of Object.entries(summary.oldestGatedAt))
    oldestGatedPodTimestamp.set({ tenant }, at / 1000);
  for (const [tenant, states] of Object.entries(summary.states)) {
    for (const state of podStates) podsByState.set({ tenant, state }, states[state]);
  }
  for (const [tenant, reasons] of Object.entries(summary.charged)) {
    for (const reason of chargeReasons) budgetChargedPods.set({ tenant, reason }, reasons[reason]);
    const limit = policy.tenants.get(tenant)?.budget.pods;
    const charged = chargeReasons.reduce((sum, reason) => sum + reasons[reason], 0);
    budgetOverLimitPods.set({ tenant }, limit === undefined ? 0 : Math.max(0, charged - limit));
  }
  for (const [tenant, count] of Object.entries(summary.uncharged))
    budgetUnchargedPods.set({ tenant }, count);
  for (const [tenant, reasons] of Object.entries(summary.freed)) {
    for (const reason of freeReasons) budgetFreedPods.set({ tenant, reason }, reasons[reason]);
  }
}
