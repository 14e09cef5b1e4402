/**
 * A pod's effective resource requests, computed the way kube-scheduler does
 * (component-helpers resource.PodRequests), so tollgate's budget charges a pod exactly
 * what the scheduler will place:
 *
 * - regular containers are summed;
 * - restartable init containers (sidecars, restartPolicy Always) run alongside, so they
 *   are added to the sum, and each later init container runs next to the sidecars
 *   started before it;
 * - the pod needs the larger of that sum and the peak of the init phase;
 * - pod-level `spec.resources.requests`, where set, replaces the container aggregate for
 *   those resources (cpu and memory);
 * - `spec.overhead` (RuntimeClass) is added on top.
 *
 * Amounts are in tollgate's stored units (cpu millicores, bytes, counts). A request
 * that is absent but has a limit takes the limit, as API defaulting does.
 */
import { toStoredAmount } from '../lib/quantity.ts';
import type { ContainerLike, PodLike, Quantities } from './objects.ts';

export type Amounts = Record<string, number>;

function amountsOf(quantities: Quantities): Amounts {
  const out: Amounts = {};
  for (const [name, value] of Object.entries(quantities ?? {}))
    out[name] = toStoredAmount(name, value);
  return out;
}

function containerRequests(container: ContainerLike): Amounts {
  const requests = amountsOf(container.resources?.requests);
  for (const [name, value] of Object.entries(amountsOf(container.resources?.limits))) {
    if (!(name in requests)) requests[name] = value;
  }
  return requests;
}

export function addInto(target: Amounts, add: Readonly<Amounts>): Amounts {
  for (const [name, value] of Object.entries(add)) target[name] = (target[name] ?? 0) + value;
  return target;
}

function maxInto(target: Amounts, other: Readonly<Amounts>): void {
  for (const [name, value] of Object.entries(other))
    target[name] = Math.max(target[name] ?? 0, value);
}

export function podRequests(pod: PodLike): Amounts {
  const spec = pod.spec;
  const requests: Amounts = {};
  for (const container of spec?.containers ?? []) addInto(requests, containerRequests(container));

  const sidecars: Amounts = {};
  const initPeak: Amounts = {};
  for (const container of spec?.initContainers ?? []) {
    const own = containerRequests(container);
    if (container.restartPolicy === 'Always') {
      addInto(requests, own);
      addInto(sidecars, own);
      maxInto(initPeak, sidecars);
    } else {
      maxInto(initPeak, addInto({ ...own }, sidecars));
    }
  }
  maxInto(requests, initPeak);

  for (const [name, value] of Object.entries(amountsOf(spec?.resources?.requests))) {
    if (name === 'cpu' || name === 'memory') requests[name] = value;
  }
  addInto(requests, amountsOf(spec?.overhead));
  return requests;
}
