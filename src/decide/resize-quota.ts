/**
 * ResourceQuota room already promised to resize writes the cluster view may not show
 * yet. The quota in the view lags the API server: the ResourceQuota admission plugin
 * raises `status.used` when it admits a resize, but the view sees that only after the
 * quota watch delivers it. Without this ledger, two pods of one namespace decided in the
 * same pass (or a pod decided again before the view caught up) would each be given the
 * whole room, and the second write would be refused with 403 "exceeded quota".
 *
 * The loop charges each planned step-up against its namespace before the next pod is
 * decided, and releases the charge when the write failed or once the quota informer
 * has seen everything up to the write's resourceVersion. A charge can only make a step
 * wait longer than needed, never let one through that the API server would refuse.
 */
import type { ResizePodLike, ResizeWriteOperation, ResourceQuotaLike } from './resize-objects.ts';
import {
  desiredResources,
  fromRecord,
  podLimits,
  podRequests,
  resizableResources,
  type Amounts,
  type PodResources,
} from './resize-resources.ts';
import { formatStoredAmount, toStoredAmount } from '../lib/quantity.ts';

/** How much more of a quota a write takes, by what the quota counts. */
export interface QuotaCharge {
  readonly requests: Amounts;
  readonly limits: Amounts;
}

function increase(before: Amounts, after: Amounts): Amounts {
  const out: Amounts = {};
  for (const r of resizableResources) {
    const delta = (after[r] ?? 0) - (before[r] ?? 0);
    if (delta > 0) out[r] = delta;
  }
  return out;
}

/**
 * The quota the resize `op` adds to `pod` (increases only; a decrease frees room only
 * once the kubelet has actuated it, and the quota controller counts the larger of the
 * spec and the allocated amounts until then). Undefined for a write that is not a resize.
 */
export function resizeCharge(
  pod: ResizePodLike,
  op: ResizeWriteOperation | { readonly type: string },
): QuotaCharge | undefined {
  if (op.type !== 'resize') return undefined;
  const resize = op as Extract<ResizeWriteOperation, { type: 'resize' }>;
  const before = desiredResources(pod);
  const changed = fromRecord({
    containers: Object.fromEntries(resize.containers.map((c) => [c.name, c.resources])),
    ...(resize.pod ? { pod: resize.pod } : {}),
  });
  const after: PodResources = {
    containers: { ...before.containers, ...changed.containers },
    ...(changed.pod ? { pod: changed.pod } : before.pod ? { pod: before.pod } : {}),
  };
  const charge = {
    requests: increase(podRequests(before), podRequests(after)),
    limits: increase(podLimits(before), podLimits(after)),
  };
  const empty = Object.keys(charge.requests).length + Object.keys(charge.limits).length === 0;
  return empty ? undefined : charge;
}

/** Quota keys resize can change, and what they count (the same table as the plan's headroom). */
const quotaKeys: Readonly<
  Record<string, { resource: 'cpu' | 'memory'; kind: 'requests' | 'limits' }>
> = {
  cpu: { resource: 'cpu', kind: 'requests' },
  'requests.cpu': { resource: 'cpu', kind: 'requests' },
  memory: { resource: 'memory', kind: 'requests' },
  'requests.memory': { resource: 'memory', kind: 'requests' },
  'limits.cpu': { resource: 'cpu', kind: 'limits' },
  'limits.memory': { resource: 'memory', kind: 'limits' },
};

/**
 * The quotas as they will be once `charges` are admitted: `status.used` raised by the
 * sum of the charges for every key a quota limits. The inputs are not changed.
 */
export function chargeQuotas(
  quotas: readonly ResourceQuotaLike[],
  charges: readonly QuotaCharge[],
): ResourceQuotaLike[] {
  if (charges.length === 0) return [...quotas];
  const total: QuotaCharge = { requests: {}, limits: {} };
  for (const charge of charges) {
    for (const kind of ['requests', 'limits'] as const) {
      for (const r of resizableResources) {
        const amount = charge[kind][r];
        if (amount !== undefined)
          (total[kind] as Amounts)[r] = ((total[kind] as Amounts)[r] ?? 0) + amount;
      }
    }
  }
  return quotas.map((quota) => {
    const hard = quota.status?.hard ?? quota.spec?.hard ?? {};
    const used: Record<string, string> = { ...(quota.status?.used ?? {}) };
    let changed = false;
    for (const key of Object.keys(hard)) {
      const meaning = quotaKeys[key];
      const extra = meaning ? total[meaning.kind][meaning.resource] : undefined;
      if (!meaning || !extra) continue;
      const now = toStoredAmount(meaning.resource, used[key] ?? '0');
      used[key] = formatStoredAmount(meaning.resource, now + extra);
      changed = true;
    }
    if (!changed) return quota;
    return { ...quota, status: { ...quota.status, hard, used } };
  });
}
