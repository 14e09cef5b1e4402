/**
 * The contract of the API write dispatcher: every write tollgate makes to the API
 * server is one `WriteRequest` through one bounded priority queue (see queue.ts).
 */
import type { EventsV1Event } from '@kubernetes/client-node';
import type { ObjectKey } from '../cluster/types.ts';

export interface ResourceList {
  readonly requests?: Readonly<Record<string, string>>;
  readonly limits?: Readonly<Record<string, string>>;
}

/** The closed set of writes tollgate makes. */
export type WriteOperation =
  | {
      /** JSON patch: test resourceVersion, test the gate at its index, remove it. */
      readonly type: 'removeGate';
      readonly gate: string;
      readonly gateIndex: number;
      /** Also set the annotation tollgate.io/released (the gate) in the same patch; whether the pod had annotations at the decided version. */
      readonly markReleased?: { readonly annotationsPresent: boolean };
    }
  | {
      /** pods/resize subresource, with the resourceVersion decided on. */
      readonly type: 'resize';
      readonly containers: readonly { readonly name: string; readonly resources: ResourceList }[];
      readonly pod?: ResourceList;
    }
  | {
      /** Delete with a uid + resourceVersion precondition. */
      readonly type: 'delete';
      readonly reason: string;
    }
  | {
      /** Merge-patch of tollgate's own annotations (null removes one). */
      readonly type: 'annotate';
      readonly annotations: Readonly<Record<string, string | null>>;
    }
  | {
      /**
       * Strategic merge patch of one condition on pods/status (merged by type, the pod's
       * other conditions untouched): tollgate's `tollgate.io/Released` condition.
       */
      readonly type: 'podCondition';
      readonly condition: PodConditionWrite;
    }
  | {
      /**
       * A Kubernetes Event (events.k8s.io/v1) about a pod: created, or its series
       * bumped. The target names the Event (namespace, name) and the pod's uid.
       */
      readonly type: 'event';
      readonly event: EventWrite;
    };

/** One pod condition; `lastTransitionTime` only when the status changes (else the pod's is kept). */
export interface PodConditionWrite {
  readonly type: string;
  readonly status: 'True' | 'False';
  readonly reason: string;
  readonly message: string;
  /** RFC 3339. */
  readonly lastTransitionTime?: string;
}

export type EventWrite =
  | {
      readonly action: 'create';
      /** The events.k8s.io/v1 Event, metadata.name included. */
      readonly body: EventsV1Event;
    }
  | {
      /** Merge-patch of `series`: the only part of an Event the API lets change. */
      readonly action: 'series';
      readonly count: number;
      /** RFC 3339 with microseconds. */
      readonly lastObservedTime: string;
    };

export interface WriteTarget {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /** The resourceVersion the decision was made on; writes assert it where the API allows. */
  readonly resourceVersion: string;
}

/**
 * Which writes go first, whatever their priority: `safety` (resize rollback and revert,
 * Cancel deletes, expiry marks) before `work` (releases, resizes) before `background`
 * (Events). Priority, aging and tenant turns order writes only inside one band, so no
 * GatePolicy priority and no release backlog can put a release ahead of a rollback.
 */
export type WriteBand = 'safety' | 'work' | 'background';

export interface WriteRequest {
  /** Coalescing key: one queued item and at most one in-flight write per key. */
  readonly key: ObjectKey;
  readonly target: WriteTarget;
  readonly op: WriteOperation;
  /** Higher first, inside the request's band. */
  readonly priority: number;
  /** Defaults by operation (`bandOf` in bands.ts): delete = safety, event and podCondition = background, else work. */
  readonly band?: WriteBand;
  /** Round-robin unit inside one priority. */
  readonly tenant: string;
  /**
   * The gang this write belongs to (a release of one member of an all-or-nothing unit):
   * once one member was sent, the others are not dropped when the dispatcher falls back
   * to synchronous writes, so the gang goes out whole.
   */
  readonly unit?: string;
  /** Epoch ms after which the write is no longer useful and is dropped as `expired`. */
  readonly deadline: number;
  /** The decision this write carries out (for the audit outcome). */
  readonly decisionId: string;
  readonly signal?: AbortSignal;
}

/** How a write ended. Exactly one per accepted request. */
export type WriteResult =
  | {
      readonly result: 'succeeded';
      readonly resourceVersion: string;
      /** Set when the answer was lost (timeout, reset) and a read of the object showed the write applied. */
      readonly confirmedBy?: 'read-back';
    }
  /** 409 or a failed JSON-patch test: the key goes back to its loop to be decided again from fresh state. */
  | { readonly result: 'conflict'; readonly message: string }
  /** Final: 403, 404, 422, or retries exhausted. */
  | { readonly result: 'failed'; readonly code?: number; readonly message: string }
  | { readonly result: 'expired'; readonly message: string }
  /** Superseded by a newer decision for the key, the pod was deleted, or leadership was lost. */
  | { readonly result: 'cancelled'; readonly message: string };

export type EnqueueResult =
  | { readonly accepted: true; readonly coalesced: boolean; readonly done: Promise<WriteResult> }
  /** The queue is full: backpressure. The caller slows down (see `whenNotFull`); the overflow is counted. */
  | { readonly accepted: false; readonly reason: 'full' | 'closed' };

export interface Dispatcher {
  enqueue(request: WriteRequest): EnqueueResult;
  /**
   * Resolves when the queue has room again for a write of `band` (without one: for a
   * write of any band, the strictest wait).
   */
  whenNotFull(signal?: AbortSignal, band?: WriteBand): Promise<void>;
  /** Cancels queued work for a key (the pod was deleted); an in-flight write is aborted. */
  cancel(key: ObjectKey, reason: string): void;
  /**
   * The object at `key` is gone, or was replaced by a new incarnation: cancels every
   * queued and backing-off write aimed at `uid` (all incarnations when `uid` is omitted)
   * and aborts one in flight. Writes for another uid of the same name are kept.
   * Returns how many writes it cancelled or aborted. (Optional so wrappers and test
   * doubles of the interface need not carry it; PriorityDispatcher has it.)
   */
  cancelObject?(
    key: ObjectKey,
    options: { readonly uid?: string; readonly reason: string },
  ): number;
  readonly depth: number;
  /** Stop taking work; finish or cancel what is in flight. */
  close(options?: { cancelQueued: boolean }): Promise<void>;
}

/**
 * The API side of a write, injected into the dispatcher (src/cluster/writer.ts
 * implements it with @kubernetes/client-node). Throws an error carrying `statusCode`
 * (or `code` for network errors) on failure; returns the new resourceVersion.
 */
export type WriteExecutor = (
  request: WriteRequest,
  signal: AbortSignal,
) => Promise<{ resourceVersion: string }>;

/**
 * What a read of the target says about a write whose answer was lost: `applied` (the
 * object shows the write; its resourceVersion), `absent` (it does not: send again), or
 * `gone` (the object no longer exists or is another incarnation: nothing to send).
 */
export type ReadBackVerdict =
  | { readonly state: 'applied'; readonly resourceVersion: string }
  | { readonly state: 'absent' }
  | { readonly state: 'gone'; readonly message: string };

/** Reads the write's target (src/cluster/writer.ts implements it); throws when the read fails. */
export type ReadBack = (request: WriteRequest, signal: AbortSignal) => Promise<ReadBackVerdict>;

/**
 * Is the write's target still the object decided on, by the caller's view (an informer
 * cache)? `gone`/`replaced` cancel the write right before its send; `unknown` sends it
 * (the write's own preconditions still guard it).
 */
export type TargetPresence = (request: WriteRequest) => 'present' | 'gone' | 'replaced' | 'unknown';
