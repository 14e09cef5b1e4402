/**
 * Keeps each governed pod's `tollgate.io/Released` condition current (the rules and the
 * write itself are pure: decide/released-condition.ts). The gate-release loop reports a
 * recorded Hold (`held`) and a gate it removed (`released`); this turns each into at most
 * one pods/status patch, sent through the dispatcher in its background band (after every
 * safety and work write), so the condition never delays a release.
 *
 * Bounded like Events (cluster/events.ts): a backlog here keyed by pod uid, where a newer
 * wanted condition replaces an older one not yet sent (two reason changes in a burst are
 * one write), at most `maxQueued` of these writes in the dispatcher at a time, and a
 * backlog of at most `maxBacklog` pods beyond which new ones are dropped and counted. A
 * write that fails is logged and counted, not retried in a loop: the next reason change
 * writes again, and a restarted controller compares with what the pod shows.
 */
import type { V1Pod } from '@kubernetes/client-node';
import {
  heldCondition,
  releasedCondition,
  releasedConditionWrite,
  type WantedCondition,
} from '../decide/released-condition.ts';
import type {
  Dispatcher,
  PodConditionWrite,
  WriteRequest,
  WriteResult,
  WriteTarget,
} from '../dispatch/types.ts';
import type { Clock } from '../lib/clock.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import { registeredCounter } from '../observe/metrics.ts';

/** What the gate-release loop tells about a pod's condition. */
export interface ReleasedConditionSink {
  /** A Hold was recorded for the pod (its reason changed). */
  held(pod: V1Pod, reasonKey: string, message: string): void;
  /** tollgate removed its gate from the pod. */
  released(pod: V1Pod, message: string): void;
}

export interface ReleasedConditions extends ReleasedConditionSink {
  /** Pods whose condition write waits here (not yet handed to the dispatcher). */
  readonly backlog: number;
}

const conditionResults = ['succeeded', 'failed', 'dropped'] as const;
export const releasedConditionWritesTotal = registeredCounter({
  name: 'tollgate_released_condition_writes_total',
  help: 'Writes of the tollgate.io/Released pod condition, by result (dropped: backlog full)',
  labelNames: ['result'],
});
for (const result of conditionResults) releasedConditionWritesTotal.inc({ result }, 0);

/** Below every GatePolicy priority; the band (background) already orders it after real work. */
const conditionPriority = -1_000_001;

/**
 * The dispatcher request that writes `condition` on the pod `target`: keyed by pod and
 * condition type (a newer one replaces one still queued), in the background band below
 * every GatePolicy priority, so that a condition never delays a release.
 */
export function conditionWriteRequest(
  target: WriteTarget,
  condition: PodConditionWrite,
  request: Pick<WriteRequest, 'tenant' | 'deadline' | 'decisionId'>,
): WriteRequest {
  return {
    key: `${target.namespace}/${target.name}#${condition.type}`,
    target,
    op: { type: 'podCondition', condition },
    priority: conditionPriority,
    band: 'background',
    ...request,
  };
}

interface Due {
  readonly pod: V1Pod;
  readonly write: PodConditionWrite;
}

export function createReleasedConditions(options: {
  readonly dispatcher: Dispatcher;
  readonly clock: Clock;
  readonly log?: Logger;
  readonly maxQueued?: number;
  readonly maxBacklog?: number;
  readonly deadlineMs?: number;
  /**
   * Told the resourceVersion each condition write made (the gate-release stale-guard's
   * recordWrite): a status write moves the pod's resourceVersion, and a release planned
   * on a view from before it conflicts (soak seed 32: two of a gang's three members, so
   * the third was released alone for 23 s).
   */
  readonly recordWrite?: (key: string, resourceVersion: string) => void;
}): ReleasedConditions {
  const { dispatcher, clock } = options;
  const log = options.log ?? silentLogger;
  const maxQueued = options.maxQueued ?? 4;
  const maxBacklog = options.maxBacklog ?? 10_000;
  const deadlineMs = options.deadlineMs ?? 60_000;
  const backlog = new Map<string, Due>();
  /** uid -> the condition write in the dispatcher, until it settles. */
  const sending = new Map<string, PodConditionWrite>();
  let waitingForRoom = false;

  const want = (pod: V1Pod, wanted: WantedCondition): void => {
    const uid = pod.metadata?.uid ?? '';
    const write = releasedConditionWrite(pod, wanted, clock.now(), sending.get(uid));
    if (!write) {
      backlog.delete(uid);
      return;
    }
    if (!backlog.has(uid) && backlog.size >= maxBacklog) {
      releasedConditionWritesTotal.inc({ result: 'dropped' });
      return;
    }
    backlog.delete(uid); // the newest goes to the end of the line
    backlog.set(uid, { pod, write });
    pump();
  };

  const settled = (uid: string, due: Due, result: WriteResult): void => {
    if (sending.get(uid) === due.write) sending.delete(uid);
    if (result.result === 'succeeded') {
      releasedConditionWritesTotal.inc({ result: 'succeeded' });
      const { namespace, name } = due.pod.metadata ?? {};
      options.recordWrite?.(`${namespace}/${name}`, result.resourceVersion);
    } else {
      releasedConditionWritesTotal.inc({ result: 'failed' });
      log.info(
        { pod: `${due.pod.metadata?.namespace}/${due.pod.metadata?.name}`, result },
        'tollgate.io/Released condition not written',
      );
    }
    pump();
  };

  function pump(): void {
    while (sending.size < maxQueued && backlog.size > 0 && !waitingForRoom) {
      const [uid, due] = backlog.entries().next().value as [string, Due];
      backlog.delete(uid);
      const metadata = due.pod.metadata ?? {};
      const target = {
        namespace: metadata.namespace ?? '',
        name: metadata.name ?? '',
        uid,
        resourceVersion: metadata.resourceVersion ?? '',
      };
      const enqueued = dispatcher.enqueue(
        conditionWriteRequest(target, due.write, {
          tenant: target.namespace,
          deadline: clock.now() + deadlineMs,
          decisionId: `released-condition:${uid}:${due.write.reason}`,
        }),
      );
      if (!enqueued.accepted && enqueued.reason === 'full') {
        // Back in line (unless a newer one came meanwhile); tried again once there is room.
        if (!backlog.has(uid)) backlog.set(uid, due);
        waitingForRoom = true;
        void dispatcher.whenNotFull().then(
          () => {
            waitingForRoom = false;
            pump();
          },
          // The term ended (a term-bound dispatcher's wait rejects): nothing more this term.
          () => undefined,
        );
        return;
      }
      if (!enqueued.accepted) {
        // Closed: nothing more is written.
        releasedConditionWritesTotal.inc({ result: 'dropped' }, backlog.size + 1);
        backlog.clear();
        return;
      }
      sending.set(uid, due.write);
      void enqueued.done.then((result) => settled(uid, due, result));
    }
  }

  return {
    held: (pod, reasonKey, message) => want(pod, heldCondition(reasonKey, message)),
    released: (pod, message) => want(pod, releasedCondition(message)),
    get backlog() {
      return backlog.size;
    },
  };
}
