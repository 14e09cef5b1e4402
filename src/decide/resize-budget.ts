/**
 * The pod-level budget (`spec.resources`) as the API server validates it: the sum of
 * the containers' requests must fit the pod-level request, and no container's limit
 * (or, without a limit, its request) may exceed the pod-level limit. A target that
 * breaks either is refused with 422 and must never be sent; the resize plan checks
 * every target here first and leaves the resource that would break it where it is.
 */
import { formatStoredAmount } from '../lib/quantity.ts';
import {
  type PodResources,
  type ResizableResource,
  resizableResources,
} from './resize-resources.ts';

export interface BudgetProblem {
  readonly resource: ResizableResource;
  readonly problem: string;
}

/** What in `target` breaks its own pod-level budget; empty without pod-level resources. */
export function podBudgetProblems(target: PodResources): BudgetProblem[] {
  const pod = target.pod;
  if (!pod) return [];
  const out: BudgetProblem[] = [];
  const containers = Object.entries(target.containers);
  for (const r of resizableResources) {
    const fmt = (value: number) => formatStoredAmount(r, value);
    const podRequest = pod.requests[r];
    const requested = containers.filter(([, c]) => c.requests[r] !== undefined);
    const sum = requested.reduce((total, [, c]) => total + (c.requests[r] ?? 0), 0);
    if (podRequest !== undefined && requested.length > 0 && sum > podRequest) {
      out.push({
        resource: r,
        problem: `${r}: container requests ${fmt(sum)} above the pod-level request ${fmt(podRequest)}`,
      });
      continue;
    }
    const podLimit = pod.limits[r];
    if (podLimit === undefined) continue;
    for (const [name, c] of containers) {
      const ceiling = c.limits[r] ?? c.requests[r];
      if (ceiling !== undefined && ceiling > podLimit) {
        out.push({
          resource: r,
          problem: `${r}: container ${name} ${c.limits[r] === undefined ? 'request' : 'limit'} ${fmt(ceiling)} above the pod-level limit ${fmt(podLimit)}`,
        });
        break;
      }
    }
  }
  return out;
}
