/**
 * Polling helpers for e2e tests against the real control plane, where every effect is
 * asynchronous (scheduler, kubelet, controllers). A timeout fails with what was last
 * seen, so a red test says why instead of only "timed out".
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';

/**
 * Resolves once the wall clock is past the second `at` falls in. Git commit times and
 * creationTimestamps are whole seconds: a commit made after this is in a later second
 * than a pod created before it (a name-only approval reaches only such pods).
 */
export async function pastTheSecondOf(at: number): Promise<void> {
  const next = (Math.floor(at / 1_000) + 1) * 1_000;
  while (Date.now() < next) await sleep(next - Date.now());
}

/** Calls `probe` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  options: { timeoutMs?: number; intervalMs?: number; describe?: () => string } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const detail = options.describe ? `; last seen: ${options.describe()}` : '';
      const cause = lastError ? `; last error: ${(lastError as Error).message}` : '';
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${detail}${cause}`);
    }
    await sleep(options.intervalMs ?? 100);
  }
}

/** A builder's pod made fit for POST: no uid, resourceVersion, timestamps or status. */
export function creatable(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  if (copy.metadata) {
    delete copy.metadata.uid;
    delete copy.metadata.resourceVersion;
    delete copy.metadata.creationTimestamp;
    delete copy.metadata.deletionTimestamp;
  }
  delete copy.status;
  return copy;
}

/**
 * A namespace name unique to this run, so a test file can run again against a reused
 * cluster (TOLLGATE_TEST_KUBECONFIG) without colliding with what an earlier run left.
 */
export function runNamespace(prefix: string): string {
  return `${prefix}-${process.pid.toString(36)}${Math.random().toString(36).slice(2, 6)}`;
}

/**
 * Force-deletes a test namespace's pods (grace 0: no kubelet may be left to finish a
 * graceful deletion) and then the namespace, so a reused cluster's simulated nodes start
 * the next run empty. Errors are reported, not thrown: cleanup must not mask a failure.
 */
export async function removeNamespace(core: CoreV1Api, namespace: string): Promise<void> {
  try {
    await core.deleteCollectionNamespacedPod({
      namespace,
      gracePeriodSeconds: 0,
      body: { gracePeriodSeconds: 0 },
    });
    await core.deleteNamespace({ name: namespace });
  } catch (error) {
    process.stderr.write(`cleanup of namespace ${namespace} failed: ${(error as Error).message}\n`);
  }
}
