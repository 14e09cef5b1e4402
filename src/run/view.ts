/**
 * Part 3 of `tollgate run`: the cluster connection, the cluster view scoped by the
 * policy (re-scoped on each new snapshot), and the stale-guards that watch its lag.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { RunConfig } from '../cli/run-config.ts';
import type { CacheLagMeter } from '../cluster/cache-lag.ts';
import { reuseConnections } from '../cluster/client.ts';
import { loadKubeconfig } from '../cluster/kubeconfig.ts';
import { StaleGuard, type FreshnessHealth } from '../cluster/stale-guard.ts';
import type { ObjectReference } from '../cluster/types.ts';
import { createClusterView, type LiveClusterView } from '../cluster/view.ts';
import type { Logger } from '../observe/log.ts';
import type { Policy } from '../policy/model.ts';
import type { PolicyFeed } from './policy.ts';

/** The kubeconfig found as kubectl finds it (and the context given), else the pod's service account. */
export function connectCluster(config: Pick<RunConfig, 'cluster'>): KubeConfig {
  return reuseConnections(loadKubeconfig(config.cluster.source, config.cluster.context));
}

/**
 * The view over the namespaces the first policy's tenants own and the objects its
 * ObjectCondition gates reference, re-scoped whenever a new snapshot arrives. Started,
 * not yet synced: the caller waits for `whenSynced` (and can stop it meanwhile).
 */
export function startClusterView(options: {
  kubeConfig: KubeConfig;
  policies: Pick<PolicyFeed, 'onPolicy'>;
  first: Policy;
  log: Logger;
}): LiveClusterView {
  const view = createClusterView({
    kubeConfig: options.kubeConfig,
    namespaces: managedNamespaces(options.first),
    logger: options.log,
  });
  let scopedCommit = '';
  const scope = (policy: Policy): void => {
    if (policy.commit === scopedCommit) return;
    scopedCommit = policy.commit;
    view.setNamespaces(managedNamespaces(policy));
    view.watchObjects(referencedObjects(policy));
  };
  scope(options.first);
  options.policies.onPolicy((policy) => scope(policy));
  view.start();
  return view;
}

/** Namespaces any tenant owns: the only pods tollgate needs to see. */
export function managedNamespaces(policy: Policy): string[] {
  return [...new Set([...policy.tenants.values()].flatMap((tenant) => tenant.namespaces))].sort();
}

/** Objects ObjectCondition gates reference, per namespace of the tenant when not explicit. */
export function referencedObjects(policy: Policy): ObjectReference[] {
  const refs = new Map<string, ObjectReference>();
  for (const gatePolicy of policy.gatePolicies) {
    const tenant = policy.tenants.get(gatePolicy.tenant);
    for (const condition of gatePolicy.conditions) {
      if (condition.type !== 'ObjectCondition') continue;
      const namespaces = condition.object.namespace
        ? [condition.object.namespace]
        : (tenant?.namespaces ?? []);
      for (const namespace of namespaces) {
        const ref = { ...condition.object, namespace };
        refs.set(`${ref.apiVersion}|${ref.kind}|${namespace}|${ref.name}`, ref);
      }
    }
  }
  return [...refs.values()];
}

export interface LoopGuards {
  readonly gate: StaleGuard;
  readonly resize: StaleGuard;
}

/**
 * One stale-guard per loop, for the life of the process: a write made in one leader
 * term is still guarded in the next. Built once the view has synced (until then nothing
 * counts as fresh), fed the view's lag as measured on tollgate's own pod writes, and
 * the staleness policy of each new snapshot; `stale` (run configuration): after how many
 * consecutive skips one live read decides; `health`: told when a pod has waited past the
 * stale limit (5 min) for the cache, which makes freshness degraded.
 */
export function createStaleGuards(
  first: Policy,
  view: { readonly cacheLag: Pick<CacheLagMeter, 'onMeasured'> },
  policies: Pick<PolicyFeed, 'onPolicy'>,
  stale: Partial<Pick<RunConfig['stale'], 'liveReadAfterSkips'>> = {},
  health?: FreshnessHealth,
): LoopGuards {
  const { liveReadAfterSkips } = stale;
  const knobs = {
    ...(liveReadAfterSkips === undefined ? {} : { liveReadAfterSkips }),
    ...(health ? { health } : {}),
  };
  const guards: LoopGuards = {
    gate: new StaleGuard({ policy: first.staleness, loop: 'gate-release', ...knobs }),
    resize: new StaleGuard({ policy: first.staleness, loop: 'resize', ...knobs }),
  };
  for (const guard of Object.values(guards)) guard.markSynced();
  view.cacheLag.onMeasured((ms) => {
    for (const guard of Object.values(guards)) guard.observeCacheLag(ms);
  });
  policies.onPolicy((policy) => {
    for (const guard of Object.values(guards)) guard.setPolicy(policy.staleness);
  });
  return guards;
}
