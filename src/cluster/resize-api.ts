/**
 * Asking the API server what it supports for resize, instead of learning it from refusals:
 * discovery of the core group (is `pods/resize` served with `patch`) and a server-side
 * dry-run (`dryRun=All`: admitted and validated, never stored) of a pod-level resize of one
 * managed pod: its `spec.resources` cpu (else memory) request one unit up, the limit with
 * it where they are equal, so QoS and the pod budget still hold.
 *
 * The pure judgment of the answers is in `decide/resize-features.ts`; the resize loop
 * holds the answer (`loops/resize-api-probe.ts`).
 */
import {
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import {
  podLevelAnswer,
  type ApiResizeSupport,
  type PodLevelAnswer,
} from '../decide/resize-features.ts';
import type { ResizePodLike } from '../decide/resize-objects.ts';
import { formatStoredAmount, toStoredAmount } from '../lib/quantity.ts';

/** Asks the API server; `candidate` is a managed pod with pod-level resources, if any. */
export type ResizeApiProbe = (candidate: ResizePodLike | undefined) => Promise<ApiResizeSupport>;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The merge patch moving the pod-level request of one resource one unit up; undefined without one. */
export function podLevelProbePatch(pod: ResizePodLike): object | undefined {
  const resources = pod.spec?.resources;
  for (const r of ['cpu', 'memory'] as const) {
    const request = resources?.requests?.[r];
    if (request === undefined) continue;
    const unit = r === 'cpu' ? 1 : 2 ** 20;
    const amount = toStoredAmount(r, request) + unit;
    const limit = resources?.limits?.[r];
    const equal = limit !== undefined && toStoredAmount(r, limit) === toStoredAmount(r, request);
    return {
      spec: {
        resources: {
          requests: { [r]: formatStoredAmount(r, amount) },
          ...(equal ? { limits: { [r]: formatStoredAmount(r, amount) } } : {}),
        },
      },
    };
  }
  return undefined;
}

function answerOf(error: unknown): { code?: number; message: string } {
  const e = error as { code?: number; body?: unknown; message?: string };
  let message = e.message ?? String(error);
  if (typeof e.body === 'string') {
    try {
      message = (JSON.parse(e.body) as { message?: string }).message ?? e.body;
    } catch {
      message = e.body;
    }
  }
  return { ...(typeof e.code === 'number' ? { code: e.code } : {}), message };
}

async function resizeServed(core: CoreV1Api): Promise<boolean | undefined> {
  try {
    const list = await core.getAPIResources();
    const resize = list.resources.find((r) => r.name === 'pods/resize');
    return resize !== undefined && resize.verbs.includes('patch');
  } catch {
    return undefined;
  }
}

async function dryRunPodLevel(
  core: CoreV1Api,
  pod: ResizePodLike | undefined,
): Promise<PodLevelAnswer> {
  const name = pod?.metadata?.name ?? '';
  const namespace = pod?.metadata?.namespace ?? '';
  const body = pod ? podLevelProbePatch(pod) : undefined;
  if (!pod || !body)
    return { verdict: 'unknown', detail: 'not asked yet: no managed pod with pod-level resources' };
  try {
    await core.patchNamespacedPodResize({ name, namespace, body, dryRun: 'All' }, mergePatch);
    return podLevelAnswer(`${namespace}/${name}`, { code: 200 });
  } catch (error) {
    return podLevelAnswer(`${namespace}/${name}`, answerOf(error));
  }
}

/** The probe `tollgate run` and `tollgate plan` use, as the identity of `kc`. */
export function createResizeApiProbe(kc: KubeConfig): ResizeApiProbe {
  const core = kc.makeApiClient(CoreV1Api);
  return async (candidate) => {
    const [served, podLevel] = await Promise.all([
      resizeServed(core),
      dryRunPodLevel(core, candidate),
    ]);
    return { ...(served === undefined ? {} : { resizeServed: served }), podLevel };
  };
}
