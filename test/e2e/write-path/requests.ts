/** Write requests of the write-path e2e tests, built from a pod as the API server served it. */
import type { V1Pod } from '@kubernetes/client-node';
import type { WriteRequest } from '../../../src/dispatch/types.ts';

/**
 * A request removing `gate` (index 0) from `pod`, keyed and fenced on the pod's uid and
 * resourceVersion, for the pod's namespace as tenant, due in ten minutes; `fields` override.
 */
export function removeGateRequest(
  pod: V1Pod,
  gate: string,
  fields: Partial<WriteRequest> & Pick<WriteRequest, 'decisionId'>,
): WriteRequest {
  const namespace = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  return {
    key: `${namespace}/${name}`,
    target: {
      namespace,
      name,
      uid: pod.metadata?.uid ?? '',
      resourceVersion: pod.metadata?.resourceVersion ?? '',
    },
    op: { type: 'removeGate', gate, gateIndex: 0 },
    priority: 0,
    tenant: namespace,
    deadline: Date.now() + 600_000,
    ...fields,
  };
}
