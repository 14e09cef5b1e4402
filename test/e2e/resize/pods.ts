/**
 * Pods of the resize e2e tests: a one-container worker ("app") and readers of its
 * requested (spec) and actuated (status) amounts, in millicores and bytes.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { toStoredAmount } from '../../../src/lib/quantity.ts';

/** A running worker pod with one container named `app` on `node`. */
export function workerPod(
  name: string,
  app: string,
  node: string,
  requests: { cpu: string; memory: string },
): V1Pod {
  return {
    metadata: { name, labels: { app } },
    spec: {
      nodeName: node,
      containers: [{ name: 'app', image: 'registry.example/worker:1', resources: { requests } }],
    },
  };
}

function specAmount(pod: V1Pod | undefined, resource: 'cpu' | 'memory', container: string) {
  const c = pod?.spec?.containers.find((x) => x.name === container);
  return toStoredAmount(resource, c?.resources?.requests?.[resource] ?? '0');
}

function actualAmount(pod: V1Pod | undefined, resource: 'cpu' | 'memory', container: string) {
  const c = pod?.status?.containerStatuses?.find((x) => x.name === container);
  return toStoredAmount(resource, c?.resources?.requests?.[resource] ?? '0');
}

/** Requested cpu of `container`, in millicores. */
export const cpuOf = (pod: V1Pod | undefined, container = 'app') =>
  specAmount(pod, 'cpu', container);
/** Cpu the kubelet reports as actuated for `container`, in millicores. */
export const actualCpuOf = (pod: V1Pod | undefined, container = 'app') =>
  actualAmount(pod, 'cpu', container);
/** Requested memory of `container`, in bytes. */
export const memoryOf = (pod: V1Pod | undefined, container = 'app') =>
  specAmount(pod, 'memory', container);
/** Memory the kubelet reports as actuated for `container`, in bytes. */
export const actualMemoryOf = (pod: V1Pod | undefined, container = 'app') =>
  actualAmount(pod, 'memory', container);
