/**
 * The one prom-client registry. Each module defines its own metrics in its own file
 * and registers them here, with label values pre-created at zero where the set is
 * closed, so dashboards and alerts see a series before the first event.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';

export const registry = new Registry();

let defaultsCollected = false;
/** Node process metrics (heap, event loop lag, GC); called once by `tollgate run`. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, prefix: 'tollgate_' });
}
