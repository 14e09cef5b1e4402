/**
 * Informer health: restarts by reason, objects held, and how long since each kind of
 * informer last heard from the API server (list, event or bookmark). A watch that is
 * silently dead shows up as a growing age even while the process looks healthy.
 */
import { Counter, Gauge } from 'prom-client';
import { registry } from '../observe/metrics.ts';
import { restartReasons, type RestartReason } from './informer.ts';

export type ViewResource = 'pods' | 'nodes' | 'objects' | 'resourcequotas';
export const viewResources: readonly ViewResource[] = [
  'pods',
  'nodes',
  'objects',
  'resourcequotas',
];

/** What a live view reports at scrape time. */
export interface InformerStats {
  objects(resource: ViewResource): number;
  /** Oldest "last heard" time among the resource's informers; undefined when none has listed yet. */
  lastEventAt(resource: ViewResource): number | undefined;
  /** Referenced kinds the view cannot read yet, by reason (unserved, forbidden, failing, listing). */
  unreadableReferences?(): readonly string[];
}

/** The closed label set of tollgate_view_unreadable_references. */
export const unreadableReasons = ['unserved', 'forbidden', 'failing', 'listing'] as const;

const sources = new Set<{ stats: InformerStats; now: () => number }>();

export const informerRestarts = new Counter({
  name: 'tollgate_informer_restarts_total',
  help: 'List/watch restarts by resource and reason (gone = relist after 410, closed = resumed after a clean close, timeout = inactivity, error = backoff after any other failure, filter = relist after a filter change).',
  labelNames: ['resource', 'reason'] as const,
  registers: [registry],
});
for (const resource of viewResources) {
  for (const reason of restartReasons) informerRestarts.inc({ resource, reason }, 0);
}

new Gauge({
  name: 'tollgate_informer_objects',
  help: 'Objects held by the cluster view, by resource.',
  labelNames: ['resource'] as const,
  registers: [registry],
  collect() {
    for (const resource of viewResources) {
      let total = 0;
      for (const { stats } of sources) total += stats.objects(resource);
      this.set({ resource }, total);
    }
  },
});

new Gauge({
  name: 'tollgate_informer_last_event_age_seconds',
  help: 'Seconds since the least recently heard informer of a resource got a list, event or bookmark (0 before the first list).',
  labelNames: ['resource'] as const,
  registers: [registry],
  collect() {
    for (const resource of viewResources) {
      let age = 0;
      for (const { stats, now } of sources) {
        const at = stats.lastEventAt(resource);
        if (at !== undefined) age = Math.max(age, (now() - at) / 1000);
      }
      this.set({ resource }, age);
    }
  },
});

new Gauge({
  name: 'tollgate_view_unreadable_references',
  help: 'Kinds a policy references (ObjectCondition) that the view cannot read, by reason: unserved (the API server does not serve the kind), forbidden (RBAC), failing (any other error), listing (first list not done). Only the pods that depend on them are held.',
  labelNames: ['reason'] as const,
  registers: [registry],
  collect() {
    const counts = new Map<string, number>(unreadableReasons.map((r) => [r, 0]));
    for (const { stats } of sources) {
      for (const reason of stats.unreadableReferences?.() ?? [])
        counts.set(reason, (counts.get(reason) ?? 0) + 1);
    }
    for (const [reason, count] of counts) this.set({ reason }, count);
  },
});

export function countRestart(resource: ViewResource, reason: RestartReason): void {
  informerRestarts.inc({ resource, reason });
}

/** Registers a live view for the scrape-time gauges; returns the unregister function. */
export function reportInformerStats(stats: InformerStats, now: () => number): () => void {
  const entry = { stats, now };
  sources.add(entry);
  return () => sources.delete(entry);
}
