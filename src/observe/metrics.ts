/**
 * The one prom-client registry. Each module defines its own metrics in its own file
 * and registers them here, with label values pre-created at zero where the set is
 * closed, so dashboards and alerts see a series before the first event.
 */
import {
  Counter,
  Gauge,
  Registry,
  collectDefaultMetrics,
  type CounterConfiguration,
} from 'prom-client';
import { buildInfo } from './build-info.ts';

export const registry = new Registry();

/**
 * The counter `config.name` in the registry, created there the first time (a module
 * loaded twice, as the tests load some, finds the one already registered).
 */
export function registeredCounter<L extends string>(
  config: Omit<CounterConfiguration<L>, 'registers'>,
): Counter<L> {
  return (
    (registry.getSingleMetric(config.name) as Counter<L> | undefined) ??
    new Counter({ ...config, registers: [registry] })
  );
}

let defaultsCollected = false;
/**
 * Node process metrics under their standard names (process_*, nodejs_*), which shared
 * dashboards expect, and tollgate_build_info, which tells tollgate's processes apart
 * from others (`process_resident_memory_bytes * on(job, instance) group_left()
 * tollgate_build_info`). Called once by `tollgate run`.
 */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry });
  const { version, revision, node } = buildInfo();
  new Gauge({
    name: 'tollgate_build_info',
    help: 'Always 1; labels say which build of tollgate runs',
    labelNames: ['version', 'revision', 'node_version'],
    registers: [registry],
  }).set({ version, revision, node_version: node }, 1);
}
