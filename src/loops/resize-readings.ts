/**
 * Reading a ResizePolicy's signals (and SLO) for a set of running pods from Prometheus:
 * the exact queries the resize loop sends each pass. Shared by the loop and by
 * `tollgate plan --prometheus`, so a plan's usage-driven targets come from the same
 * queries, window and step the loop would use.
 *
 * A failed query is not thrown: it becomes an `error` on every reading it would have
 * given, and the pure decision treats that signal as holding. Callers that must not
 * mistake an unreachable Prometheus for quiet signals (plan) check `errors` themselves.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { objectKey } from '../cluster/types.ts';
import type { ResizePolicy } from '../policy/model.ts';
import type { SignalReading } from '../decide/resize-plan.ts';
import type { WindowSample } from '../decide/resize-signals.ts';
import {
  type PrometheusClient,
  type Series,
  batchByPod,
  placeholdersOf,
  substitute,
} from '../signals/prometheus.ts';
import { silentLogger, type Logger } from '../observe/log.ts';

export interface SignalSlot {
  readonly samples?: WindowSample[];
  readonly error?: string;
}

export interface ResizeReadings {
  /** Per pod key (namespace/name). */
  readonly readings: Map<string, SignalReading[]>;
  readonly slo: Map<string, SignalSlot>;
}

export interface ReadSignalsDeps {
  readonly prometheus: PrometheusClient;
  /** Parallel per-pod queries when a query cannot be batched. */
  readonly concurrency: number;
  readonly signal?: AbortSignal;
  readonly logger?: Logger;
}

/** Range-query resolution the loop uses by default: a tenth of the window, between 1 s and 60 s. */
export function defaultStepMs(policy: ResizePolicy): number {
  return Math.min(60_000, Math.max(1000, Math.round(policy.windowMs / 10)));
}

async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      out[index] = await fn(items[index] as T);
    }
  });
  await Promise.all(workers);
  return out;
}

function samplesOf(series: Series | undefined): WindowSample[] {
  return series ? series.samples.map((s) => ({ at: s.at, value: s.value })) : [];
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Range-queries one PromQL template for the pods of one namespace: one batched query
 * (`pod="$pod"` rewritten to a regex over all pods) when the template allows it and
 * its result carries the pod label, else one query per pod (and per container for
 * `$container` templates) with bounded concurrency.
 */
async function readTemplate(
  deps: ReadSignalsDeps,
  template: string,
  namespace: string,
  pods: readonly V1Pod[],
  containers: readonly string[],
  startMs: number,
  endMs: number,
  stepMs: number,
): Promise<Map<string, SignalSlot>> {
  const log = deps.logger ?? silentLogger;
  const options = deps.signal ? { signal: deps.signal } : {};
  const out = new Map<string, SignalSlot>();
  const names = pods.map((p) => p.metadata?.name ?? '');
  const uses = placeholdersOf(template);
  const slot = (pod: string, container?: string) =>
    container === undefined ? pod : `${pod}/${container}`;
  if (!uses.has('container') && uses.has('pod')) {
    const batch = batchByPod(template, names);
    if (batch) {
      try {
        const query = substitute(batch.query, { namespace });
        const result = await deps.prometheus.range(query, startMs, endMs, stepMs, options);
        log.debug(
          { query, startMs, endMs, stepMs, series: result.length },
          'resize: batched signal query',
        );
        if (result.every((s) => s.labels[batch.podLabel] !== undefined)) {
          const byPod = new Map(result.map((s) => [s.labels[batch.podLabel] as string, s]));
          for (const name of names) out.set(slot(name), { samples: samplesOf(byPod.get(name)) });
          return out;
        }
        log.debug({ query }, 'batched signal query lost the pod label; asking per pod');
      } catch (error) {
        for (const name of names) out.set(slot(name), { error: errorText(error) });
        return out;
      }
    }
  }
  const jobs: { pod: string; container?: string }[] = [];
  for (const pod of names) {
    if (uses.has('container')) for (const container of containers) jobs.push({ pod, container });
    else jobs.push({ pod });
  }
  await mapLimit(jobs, deps.concurrency, async (job) => {
    try {
      const query = substitute(template, {
        namespace,
        pod: job.pod,
        ...(job.container === undefined ? {} : { container: job.container }),
      });
      const result = await deps.prometheus.range(query, startMs, endMs, stepMs, options);
      // A per-pod query is expected to give one series; with several, the first is
      // taken and the policy author should aggregate (logged once per pass).
      if (result.length > 1)
        log.debug({ query, series: result.length }, 'signal query returned several series');
      out.set(slot(job.pod, job.container), { samples: samplesOf(result[0]) });
    } catch (error) {
      out.set(slot(job.pod, job.container), { error: errorText(error) });
    }
  });
  return out;
}

/** Every signal (and the SLO) of `rp` for `pods` over the window ending at `now`. */
export async function readResizeSignals(
  deps: ReadSignalsDeps,
  rp: ResizePolicy,
  pods: readonly V1Pod[],
  now: number,
  stepMs: number,
): Promise<ResizeReadings> {
  const readings = new Map<string, SignalReading[]>();
  const slo = new Map<string, SignalSlot>();
  const byNamespace = new Map<string, V1Pod[]>();
  for (const pod of pods) {
    const ns = pod.metadata?.namespace ?? '';
    byNamespace.set(ns, [...(byNamespace.get(ns) ?? []), pod]);
  }
  const containers = Object.keys(rp.containers);
  for (const [namespace, nsPods] of byNamespace) {
    for (const signal of rp.signals) {
      const results = await readTemplate(
        deps,
        signal.query,
        namespace,
        nsPods,
        containers,
        now - rp.windowMs,
        now,
        stepMs,
      );
      for (const pod of nsPods) {
        const name = pod.metadata?.name ?? '';
        const key = objectKey(namespace, name);
        const list = readings.get(key) ?? [];
        if (placeholdersOf(signal.query).has('container')) {
          for (const container of containers) {
            const r = results.get(`${name}/${container}`);
            list.push({ signal: signal.name, container, ...r });
          }
        } else {
          list.push({ signal: signal.name, ...results.get(name) });
        }
        readings.set(key, list);
      }
    }
    if (rp.slo) {
      const results = await readTemplate(
        deps,
        rp.slo.query,
        namespace,
        nsPods,
        containers,
        now - rp.slo.forMs,
        now,
        stepMs,
      );
      for (const pod of nsPods) {
        const name = pod.metadata?.name ?? '';
        const r = results.get(name);
        if (r) slo.set(objectKey(namespace, name), r);
      }
    }
  }
  return { readings, slo };
}
