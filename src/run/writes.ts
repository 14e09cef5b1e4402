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
import type { ClusterView } from '../cluster/types.ts';
import { createReadBack, createWriteExecutor } from '../cluster/writer.ts';
import { createDispatcher, type PriorityDispatcher } from '../dispatch/queue.ts';
import type { Dispatcher, TargetPresence } from '../dispatch/types.ts';
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
 * Its knobs come from the run configuration (`config.writes`, validated there, the
 * fence margin included). A write whose answer was lost is read back before any retry.
 * The view keeps it from writing to pods that are gone: a pod's delete cancels its
 * queued and backing-off writes, and a write to a pod the view shows gone or replaced
 * (new uid) is dropped right before its send. When a leader term ends, the writes in
 * flight are aborted and their outcome read back, instead of landing while the next
 * leader writes.
 */
export function createRunDispatcher(options: {
  config: Pick<RunConfig, 'writes'>;
  kubeConfig: KubeConfig;
  cacheLag: CacheLagMeter;
  elector: Pick<LeaderElector, 'fence' | 'onStoppedLeading'>;
  termWrites: TermWrites;
  view?: Pick<ClusterView, 'pod' | 'onChange'>;
  log?: Logger;
}): PriorityDispatcher {
  const { config, view, log } = options;
  const dispatcher = createDispatcher({
    ...config.writes,
    executor: options.termWrites.executor(
      measureCacheLag(createWriteExecutor(options.kubeConfig), options.cacheLag),
    ),
    readBack: createReadBack(options.kubeConfig),
    fence: options.elector.fence,
    ...(view ? { presence: podPresence(view) } : {}),
    onFallback: (transition) =>
      transition.to === 'degraded'
        ? log?.warn(
            { reason: transition.reason, detail: transition.detail },
            'API writes fell back to synchronous sends (one at a time, no backlog)',
          )
        : log?.info({ detail: transition.detail }, 'API writes are queued again'),
  });
  view?.onChange((change) => {
    if (change.resource !== 'pods' || change.type !== 'DELETED') return;
    dispatcher.cancelObject(change.key, {
      uid: change.object.metadata?.uid,
      reason: 'the pod was deleted',
    });
  });
  options.elector.onStoppedLeading(() => dispatcher.fenceClosed('leadership lost'));
  return dispatcher;
}

/** The view's word on a write's pod; Events and writes without a uid are not judged. */
export function podPresence(view: Pick<ClusterView, 'pod'>): TargetPresence {
  return (request) => {
    const { namespace, name, uid } = request.target;
    if (request.op.type === 'event' || uid === '') return 'unknown';
    const pod = view.pod(namespace, name);
    if (!pod) return 'gone';
    return pod.metadata?.uid === uid ? 'present' : 'replaced';
  };
}

/**
 * Queued writes are cancelled; in-flight ones get the shutdown timeout to finish. Those
 * still in flight then are aborted and their outcome read back (bounded by the attempt
 * timeout), and only then does this return: the lease is released after it (see
 * main.ts's shutdown order), so no write of this replica lands under the next leader.
 */
export async function closeWithin(
  dispatcher: Dispatcher & { fenceClosed?: (reason: string) => void },
  timeoutMs: number,
  log: Logger,
): Promise<void> {
  const closing = dispatcher.close({ cancelQueued: true });
  if ((await within(closing, timeoutMs)) === 'done') return;
  log.warn(
    { timeoutMs },
    'in-flight writes did not finish within the shutdown timeout; aborting them and reading back their outcome',
  );
  dispatcher.fenceClosed?.('shutdown timeout passed with the write in flight');
  await closing;
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
