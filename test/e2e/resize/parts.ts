/**
 * Adapters from the resize e2e to the shared parts: the real dispatcher
 * (src/dispatch/queue.ts) and the Prometheus harness (test/support/prometheus.ts).
 */
import { createDispatcher } from '../../../src/dispatch/queue.ts';
import type { Dispatcher, WriteExecutor } from '../../../src/dispatch/types.ts';
import { startPrometheus } from '../../support/prometheus.ts';

export interface TestPrometheus {
  /** Base URL of the Prometheus HTTP API. */
  readonly url: string;
  /** Sets a gauge the exporter serves, e.g. set('tollgate_test_queue_length', { namespace, pod }, 120). */
  set(metric: string, labels: Record<string, string>, value: number): void;
  /** Removes one series from the exporter (stale in Prometheus after the next scrape). */
  delete(metric: string, labels: Record<string, string>): void;
  stop(): Promise<void>;
}

/** Real Prometheus scraping the controllable exporter every 500 ms (windows here are seconds). */
export async function startPrometheusForTest(): Promise<TestPrometheus> {
  const prom = await startPrometheus({ scrapeIntervalMs: 500 });
  return {
    url: prom.url,
    set: (metric, labels, value) => prom.exporter.set(metric, labels, value),
    delete: (metric, labels) => prom.exporter.delete(metric, labels),
    stop: () => prom.stop(),
  };
}

export async function createDispatcherForTest(executor: WriteExecutor): Promise<Dispatcher> {
  return createDispatcher({ executor, capacity: 1000, concurrency: 4, qps: 50 });
}
