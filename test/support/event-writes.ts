/**
 * The dispatcher a test stack hands its event recorder: a small one of the stack's own
 * (one write at a time, 16 queued), beside the loop's, so Events are neither counted
 * with the loop's writes nor compete with them for its rate. `tollgate run` hands the
 * recorder the process's one dispatcher instead (src/run/writes.ts).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { createWriteExecutor } from '../../src/cluster/writer.ts';
import { createDispatcher } from '../../src/dispatch/queue.ts';
import type { Dispatcher } from '../../src/dispatch/types.ts';

export function eventDispatcher(kubeConfig: KubeConfig): Dispatcher {
  return createDispatcher({
    executor: createWriteExecutor(kubeConfig),
    concurrency: 1,
    capacity: 16,
  });
}
