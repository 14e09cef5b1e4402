/**
 * Kubernetes Events on pods (events.k8s.io/v1), so users see tollgate's decisions in
 * `kubectl describe pod` and `kubectl events`.
 *
 * Events are API writes like any other, so they go through the write dispatcher (one
 * bounded priority queue for every write tollgate makes), as its lowest-priority work:
 * - priority `eventPriority`, below every GatePolicy priority the schema allows and
 *   below every resize write, with a deadline: under a sustained release wave an Event
 *   waits, and one that waited past `deadlineMs` is dropped (counted as `expired`)
 *   rather than delaying releases;
 * - its own coalescing key per (pod uid, reason), never the pod's key, so an Event can
 *   never replace or be replaced by a release, resize or delete of the same pod;
 * - aggregation: one Event per (pod uid, reason) per window; repeats only bump
 *   `series.count` / `series.lastObservedTime` (the API makes the note immutable, so
 *   the Event keeps the first note of its series), and repeats that arrive while an
 *   update is still queued are merged into it (a pod re-evaluated every second
 *   produces one write per rate-limit slot, not one per evaluation);
 * - a token bucket limits the rate at which Events are handed to the dispatcher and at
 *   most one is in its queue at a time, so a mass release of thousands of pods trickles
 *   its Events out and never fills the queue the loops depend on;
 * - the backlog is bounded; beyond it new Events are dropped and counted
 *   (tollgate_events_dropped_total), never queued without limit;
 * - failures are logged and counted; an Event is never retried in a loop (a 404 on a
 *   series update, the Event having expired, re-creates it once). Outside a leader term
 *   the dispatcher's fence refuses the write, and the Event is dropped with the rest.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { V1MicroTime, type EventsV1Event } from '@kubernetes/client-node';
import { Counter } from 'prom-client';
import { systemClock, type Clock } from '../lib/clock.ts';
import { TokenBucket } from '../lib/token-bucket.ts';
import { registry } from '../observe/metrics.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import type { Dispatcher, EventWrite, WriteRequest, WriteResult } from '../dispatch/types.ts';

export const reportingController = 'tollgate.io/tollgate';

/** Below the lowest GatePolicy priority (-1,000,000) and every resize priority. */
export const eventPriority = -1_000_001;

export interface EventSubject {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /** What the Event regards; default a v1 Pod (tollgate's own Events regard its Lease). */
  readonly kind?: string;
  readonly apiVersion?: string;
}

export interface EventRecord {
  readonly type: 'Normal' | 'Warning';
  /** CamelCase, machine-readable (GateReleased, ResizeDeferred, ...). */
  readonly reason: string;
  /** What tollgate did or decided not to do (Release, Resize, Delete, Hold). */
  readonly action: string;
  /** Human-readable, at most 1 kB (longer notes are cut). */
  readonly note: string;
}

export interface EventRecorder {
  record(subject: EventSubject, event: EventRecord): void;
  /** Resolves when the backlog has been written (or the signal aborts). */
  flush(signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

interface Series {
  readonly key: string;
  readonly subject: EventSubject;
  event: EventRecord;
  /** Name of the Event object once created. */
  name: string | undefined;
  count: number;
  firstAt: number;
  lastAt: number;
  /** The API holds `writtenCount`; a write is due when count differs. */
  writtenCount: number;
}

/**
 * The pure bookkeeping: which (pod, reason) series exist, which need a write, and
 * which are dropped when the backlog is full. Exported for unit tests.
 */
export class EventAggregator {
  readonly #series = new Map<string, Series>();
  /** Series keys waiting to be written, oldest first (a Set: insertion order, O(1) lookups). */
  readonly #due = new Set<string>();
  readonly #windowMs: number;
  readonly #maxBacklog: number;
  dropped = 0;
  constructor(windowMs: number, maxBacklog: number) {
    this.#windowMs = windowMs;
    this.#maxBacklog = maxBacklog;
  }
  get backlog(): number {
    return this.#due.size;
  }
  /** Returns false when the event was dropped because the backlog is full. */
  add(subject: EventSubject, event: EventRecord, now: number): boolean {
    const key = `${subject.uid}|${event.reason}`;
    const existing = this.#series.get(key);
    if (existing && now - existing.lastAt <= this.#windowMs) {
      existing.count += 1;
      existing.lastAt = now;
      if (!this.#due.has(key)) {
        if (this.#due.size >= this.#maxBacklog) return this.#drop();
        this.#due.add(key);
      }
      return true;
    }
    if (this.#due.size >= this.#maxBacklog) return this.#drop();
    this.#series.set(key, {
      key,
      subject,
      event,
      name: undefined,
      count: 1,
      firstAt: now,
      lastAt: now,
      writtenCount: 0,
    });
    // A series outside its window starts over as a new Event.
    this.#due.add(key);
    return true;
  }
  #drop(): false {
    this.dropped += 1;
    return false;
  }
  /** The next series to write, oldest first. */
  next(): Series | undefined {
    const key = this.#due.values().next().value;
    if (key === undefined) return undefined;
    this.#due.delete(key);
    return this.#series.get(key);
  }
  /** Forgets series whose window has passed, so memory follows activity, not history. */
  expire(now: number): void {
    for (const [key, series] of this.#series) {
      if (now - series.lastAt > this.#windowMs && !this.#due.has(key)) this.#series.delete(key);
    }
  }
}

const eventsWritten = new Counter({
  name: 'tollgate_events_written_total',
  help: 'Kubernetes Events written, by result (created, updated, failed; failed includes Events the dispatcher refused, expired or cancelled).',
  labelNames: ['result'] as const,
  registers: [registry],
});
const eventsDropped = new Counter({
  name: 'tollgate_events_dropped_total',
  help: 'Kubernetes Events dropped because the low-priority backlog was full.',
  registers: [registry],
});
for (const result of ['created', 'updated', 'failed']) eventsWritten.inc({ result }, 0);

/** The rate at which `tollgate run` hands Events to the dispatcher: 5 a second, bursts of 20. */
export const defaultEventRate = { ratePerSecond: 5, burst: 20 } as const;

export interface EventRecorderOptions {
  readonly ratePerSecond?: number;
  readonly burst?: number;
  readonly aggregationWindowMs?: number;
  readonly maxBacklog?: number;
  /** How long an Event may wait in the dispatcher behind other writes (default 60 s). */
  readonly deadlineMs?: number;
  readonly reportingInstance?: string;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /**
   * True: a dispatcher without room is waited on (until the deadline) instead of the
   * Event being dropped. For tollgate's own few Events about its write path, which the
   * fallback they report (one write held at a time) would otherwise refuse.
   */
  readonly waitForRoom?: boolean;
}

/** Thrown inside the recorder when the dispatcher did not write the Event. */
class EventNotWritten extends Error {
  readonly code: number | undefined;
  constructor(result: Exclude<WriteResult, { result: 'succeeded' }>) {
    super(`${result.result}: ${result.message}`);
    this.code = result.result === 'failed' ? result.code : undefined;
  }
}

/**
 * `dispatcher` is the process's write dispatcher (`tollgate run`), or the one a test stack
 * hands in (test/support/event-writes.ts): Events are its lowest-priority writes.
 */
export function createEventRecorder(
  dispatcher: Dispatcher,
  options: EventRecorderOptions = {},
): EventRecorder {
  return new DispatchedEventRecorder(dispatcher, options);
}

/**
 * The recorder: `record` aggregates; one drain at a time takes due series from the
 * aggregator at the token bucket's pace and writes each (`write`: a series update, or a
 * create when it has none or the server expired it) through the dispatcher (`send`).
 */
class DispatchedEventRecorder implements EventRecorder {
  readonly #dispatcher: Dispatcher;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #instance: string;
  readonly #deadlineMs: number;
  readonly #waitForRoom: boolean;
  readonly #bucket: TokenBucket;
  readonly #aggregator: EventAggregator;
  #working: Promise<void> | undefined;
  #closed = false;
  readonly #idleWaiters: (() => void)[] = [];

  constructor(dispatcher: Dispatcher, options: EventRecorderOptions) {
    this.#dispatcher = dispatcher;
    this.#clock = options.clock ?? systemClock;
    this.#log = options.logger ?? silentLogger;
    this.#instance = (options.reportingInstance ?? `tollgate-${hostname()}`).slice(0, 128);
    this.#deadlineMs = options.deadlineMs ?? 60_000;
    this.#waitForRoom = options.waitForRoom ?? false;
    this.#bucket = new TokenBucket(
      options.ratePerSecond ?? defaultEventRate.ratePerSecond,
      options.burst ?? defaultEventRate.burst,
      this.#clock,
    );
    this.#aggregator = new EventAggregator(
      options.aggregationWindowMs ?? 10 * 60_000,
      options.maxBacklog ?? 1000,
    );
  }

  record(subject: EventSubject, event: EventRecord): void {
    if (this.#closed) return;
    if (!this.#aggregator.add(subject, event, this.#clock.now())) {
      eventsDropped.inc();
      return;
    }
    this.#working ??= this.#drain();
  }

  async flush(signal?: AbortSignal): Promise<void> {
    if (!this.#working) return;
    await new Promise<void>((resolve, reject) => {
      this.#idleWaiters.push(resolve);
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#working;
  }

  async #drain(): Promise<void> {
    for (;;) {
      // Until the clock (not the timer) has a token: a timer firing early adds none.
      for (let wait = this.#bucket.waitMs(); wait > 0; wait = this.#bucket.waitMs())
        await new Promise((resolve) => setTimeout(resolve, wait));
      const series = this.#aggregator.next();
      if (!series) break;
      if (series.count === series.writtenCount) continue;
      this.#bucket.take();
      try {
        await this.#write(series);
      } catch (error) {
        eventsWritten.inc({ result: 'failed' });
        this.#log.warn(
          {
            err: error instanceof Error ? error.message : String(error),
            code: error instanceof EventNotWritten ? error.code : undefined,
          },
          `could not write Kubernetes Event ${series.event.reason} on pod ${series.subject.namespace}/${series.subject.name}`,
        );
      }
    }
    this.#aggregator.expire(this.#clock.now());
    this.#working = undefined;
    for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  async #write(series: Series): Promise<void> {
    const count = series.count;
    if (series.name !== undefined) {
      try {
        await this.#send(series, series.name, {
          action: 'series',
          count,
          lastObservedTime: new Date(this.#clock.now()).toISOString(),
        });
        series.writtenCount = count;
        eventsWritten.inc({ result: 'updated' });
        return;
      } catch (error) {
        if (!(error instanceof EventNotWritten) || error.code !== 404) throw error;
        series.name = undefined; // expired on the server (events have a TTL): create it again
      }
    }
    series.name = `${series.subject.name}.${randomBytes(8).toString('hex')}`.slice(0, 253);
    const body = eventBody(series, this.#instance, this.#clock.now());
    await this.#send(series, series.name, { action: 'create', body });
    series.writtenCount = count;
    eventsWritten.inc({ result: 'created' });
  }

  /** One Event write through the dispatcher; resolves when written, throws otherwise. */
  async #send(series: Series, name: string, event: EventWrite): Promise<void> {
    const deadline = this.#clock.now() + this.#deadlineMs;
    const request: WriteRequest = {
      key: `event/${series.key}`,
      target: {
        namespace: series.subject.namespace,
        name,
        uid: series.subject.uid,
        resourceVersion: '',
      },
      op: { type: 'event', event },
      priority: eventPriority,
      tenant: 'tollgate-events',
      deadline,
      decisionId: '',
    };
    let queued = this.#dispatcher.enqueue(request);
    while (
      !queued.accepted &&
      queued.reason === 'full' &&
      this.#waitForRoom &&
      this.#clock.now() < deadline
    ) {
      await this.#dispatcher.whenNotFull();
      queued = this.#dispatcher.enqueue(request);
    }
    if (!queued.accepted)
      throw new EventNotWritten({ result: 'cancelled', message: `dispatcher ${queued.reason}` });
    const result = await queued.done;
    if (result.result !== 'succeeded') throw new EventNotWritten(result);
  }
}

/** The events.k8s.io/v1 Event that starts a series (a series count only past one). */
function eventBody(series: Series, instance: string, now: number): EventsV1Event {
  return {
    metadata: { name: series.name, namespace: series.subject.namespace },
    eventTime: new V1MicroTime(series.firstAt),
    reportingController,
    reportingInstance: instance,
    action: series.event.action,
    reason: series.event.reason,
    note: series.event.note.slice(0, 1024),
    type: series.event.type,
    regarding: {
      apiVersion: series.subject.apiVersion ?? 'v1',
      kind: series.subject.kind ?? 'Pod',
      namespace: series.subject.namespace,
      name: series.subject.name,
      ...(series.subject.uid === '' ? {} : { uid: series.subject.uid }),
    },
    series:
      series.count > 1
        ? { count: series.count, lastObservedTime: new V1MicroTime(now) }
        : undefined,
  };
}
