/**
 * Metrics of the stale-guard and live reads. Label sets are closed (loop names, read
 * results) and pre-created at zero; no per-pod labels.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../observe/metrics.ts';

export const liveReadResults = ['ok', 'not_found', 'error', 'throttled', 'breaker_open'] as const;
export type LiveReadResult = (typeof liveReadResults)[number];

function getOrCreate<T>(name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export const staleSkipsTotal = getOrCreate(
  'tollgate_stale_skips_total',
  () =>
    new Counter({
      name: 'tollgate_stale_skips_total',
      help: "Decisions skipped and requeued because the cache had not caught up with tollgate's own write (or its freshness was unknown), by loop.",
      labelNames: ['loop'],
      registers: [registry],
    }),
);

export const cacheLagSeconds = getOrCreate(
  'tollgate_cache_lag_seconds',
  () =>
    new Histogram({
      name: 'tollgate_cache_lag_seconds',
      help: "Lag of the cluster view behind the API server: time from the answer to tollgate's own pod write until the pod informer has seen its resourceVersion.",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
);

export const liveReadsTotal = getOrCreate(
  'tollgate_live_reads_total',
  () =>
    new Counter({
      name: 'tollgate_live_reads_total',
      help: 'Live reads before destructive decisions by result (ok, not_found, error, throttled = budget spent, breaker_open = refused).',
      labelNames: ['result'],
      registers: [registry],
    }),
);

export const breakerState = getOrCreate(
  'tollgate_live_read_breaker_state',
  () =>
    new Gauge({
      name: 'tollgate_live_read_breaker_state',
      help: 'Circuit breaker of live reads: 0 closed, 1 half-open, 2 open.',
      registers: [registry],
    }),
);

/** What each loop's guard reports at scrape time (the newest guard of a loop name wins). */
export interface GuardReport {
  longestWaitMs(): number;
  readonly catchingUp: boolean;
}
export const guardReports = new Map<string, GuardReport>();

export const staleLongestWaitSeconds = getOrCreate(
  'tollgate_stale_longest_wait_seconds',
  () =>
    new Gauge({
      name: 'tollgate_stale_longest_wait_seconds',
      help: "The longest any key has waited, by loop, for the cache to catch up with tollgate's own write (from its first stale skip); 0 when none waits.",
      labelNames: ['loop'],
      registers: [registry],
      collect() {
        for (const [loop, report] of guardReports)
          this.set({ loop }, report.longestWaitMs() / 1000);
      },
    }),
);

export const staleGuardCatchingUp = getOrCreate(
  'tollgate_stale_guard_catching_up',
  () =>
    new Gauge({
      name: 'tollgate_stale_guard_catching_up',
      help: 'By loop: 1 while a new leader term waits for the view to reach a revision read after the term began (destructive acts take live reads meanwhile), else 0.',
      labelNames: ['loop'],
      registers: [registry],
      collect() {
        for (const [loop, report] of guardReports) this.set({ loop }, report.catchingUp ? 1 : 0);
      },
    }),
);

export const staleGuardDegraded = getOrCreate(
  'tollgate_stale_guard_degraded',
  () =>
    new Gauge({
      name: 'tollgate_stale_guard_degraded',
      help: "1 while freshness cannot be established (live reads refused by an open breaker, or a pod waiting more than 5 minutes for the cache to show tollgate's own write): destructive acts on pods the cache is behind on wait; else 0.",
      registers: [registry],
    }),
);

const loops = new Set<string>();
let precreated = false;
export function precreateStaleGuardSeries(loop?: string): void {
  if (loop !== undefined && !loops.has(loop)) {
    loops.add(loop);
    staleSkipsTotal.inc({ loop }, 0);
  }
  if (precreated) return;
  precreated = true;
  for (const loop of ['gate-release', 'resize']) {
    loops.add(loop);
    staleSkipsTotal.inc({ loop }, 0);
  }
  for (const result of liveReadResults) liveReadsTotal.inc({ result }, 0);
}
