/**
 * Parts 5 and 6 of `tollgate run`: the leader elector, and the dispatcher every API
 * write goes through, fenced by it (it refuses every write outside an open term), with
 * Kubernetes Events as its lowest-priority writes.
 */
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { RunConfig } from '../cli/run-config.ts';
import { measureCacheLag, type CacheLagMeter } from '../cluster/cache-lag.ts';
import { createEventRecorder, type EventRecorder } from '../cluster/events.ts';
import { LeaderElector, leaseClientFromKubeConfig } from '../cluster/leader.ts';
import { createWriteExecutor } from '../cluster/writer.ts';
import { createDispatcher } from '../dispatch/queue.ts';
import type { Dispatcher } from '../dispatch/types.ts';
import type { TermWrites } from '../loops/leadership.ts';
import type { Logger } from '../observe/log.ts';

export function createLeaderElector(
  config: Pick<RunConfig, 'lease' | 'identity'>,
  kubeConfig: KubeConfig,
  log: Logger,
): LeaderElector {
  return new LeaderElector({
    leases: leaseClientFromKubeConfig(kubeConfig),
    namespace: config.lease.namespace,
    name: config.lease.name,
    identity: config.identity,
    timings: config.lease.timings,
    logger: log,
  });
}

/**
 * The process's one dispatcher: writes go through the term's executor (so a term's
 * writes can be cancelled together), and the view's cache lag is measured on them.
 */
export function createRunDispatcher(options: {
  config: Pick<RunConfig, 'api'>;
  kubeConfig: KubeConfig;
  cacheLag: CacheLagMeter;
  elector: Pick<LeaderElector, 'fence'>;
  termWrites: TermWrites;
}): Dispatcher {
  const { config } = options;
  return createDispatcher({
    executor: options.termWrites.executor(
      measureCacheLag(createWriteExecutor(options.kubeConfig), options.cacheLag),
    ),
    fence: options.elector.fence,
    qps: config.api.qps,
    burst: config.api.qps * 2,
    concurrency: config.api.concurrency,
  });
}

/** Queued writes are cancelled; in-flight ones get the shutdown timeout to finish. */
export async function closeWithin(
  dispatcher: Dispatcher,
  timeoutMs: number,
  log: Logger,
): Promise<void> {
  if ((await within(dispatcher.close({ cancelQueued: true }), timeoutMs)) === 'timeout') {
    log.warn({ timeoutMs }, 'in-flight writes did not finish within the shutdown timeout');
  }
}

/** How the loops report a pod's Event. */
export type PodEventSink = (
  pod: V1Pod,
  event: { type: 'Normal' | 'Warning'; reason: string; message: string },
) => void;

export interface PodEvents {
  readonly recorder: EventRecorder;
  readonly toEvent: PodEventSink;
}

/** Events are the dispatcher's lowest-priority writes (see cluster/events.ts). */
export function createPodEvents(
  dispatcher: Dispatcher,
  config: Pick<RunConfig, 'identity'>,
  log: Logger,
): PodEvents {
  const recorder = createEventRecorder(dispatcher, {
    reportingInstance: config.identity,
    logger: log,
  });
  const toEvent: PodEventSink = (pod, event) => {
    const metadata = pod.metadata ?? {};
    recorder.record(
      { namespace: metadata.namespace ?? '', name: metadata.name ?? '', uid: metadata.uid ?? '' },
      { type: event.type, reason: event.reason, action: event.reason, note: event.message },
    );
  };
  return { recorder, toEvent };
}

/**
 * Events are rate-limited (a few per second): a long backlog is not worth holding a
 * shutdown for. Two seconds to write what it can; the rest is dropped and logged.
 */
export async function closeEvents(recorder: EventRecorder, log: Logger): Promise<void> {
  if ((await within(recorder.close(), 2_000)) === 'timeout') {
    log.warn('Kubernetes Events still queued at shutdown were dropped');
  }
}

export async function within(
  work: Promise<unknown>,
  timeoutMs: number,
): Promise<'done' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    return await Promise.race([work.then(() => 'done' as const), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
