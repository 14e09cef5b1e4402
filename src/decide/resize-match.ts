/**
 * Which running pods each ResizePolicy manages: in the policy tenant's namespaces,
 * matching its selector, Running on a node; a pod two policies match belongs to the
 * first (policy order is the compiled order, stable per commit). The resize loop and
 * `tollgate plan` both use this, so a plan's "newly matched / no longer matched" is the
 * loop's own notion of membership.
 */
import type { Policy, ResizePolicy } from '../policy/model.ts';
import { matchesSelector } from './gates.ts';
import type { ResizePodLike } from './resize-objects.ts';

export function resizePodsByPolicy<P extends ResizePodLike>(
  policy: Policy,
  pods: Iterable<P>,
  onUnknownTenant: (rp: ResizePolicy) => void = () => undefined,
): Map<ResizePolicy, P[]> {
  const claimed = new Set<string>();
  const out = new Map<ResizePolicy, P[]>();
  const all = [...pods];
  for (const rp of policy.resizePolicies) {
    const tenant = policy.tenants.get(rp.tenant);
    if (!tenant) {
      onUnknownTenant(rp);
      continue;
    }
    const namespaces = new Set(tenant.namespaces);
    const mine: P[] = [];
    for (const pod of all) {
      const ns = pod.metadata?.namespace ?? '';
      const key = `${ns}/${pod.metadata?.name ?? ''}`;
      if (claimed.has(key) || !namespaces.has(ns)) continue;
      if (!matchesSelector(pod.metadata?.labels ?? {}, rp.selector)) continue;
      if (pod.status?.phase !== 'Running' || !pod.spec?.nodeName) continue;
      claimed.add(key);
      mine.push(pod);
    }
    out.set(rp, mine);
  }
  return out;
}
