/**
 * Metrics of the write dispatcher. Label sets are closed (operations, results and retry
 * reasons come from fixed lists) and pre-created at zero; no per-pod labels.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../observe/metrics.ts';
import { writeBands } from './bands.ts';
import { fallbackReasons } from './fallback.ts';
import type { WriteOperation, WriteResult } from './types.ts';

export const writeOps = [
  'removeGate',
  'resize',
  'delete',
  'annotate',
  'event',
  'podCondition',
] as const satisfies readonly WriteOperation['type'][];
export const writeResults = [
  'succeeded',
  'conflict',
  'failed',
  'expired',
  'cancelled',
] as const satisfies readonly WriteResult['result'][];
/** Why a write was sent again. */
export const retryReasons = [
  'throttled',
  'server_error',
  'timeout',
  'network',
  'forbidden',
] as const;
export type RetryReason = (typeof retryReasons)[number];

function getOrCreate<T>(name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export const queueDepth = getOrCreate(
  'tollgate_dispatch_queue_depth',
  () =>
    new Gauge({
      name: 'tollgate_dispatch_queue_depth',
      help: 'Writes waiting in the dispatcher queue (not yet sent, or waiting to be retried).',
      registers: [registry],
    }),
);

export const inFlightWrites = getOrCreate(
  'tollgate_dispatch_in_flight',
  () =>
    new Gauge({
      name: 'tollgate_dispatch_in_flight',
      help: 'Writes the dispatcher has sent and not yet seen answered.',
      registers: [registry],
    }),
);

export const waitSeconds = getOrCreate(
  'tollgate_dispatch_wait_seconds',
  () =>
    new Histogram({
      name: 'tollgate_dispatch_wait_seconds',
      help: 'Time from a write being queued (first request for its key) to its first send, by band (safety, work, background).',
      labelNames: ['band'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    }),
);

export const resultsTotal = getOrCreate(
  'tollgate_dispatch_results_total',
  () =>
    new Counter({
      name: 'tollgate_dispatch_results_total',
      help: 'Accepted writes by operation and how they ended (exactly one result per accepted write).',
      labelNames: ['op', 'result'],
      registers: [registry],
    }),
);

export const retriesTotal = getOrCreate(
  'tollgate_dispatch_retries_total',
  () =>
    new Counter({
      name: 'tollgate_dispatch_retries_total',
      help: 'Writes scheduled to be sent again, by operation and reason (throttled = 429 or 503 with Retry-After, no attempt limit; server_error = other 5xx, timeout, network; forbidden = 403, as an API server refuses until its RBAC caches have synced after a restart, 5 attempts at most).',
      labelNames: ['op', 'reason'],
      registers: [registry],
    }),
);

export const overflowTotal = getOrCreate(
  'tollgate_dispatch_overflow_total',
  () =>
    new Counter({
      name: 'tollgate_dispatch_overflow_total',
      help: 'Writes refused because the queue was full (backpressure; the caller waits and offers again).',
      registers: [registry],
    }),
);

export const coalescedTotal = getOrCreate(
  'tollgate_dispatch_coalesced_total',
  () =>
    new Counter({
      name: 'tollgate_dispatch_coalesced_total',
      help: 'Queued writes replaced by a newer decision for the same object; kind=op_changed when the operation differs.',
      labelNames: ['kind'],
      registers: [registry],
    }),
);

export const apiRequestsTotal = getOrCreate(
  'tollgate_api_requests_total',
  () =>
    new Counter({
      name: 'tollgate_api_requests_total',
      help: 'Write requests the dispatcher sent to the API server, by verb and answer (HTTP code, 2xx, network, timeout, aborted; fenced: handed to the HTTP client, kept off the wire by the fence).',
      labelNames: ['verb', 'code'],
      registers: [registry],
    }),
);

export const writeSeconds = getOrCreate(
  'tollgate_dispatch_write_seconds',
  () =>
    new Histogram({
      name: 'tollgate_dispatch_write_seconds',
      help: "Time from a write's first send to its result (retries and read-backs included), by operation and result.",
      labelNames: ['op', 'result'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
);

export const degraded = getOrCreate(
  'tollgate_dispatch_degraded',
  () =>
    new Gauge({
      name: 'tollgate_dispatch_degraded',
      help: '1 while the dispatcher has fallen back to synchronous writes (one at a time, no backlog) because the API server looked unhealthy; 0 otherwise.',
      registers: [registry],
    }),
);

export const syncMode = getOrCreate(
  'tollgate_dispatch_sync_mode',
  () =>
    new Gauge({
      name: 'tollgate_dispatch_sync_mode',
      help: '1 while writes are sent synchronously (configured mode sync, or the automatic fallback); 0 while queued.',
      registers: [registry],
    }),
);

export const fallbackTransitionsTotal = getOrCreate(
  'tollgate_dispatch_fallback_transitions_total',
  () =>
    new Counter({
      name: 'tollgate_dispatch_fallback_transitions_total',
      help: 'Entries into the synchronous fallback (to=degraded, by reason) and returns to the queue (to=healthy).',
      labelNames: ['to', 'reason'],
      registers: [registry],
    }),
);

export const readBacksTotal = getOrCreate(
  'tollgate_dispatch_read_backs_total',
  () =>
    new Counter({
      name: 'tollgate_dispatch_read_backs_total',
      help: "Reads of a write's target after its answer was lost (timeout, reset), by operation and what the read showed (applied, absent, gone, error).",
      labelNames: ['op', 'verdict'],
      registers: [registry],
    }),
);

let precreated = false;
export function precreateDispatchSeries(): void {
  if (precreated) return;
  precreated = true;
  queueDepth.set(0);
  inFlightWrites.set(0);
  overflowTotal.inc(0);
  for (const op of writeOps) {
    for (const result of writeResults) resultsTotal.inc({ op, result }, 0);
    for (const reason of retryReasons) retriesTotal.inc({ op, reason }, 0);
  }
  for (const kind of ['same_op', 'op_changed']) coalescedTotal.inc({ kind }, 0);
  degraded.set(0);
  syncMode.set(0);
  for (const reason of fallbackReasons) fallbackTransitionsTotal.inc({ to: 'degraded', reason }, 0);
  fallbackTransitionsTotal.inc({ to: 'healthy', reason: '' }, 0);
  for (const op of writeOps) {
    for (const verdict of ['applied', 'absent', 'gone', 'error'])
      readBacksTotal.inc({ op, verdict }, 0);
  }
  for (const band of writeBands) waitSeconds.zero({ band });
  for (const op of writeOps) {
    for (const result of writeResults) writeSeconds.zero({ op, result });
  }
  for (const verb of ['patch', 'delete', 'create']) apiRequestsTotal.inc({ verb, code: '2xx' }, 0);
}
