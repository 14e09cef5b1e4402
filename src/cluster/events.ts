/**
 * Kubernetes Events on pods (events.k8s.io/v1), so users see tollgate's decisions in
 * `kubectl describe pod` and `kubectl events`.
 *
 * Events are the lowest-priority writes tollgate makes and never compete with gate
 * releases or resizes:
 * - aggregation: one Event per (pod uid, reason) per window; repeats only bump
 *   `series.count` / `series.lastObservedTime` (the API makes the note immutable, so
 *   the Event keeps the first note of its series), and repeats that arrive while an
 *   update is still queued are merged into it (a pod re-evaluated every second
 *   produces one write per rate-limit slot, not one per evaluation);
 * - a token bucket limits the write rate, so a mass release of thousands of pods
 *   trickles its Events out instead of flooding the API server;
 * - the backlog is bounded; beyond it new Events are dropped and counted
 *   (tollgate_events_dropped_total), never queued without limit;
 * - failures are logged and counted; an Event is never retried in a loop (a 404 on a
 *   series update, the Event having expired, re-creates it once).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import {
  EventsV1Api,
  PatchStrategy,
  V1MicroTime,
  setHeaderOptions,
  type KubeConfig,
  type EventsV1Event,
} from '@kubernetes/client-node';
import { Counter } from 'prom-client';
import { systemClock, type Clock } from '../lib/clock.ts';
import { registry } from '../observe/metrics.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import { statusCodeOf, toKubeError } from './errors.ts';

export const reportingController = 'tollgate.io/tollgate';

export interface EventSubject {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
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

/** A token bucket: `ratePerSecond` tokens added continuously, at most `burst` held. */
export class TokenBucket {
  readonly #ratePerMs: number;
  readonly #burst: number;
  #tokens: number;
  #updatedAt: number;
  constructor(ratePerSecond: number, burst: number, now: number) {
    if (!(ratePerSecond > 0) || !(burst >= 1))
      throw new Error(`token bucket needs rate > 0 and burst >= 1, got ${ratePerSecond}/${burst}`);
    this.#ratePerMs = ratePerSecond / 1000;
    this.#burst = burst;
    this.#tokens = burst;
    this.#updatedAt = now;
  }
  #refill(now: number): void {
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#updatedAt) * this.#ratePerMs);
    this.#updatedAt = now;
  }
  /** Takes a token if one is there; otherwise returns false. */
  tryTake(now: number): boolean {
    this.#refill(now);
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
  /** Milliseconds until a token is available. */
  waitMs(now: number): number {
    this.#refill(now);
    return this.#tokens >= 1 ? 0 : Math.ceil((1 - this.#tokens) / this.#ratePerMs);
  }
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
  readonly #due: string[] = [];
  readonly #windowMs: number;
  readonly #maxBacklog: number;
  dropped = 0;
  constructor(windowMs: number, maxBacklog: number) {
    this.#windowMs = windowMs;
    this.#maxBacklog = maxBacklog;
  }
  get backlog(): number {
    return this.#due.length;
  }
  /** Returns false when the event was dropped because the backlog is full. */
  add(subject: EventSubject, event: EventRecord, now: number): boolean {
    const key = `${subject.uid}|${event.reason}`;
    const existing = this.#series.get(key);
    if (existing && now - existing.lastAt <= this.#windowMs) {
      existing.count += 1;
      existing.lastAt = now;
      if (!this.#due.includes(key)) {
        if (this.#due.length >= this.#maxBacklog) return this.#drop();
        this.#due.push(key);
      }
      return true;
    }
    if (this.#due.length >= this.#maxBacklog) return this.#drop();
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
    if (!this.#due.includes(key)) this.#due.push(key);
    return true;
  }
  #drop(): false {
    this.dropped += 1;
    return false;
  }
  /** The next series to write, oldest first. */
  next(): Series | undefined {
    const key = this.#due.shift();
    return key === undefined ? undefined : this.#series.get(key);
  }
  /** Forgets series whose window has passed, so memory follows activity, not history. */
  expire(now: number): void {
    for (const [key, series] of this.#series) {
      if (now - series.lastAt > this.#windowMs && !this.#due.includes(key))
        this.#series.delete(key);
    }
  }
}

const eventsWritten = new Counter({
  name: 'tollgate_events_written_total',
  help: 'Kubernetes Events written, by result (created, updated, failed).',
  labelNames: ['result'] as const,
  registers: [registry],
});
const eventsDropped = new Counter({
  name: 'tollgate_events_dropped_total',
  help: 'Kubernetes Events dropped because the low-priority backlog was full.',
  registers: [registry],
});
for (const result of ['created', 'updated', 'failed']) eventsWritten.inc({ result }, 0);

export interface EventRecorderOptions {
  readonly ratePerSecond?: number;
  readonly burst?: number;
  readonly aggregationWindowMs?: number;
  readonly maxBacklog?: number;
  readonly reportingInstance?: string;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

export function createEventRecorder(
  kubeConfig: KubeConfig,
  options: EventRecorderOptions = {},
): EventRecorder {
  const api = kubeConfig.makeApiClient(EventsV1Api);
  const clock = options.clock ?? systemClock;
  const log = options.logger ?? silentLogger;
  const instance = (options.reportingInstance ?? `tollgate-${hostname()}`).slice(0, 128);
  const bucket = new TokenBucket(options.ratePerSecond ?? 5, options.burst ?? 20, clock.now());
  const aggregator = new EventAggregator(
    options.aggregationWindowMs ?? 10 * 60_000,
    options.maxBacklog ?? 1000,
  );
  let working: Promise<void> | undefined;
  let closed = false;
  const idleWaiters: (() => void)[] = [];

  function body(series: Series): EventsV1Event {
    const now = new V1MicroTime(clock.now());
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
        apiVersion: 'v1',
        kind: 'Pod',
        namespace: series.subject.namespace,
        name: series.subject.name,
        uid: series.subject.uid,
      },
      series: series.count > 1 ? { count: series.count, lastObservedTime: now } : undefined,
    };
  }

  async function write(series: Series): Promise<void> {
    const count = series.count;
    if (series.name !== undefined) {
      try {
        await api.patchNamespacedEvent(
          {
            name: series.name,
            namespace: series.subject.namespace,
            // Only the series may change: note, reason and the rest are immutable (422).
            body: { series: { count, lastObservedTime: new V1MicroTime(clock.now()) } },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        series.writtenCount = count;
        eventsWritten.inc({ result: 'updated' });
        return;
      } catch (error) {
        if (statusCodeOf(toKubeError(error, 'event')) !== 404) throw error;
        series.name = undefined; // expired on the server (events have a TTL): create it again
      }
    }
    series.name = `${series.subject.name}.${randomBytes(8).toString('hex')}`.slice(0, 253);
    await api.createNamespacedEvent({ namespace: series.subject.namespace, body: body(series) });
    series.writtenCount = count;
    eventsWritten.inc({ result: 'created' });
  }

  async function drain(): Promise<void> {
    for (;;) {
      const wait = bucket.waitMs(clock.now());
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const series = aggregator.next();
      if (!series) break;
      if (series.count === series.writtenCount) continue;
      bucket.tryTake(clock.now());
      try {
        await write(series);
      } catch (error) {
        eventsWritten.inc({ result: 'failed' });
        const err = toKubeError(
          error,
          `event ${series.event.reason} on pod ${series.subject.namespace}/${series.subject.name}`,
        );
        log.warn({ err: err.message, code: statusCodeOf(err) }, 'could not write Kubernetes Event');
      }
    }
    aggregator.expire(clock.now());
    working = undefined;
    for (const wake of idleWaiters.splice(0)) wake();
  }

  return {
    record(subject, event) {
      if (closed) return;
      if (!aggregator.add(subject, event, clock.now())) {
        eventsDropped.inc();
        return;
      }
      working ??= drain();
    },
    async flush(signal) {
      if (!working) return;
      await new Promise<void>((resolve, reject) => {
        idleWaiters.push(resolve);
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    },
    async close() {
      closed = true;
      await working;
    },
  };
}
