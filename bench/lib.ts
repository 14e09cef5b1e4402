/**
 * Shared pieces of the benchmarks: bulk pod creation, the raw gate-removal client that
 * defines the ceiling, percentiles and resident-memory sampling. Benchmarks run against
 * the same real control plane the e2e tests use (test/support/control-plane.ts).
 */
import { readFileSync } from 'node:fs';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { checkedPassShare } from '../src/loops/pass-pacing.ts';
import { createWriteExecutor } from '../src/cluster/writer.ts';

export async function inPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

export async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    await core.createNamespace({ body: { metadata: { name } } });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}

export function gatedPod(
  name: string,
  namespace: string,
  gate: string,
  labels: Record<string, string> = {},
): V1Pod {
  return {
    metadata: { name, namespace, labels: { 'bench.tollgate.io/run': 'yes', ...labels } },
    spec: {
      schedulingGates: [{ name: gate }],
      containers: [
        {
          name: 'app',
          image: 'registry.example/bench:1',
          resources: { requests: { cpu: '10m', memory: '16Mi' } },
        },
      ],
      terminationGracePeriodSeconds: 0,
    },
  };
}

/** Creates `count` gated pods; returns how long it took. */
export async function createGatedPods(
  kc: KubeConfig,
  namespace: string,
  count: number,
  gate: string,
  options: {
    prefix?: string;
    concurrency?: number;
    labels?: Record<string, string>;
    /** Builds each pod instead of the minimal `gatedPod` (index = position in this batch). */
    build?: (name: string, namespace: string, gate: string, index: number) => V1Pod;
  } = {},
): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  const names = Array.from(
    { length: count },
    (_, i) => `${options.prefix ?? 'p'}-${String(i).padStart(5, '0')}`,
  );
  const started = performance.now();
  const indexOf = new Map(names.map((name, i) => [name, i]));
  await inPool(names, options.concurrency ?? 32, async (name) => {
    const body = options.build
      ? options.build(name, namespace, gate, indexOf.get(name) ?? 0)
      : gatedPod(name, namespace, gate, options.labels);
    await withRetries(`create pod ${namespace}/${name}`, async (attempt) => {
      try {
        await core.createNamespacedPod({ namespace, body });
      } catch (error) {
        // A retried create whose first attempt landed before the connection dropped.
        if (attempt > 1 && (error as { code?: number }).code === 409) return;
        throw error;
      }
    });
  });
  return performance.now() - started;
}

/**
 * Runs `work` again on transient failures (a dropped connection, 429, 5xx), up to 6
 * attempts with doubling pauses: with tens of thousands of creates against a loaded
 * apiserver an HTTP/2 connection is sometimes closed under the client, and one lost
 * request must not end a benchmark run. Anything else is thrown at once.
 */
export async function withRetries(
  what: string,
  work: (attempt: number) => Promise<void>,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await work(attempt);
      return;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const transient = typeof code !== 'number' || code === 429 || (code >= 500 && code <= 599);
      if (!transient || attempt >= 6)
        throw new Error(`${what}: ${String(error)}`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
    }
  }
}

/**
 * Deletes every pod of `namespace` at once (no grace period) and waits until none is
 * listed, at most `maxPolls` half-second looks. A bench phase that leaves its pods behind
 * makes every later phase run against a larger store, with the scheduler still binding
 * the pods it released: the last phase of a repeat, and every later repeat, would be
 * measured on a different API server from the first.
 */
export async function clearPods(kc: KubeConfig, namespace: string, maxPolls = 600): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await withRetries(`delete the pods of ${namespace}`, async () => {
    await core.deleteCollectionNamespacedPod({ namespace, gracePeriodSeconds: 0 });
  });
  for (let poll = 0; poll < maxPolls; poll++) {
    const left = await core.listNamespacedPod({ namespace, limit: 1 });
    if (left.items.length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`pods of ${namespace} still listed after ${maxPolls} looks`);
}

/** Every pod of a namespace, in pages of 1,000. */
export async function listAllPods(kc: KubeConfig, namespace: string): Promise<V1Pod[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const pods: V1Pod[] = [];
  let _continue: string | undefined;
  do {
    const page = await core.listNamespacedPod({ namespace, limit: 1000, _continue });
    pods.push(...page.items);
    _continue = page.metadata?._continue;
  } while (_continue);
  return pods;
}

/**
 * The ceiling: removes the same gates with the same JSON patch and concurrency as
 * tollgate, through tollgate's own write path (`createWriteExecutor`: the same client and
 * the same handling of answers), with no policy, audit, guard or queue. What this achieves
 * is the API server's own limit on this machine.
 */
export async function rawRelease(
  kc: KubeConfig,
  namespace: string,
  gate: string,
  concurrency: number,
): Promise<{ pods: number; millis: number; writes: number }> {
  const execute = createWriteExecutor(kc);
  const signal = new AbortController().signal;
  const pods = await listAllPods(kc, namespace);
  const started = performance.now();
  let writes = 0;
  await inPool(pods, concurrency, async (pod) => {
    const gateIndex = pod.spec?.schedulingGates?.findIndex((g) => g.name === gate) ?? -1;
    if (gateIndex < 0) return;
    const name = pod.metadata!.name!;
    await execute(
      {
        key: `${namespace}/${name}`,
        target: {
          namespace,
          name,
          uid: pod.metadata!.uid!,
          resourceVersion: pod.metadata!.resourceVersion!,
        },
        op: { type: 'removeGate', gate, gateIndex },
        priority: 0,
        tenant: 'ceiling',
        deadline: Number.MAX_SAFE_INTEGER,
        decisionId: `ceiling-${name}`,
      },
      signal,
    );
    writes += 1;
  });
  return { pods: pods.length, millis: performance.now() - started, writes };
}

/**
 * `--pass-share`: the share of the event loop gate-release passes may take, in (0, 1];
 * absent, undefined (the loop's default).
 */
export function passShareOption(raw: string | undefined): number | undefined {
  return raw === undefined
    ? undefined
    : checkedPassShare(Number(raw), `--pass-share ${JSON.stringify(raw)}`);
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export const median = (values: readonly number[]): number => percentile(values, 50);

/** Resident set size of a process in bytes, from /proc. */
export function rssOf(pid: number): number {
  const status = readStatus(pid);
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

function readStatus(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return '';
  }
}

/**
 * The benchmarks' policy repository: one tenant `bench` over `namespaces` with no budget
 * (the Budget condition always holds) and pacing far above `pods`, and one GatePolicy on
 * `gate` with `conditions`.
 */
export function benchPolicyFiles(options: {
  namespaces: string[];
  pods: number;
  gate: string;
  gatePolicy: string;
  conditions: unknown[];
  /** Pacing of the settings and the tenant; default: twice the pods, unlimited rate. */
  pacing?: { settings?: object; tenant?: object };
  /** Tenant pod budget; absent = none. */
  budgetPods?: number;
}): Record<string, string> {
  const doc = (kind: string, name: string, spec: unknown): string =>
    stringify({ apiVersion: 'tollgate.io/v1alpha1', kind, metadata: { name }, spec });
  const pacing = {
    maxInFlight: options.pods * 2,
    releasesPerSecond: 1_000_000,
    batchSize: options.pods * 2,
  };
  return {
    'tollgate.yaml': doc('Settings', 'tollgate', {
      cluster: 'bench',
      audit: {
        branch: 'tollgate/audit',
        mode: 'strict',
        batch: { maxDecisions: 1000, maxDelay: '200ms' },
      },
      pacing: options.pacing?.settings ?? pacing,
    }),
    'staleness.yaml': doc('StalenessPolicy', 'default', {
      maxCacheLag: '5s',
      destructive: ['Cancel'],
      requeue: { base: '200ms', max: '5s' },
      liveReads: { qps: 20, burst: 40, breaker: { failureThreshold: 5, open: '10s' } },
    }),
    'tenants/bench.yaml': doc('Tenant', 'bench', {
      namespaces: options.namespaces,
      gatePrefixes: ['bench.tollgate.io/'],
      pacing: options.pacing?.tenant ?? pacing,
      ...(options.budgetPods === undefined ? {} : { budget: { pods: options.budgetPods } }),
    }),
    'gates/bench.yaml': doc('GatePolicy', options.gatePolicy, {
      tenant: 'bench',
      gate: options.gate,
      conditions: options.conditions,
    }),
  };
}
