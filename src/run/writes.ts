/**
 * Parts 5 and 6 of `tollgate run`: the leader elector, and the dispatcher every API
 * write goes through, fenced by it (it refuses every write outside an open term), with
 * Kubernetes Events as its lowest-priority writes.
 */
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { RunConfig } from '../cli/run-config.ts';
import { measureCacheLag, type CacheLagMeter } from '../cluster/cache-lag.ts';
import {
  createEventRecorder,
  type EventRecord,
  type EventRecorder,
  type EventSubject,
} from '../cluster/events.ts';
import { LeaderElector, leaseClientFromKubeConfig } from '../cluster/leader.ts';
import { FreshnessHealth } from '../cluster/stale-guard.ts';
import type { ClusterView } from '../cluster/types.ts';
import { createReadBack, createWriteExecutor } from '../cluster/writer.ts';
import { createDispatcher, type PriorityDispatcher } from '../dispatch/queue.ts';
import type { Dispatcher, TargetPresence } from '../dispatch/types.ts';
import type { Transition } from '../dispatch/fallback.ts';
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
 * leader writes. The fence is asked twice: by the dispatcher before a send, and by the
 * executor as the request reaches its connection (a write that waited there while the
 * process was paused past its lease is never sent).
 */
export function createRunDispatcher(options: {
  config: Pick<RunConfig, 'writes'>;
  kubeConfig: KubeConfig;
  cacheLag: CacheLagMeter;
  elector: Pick<LeaderElector, 'fence' | 'onStoppedLeading'>;
  termWrites: TermWrites;
  view?: Pick<ClusterView, 'pod' | 'onChange'>;
  log?: Logger;
  /** tollgate's own Events: one when writes fall back to synchronous sends, one when they return. */
  selfEvents?: Pick<ControllerEvents, 'record'>;
}): PriorityDispatcher {
  const { config, view, log } = options;
  const dispatcher = createDispatcher({
    ...config.writes,
    executor: options.termWrites.executor(
      measureCacheLag(
        createWriteExecutor(options.kubeConfig, { fence: options.elector.fence }),
        options.cacheLag,
      ),
    ),
    readBack: createReadBack(options.kubeConfig),
    fence: options.elector.fence,
    ...(view ? { presence: podPresence(view) } : {}),
    onFallback: (transition) => {
      if (transition.to === 'degraded')
        log?.warn(
          { reason: transition.reason, detail: transition.detail },
          'API writes fell back to synchronous sends (one at a time, no backlog)',
        );
      else log?.info({ detail: transition.detail }, 'API writes are queued again');
      options.selfEvents?.record(fallbackEvent(transition));
    },
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

/**
 * Events about tollgate itself (its write path), regarding its Lease, so `kubectl
 * describe lease` and `kubectl get events` in its namespace show when and why. Events are
 * written by the dispatcher they may be about: the recorder is attached once built, and
 * what is recorded before is kept until then.
 */
export class ControllerEvents {
  readonly #subject: EventSubject;
  #recorder: Pick<EventRecorder, 'record'> | undefined;
  readonly #early: EventRecord[] = [];

  constructor(lease: { readonly namespace: string; readonly name: string }) {
    this.#subject = {
      namespace: lease.namespace,
      name: lease.name,
      uid: '',
      kind: 'Lease',
      apiVersion: 'coordination.k8s.io/v1',
    };
  }

  attach(recorder: Pick<EventRecorder, 'record'>): void {
    this.#recorder = recorder;
    for (const event of this.#early.splice(0)) recorder.record(this.#subject, event);
  }

  record(event: EventRecord): void {
    if (this.#recorder) this.#recorder.record(this.#subject, event);
    else if (this.#early.length < 100) this.#early.push(event);
  }
}

/**
 * tollgate's own Events (on its Lease) and the stale-guard's health, which tells them
 * and the log when freshness cannot be established and when it can again.
 */
export function createWritePathHealth(
  config: Pick<RunConfig, 'lease'>,
  log: Logger,
): { selfEvents: ControllerEvents; freshness: FreshnessHealth } {
  const selfEvents = new ControllerEvents(config.lease);
  const freshness = new FreshnessHealth({
    onChange: (degraded) => {
      if (degraded === undefined) log.info('stale-guard: freshness can be established again');
      else log.warn({ reason: degraded }, 'stale-guard degraded: freshness cannot be established');
      selfEvents.record(freshnessEvent(degraded));
    },
  });
  return { selfEvents, freshness };
}

/** The Event of a fallback transition: writes went synchronous, or back to the queue. */
export function fallbackEvent(transition: Transition): EventRecord {
  return transition.to === 'degraded'
    ? {
        type: 'Warning',
        reason: 'WritePathDegraded',
        action: 'FallBack',
        note: `API writes fell back to synchronous sends (one at a time, no backlog; queued releases and Events cancelled, safety writes kept): ${transition.detail}`,
      }
    : {
        type: 'Normal',
        reason: 'WritePathRecovered',
        action: 'Resume',
        note: `API writes are queued again: ${transition.detail}`,
      };
}

/** The Event of a stale-guard change: freshness cannot be established, or can again. */
export function freshnessEvent(degraded: string | undefined): EventRecord {
  return degraded === undefined
    ? {
        type: 'Normal',
        reason: 'StaleGuardRecovered',
        action: 'Resume',
        note: 'freshness can be established again (live reads answer again, no pod waits past the stale limit): destructive acts on pods the cache is behind on go on',
      }
    : {
        type: 'Warning',
        reason: 'StaleGuardDegraded',
        action: 'Hold',
        note: `freshness cannot be established, destructive acts on pods the cache is behind on wait: ${degraded}`,
      };
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
 * The recorder of tollgate's own Events: a handful (fallback entered and left, stale-guard
 * degraded and recovered), which wait for room in the dispatcher rather than be dropped by
 * the very fallback they report.
 */
export function createSelfEventRecorder(
  dispatcher: Dispatcher,
  config: Pick<RunConfig, 'identity'>,
  log: Logger,
): EventRecorder {
  return createEventRecorder(dispatcher, {
    reportingInstance: config.identity,
    logger: log,
    waitForRoom: true,
  });
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
