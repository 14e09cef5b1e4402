/**
 * Nodes that cannot run their pods: the Ready condition False, or Unknown (the kubelet
 * stopped reporting and the node lifecycle controller said so), since the condition's
 * last change. The budget stops charging a released pod bound to such a node once its
 * tenant's `budget.unreadyNodeGrace` has passed (lifecycle.ts, `budgetFreedBy`).
 */
import { timestampMs, type NodeLike } from './objects.ts';

export interface NodeReadiness {
  readonly now: number;
  /** Node name -> since when its Ready condition is not True (epoch ms). */
  readonly notReadySince: ReadonlyMap<string, number>;
}

/** No node known not ready: every bound pod keeps its charge. */
export const allNodesReady: NodeReadiness = { now: 0, notReadySince: new Map() };

/**
 * Since when each node that is not Ready has been so. A node without a Ready condition
 * (not yet reported) is left out; one whose condition has no transition time counts from
 * `now`, so the grace starts when tollgate first sees it.
 */
export function nodeReadiness(nodes: Iterable<NodeLike>, now: number): NodeReadiness {
  const notReadySince = new Map<string, number>();
  for (const node of nodes) {
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
    const name = node.metadata?.name;
    if (!ready || ready.status === 'True' || !name) continue;
    notReadySince.set(name, Math.min(now, timestampMs(ready.lastTransitionTime) ?? now));
  }
  return { now, notReadySince };
}
