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

/** Distinct quantities remembered per resource name, and resource names, at most. */
const REMEMBERED_AMOUNTS = 1024;
const storedAmounts = new Map<string, Map<string | number, number>>();

/**
 * `toStoredAmount`, remembered: a pass reads the same few quantity texts on thousands of
 * pods. A text that does not parse is not remembered (it throws each time, as before).
 */
function storedAmount(name: string, value: string | number): number {
  let byValue = storedAmounts.get(name);
  if (byValue === undefined) {
    if (storedAmounts.size >= REMEMBERED_AMOUNTS) return toStoredAmount(name, value);
    byValue = new Map();
    storedAmounts.set(name, byValue);
  }
  let amount = byValue.get(value);
  if (amount === undefined) {
    amount = toStoredAmount(name, value);
    if (byValue.size < REMEMBERED_AMOUNTS) byValue.set(value, amount);
  }
  return amount;
}

function amountsOf(quantities: Quantities): Amounts {
  const out: Amounts = {};
  if (quantities === undefined || quantities === null) return out;
  for (const name of Object.keys(quantities))
    out[name] = storedAmount(name, quantities[name] as string | number);
  return out;
}

function containerRequests(container: ContainerLike): Amounts {
  const requests = amountsOf(container.resources?.requests);
  const limits = container.resources?.limits;
  if (limits === undefined || limits === null) return requests;
  for (const name of Object.keys(limits)) {
    const limit = storedAmount(name, limits[name] as string | number);
    if (!(name in requests)) requests[name] = limit;
  }
  return requests;
}

export function addInto(target: Amounts, add: Readonly<Amounts>): Amounts {
  for (const name of Object.keys(add)) target[name] = (target[name] ?? 0) + (add[name] as number);
  return target;
}

function maxInto(target: Amounts, other: Readonly<Amounts>): void {
  for (const [name, value] of Object.entries(other))
    target[name] = Math.max(target[name] ?? 0, value);
}

/**
 * Init containers into a pod's requests: sidecars (restartPolicy Always) add to them and
 * run beside every later init container; the pod needs at least the peak of any init
 * container with the sidecars started before it.
 */
function addInitContainers(requests: Amounts, initContainers: readonly ContainerLike[]): void {
  const sidecars: Amounts = {};
  const initPeak: Amounts = {};
  for (const container of initContainers) {
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
}

/**
 * Requests already computed, per pod object. The view replaces a pod's object on every
 * change and never edits one, so an object's requests never change: a pass over 10,000
 * pods, most of them unchanged since the last, reads them here (podRequests was 9% of a
 * steady pass). Frozen, so a caller that would add into them fails loudly instead of
 * corrupting every later pass.
 */
const requestsOfPod = new WeakMap<PodLike, Readonly<Amounts>>();

export function podRequests(pod: PodLike): Readonly<Amounts> {
  let requests = requestsOfPod.get(pod);
  if (requests === undefined) {
    requests = Object.freeze(computePodRequests(pod));
    requestsOfPod.set(pod, requests);
  }
  return requests;
}

function computePodRequests(pod: PodLike): Amounts {
  const spec = pod.spec;
  const containers = spec?.containers;
  // One container and nothing else to add (most pods): its requests are the pod's, as
  // summing them into an empty tally gives, without the tally (a pass asks every candidate).
  if (
    containers?.length === 1 &&
    (spec?.initContainers?.length ?? 0) === 0 &&
    spec?.resources?.requests === undefined &&
    spec?.overhead === undefined
  )
    return containerRequests(containers[0] as ContainerLike);
  const requests: Amounts = {};
  for (const container of spec?.containers ?? []) addInto(requests, containerRequests(container));
  // Most pods have no init containers: no tallies for them (a pass asks every candidate).
  const initContainers = spec?.initContainers;
  if (initContainers !== undefined && initContainers.length > 0)
    addInitContainers(requests, initContainers);

  const podLevel = spec?.resources?.requests;
  if (podLevel !== undefined)
    for (const [name, value] of Object.entries(amountsOf(podLevel))) {
      if (name === 'cpu' || name === 'memory') requests[name] = value;
    }
  if (spec?.overhead !== undefined) addInto(requests, amountsOf(spec.overhead));
  return requests;
}
