/**
 * Builders for resize tests: a running pod whose kubelet-reported resources follow its
 * spec unless told otherwise, a ResizePolicy with short defaults, and sample series.
 *
 *   aRunningPod('api', 'team-a').container('app', { cpu: '500m', memory: '256Mi' }).obj()
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { ResizePolicy, ResourceBounds, Signal } from '../../src/policy/model.ts';
import type { WindowSample } from '../../src/decide/resize-signals.ts';
import { seal, stateKeyRing, unseal } from '../../src/decide/resize-seal.ts';
import {
  decidePodResize,
  type PodResizeInput,
  type PodResizePlan,
} from '../../src/decide/resize-plan.ts';

/** The state key ring resize unit tests seal and verify with. */
export const testStateKeys = stateKeyRing(['resize-state-key-for-tests-only-0123456789']);

/**
 * `decidePodResize` with the defaults resize unit tests share: the default ResizePolicy,
 * no signals, no approvals, a 15 s step, the test state keys; `input` overrides any.
 */
export function decideResizeFor(
  now: number,
  input: Pick<PodResizeInput, 'pod'> & Partial<PodResizeInput>,
): PodResizePlan {
  return decidePodResize({
    policy: aResizePolicy(),
    commit: 'c0ffee',
    readings: [],
    approvals: [],
    now,
    stepMs: 15_000,
    stateKeys: testStateKeys,
    ...input,
  });
}

/** The JSON value of a sealed resize annotation `plan` wrote for pod `uid` (verified). */
export function sealedValue(uid: string, annotation: string, text: string | null | undefined) {
  if (text === undefined || text === null) return undefined;
  const opened = unseal(testStateKeys, uid, annotation, text);
  if (!opened.ok) throw new Error(opened.detail);
  return JSON.parse(opened.json) as Record<string, unknown>;
}

interface ContainerSpec {
  name: string;
  requests: Record<string, string>;
  limits: Record<string, string>;
  resizePolicy?: { resourceName: string; restartPolicy: string }[];
  actual?: { requests: Record<string, string>; limits: Record<string, string> };
  restartCount: number;
  lastTerminated?: { reason: string; finishedAt: string };
}

export class RunningPodBuilder {
  #name: string;
  #namespace: string;
  #node = 'node-a';
  #generation = 1;
  #observedGeneration: number | undefined = 1;
  #containers: ContainerSpec[] = [];
  #pod?: { requests: Record<string, string>; limits: Record<string, string> };
  #podActual?: { requests: Record<string, string>; limits: Record<string, string> };
  #annotations: Record<string, string> = {};
  #labels: Record<string, string> = { app: 'web' };
  #conditions: NonNullable<NonNullable<V1Pod['status']>['conditions']> = [];
  #phase = 'Running';
  #resourceVersion = '100';

  constructor(name: string, namespace: string) {
    this.#name = name;
    this.#namespace = namespace;
  }

  /** A container with requests (and limits, default none); actual follows spec. */
  container(
    name: string,
    requests: Record<string, string>,
    limits: Record<string, string> = {},
    resizePolicy?: { resourceName: string; restartPolicy: string }[],
  ): this {
    this.#containers.push({
      name,
      requests,
      limits,
      restartCount: 0,
      ...(resizePolicy ? { resizePolicy } : {}),
    });
    return this;
  }

  /** Requests == limits for cpu and memory. */
  guaranteed(name: string, cpu: string, memory: string): this {
    return this.container(name, { cpu, memory }, { cpu, memory });
  }

  /** What the kubelet reports running for the last container added. */
  actual(requests: Record<string, string>, limits: Record<string, string> = {}): this {
    const last = this.#containers.at(-1);
    if (!last) throw new Error('actual() needs a container first');
    last.actual = { requests, limits };
    return this;
  }

  podResources(requests: Record<string, string>, limits: Record<string, string> = {}): this {
    this.#pod = { requests, limits };
    return this;
  }

  podActual(requests: Record<string, string>, limits: Record<string, string> = {}): this {
    this.#podActual = { requests, limits };
    return this;
  }

  oomKilled(container: string, finishedAt: string, restartCount = 1): this {
    const c = this.#containers.find((x) => x.name === container);
    if (!c) throw new Error(`no container ${container}`);
    c.lastTerminated = { reason: 'OOMKilled', finishedAt };
    c.restartCount = restartCount;
    return this;
  }

  /** The container's restart count (no termination reason). */
  restarts(container: string, restartCount: number): this {
    const c = this.#containers.find((x) => x.name === container);
    if (!c) throw new Error(`no container ${container}`);
    c.restartCount = restartCount;
    return this;
  }

  annotation(key: string, value: string): this {
    this.#annotations[key] = value;
    return this;
  }

  /** A resize state annotation as tollgate stores it: `value` as JSON, sealed for this pod. */
  sealed(key: string, value: unknown, keys = testStateKeys): this {
    const json = typeof value === 'string' ? value : JSON.stringify(value);
    this.#annotations[key] = seal(keys, `uid-${this.#name}`, key, json);
    return this;
  }

  generation(generation: number, observed?: number): this {
    this.#generation = generation;
    this.#observedGeneration = observed;
    return this;
  }

  condition(type: string, reason?: string, message?: string, observedGeneration?: number): this {
    this.#conditions.push({
      type,
      status: 'True',
      ...(reason ? { reason } : {}),
      ...(message ? { message } : {}),
      ...(observedGeneration !== undefined ? { observedGeneration } : {}),
    });
    return this;
  }

  phase(phase: string): this {
    this.#phase = phase;
    return this;
  }

  node(name: string): this {
    this.#node = name;
    return this;
  }

  obj(): V1Pod {
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: this.#name,
        namespace: this.#namespace,
        uid: `uid-${this.#name}`,
        resourceVersion: this.#resourceVersion,
        generation: this.#generation,
        labels: { ...this.#labels },
        annotations: { ...this.#annotations },
      },
      spec: {
        nodeName: this.#node,
        containers: this.#containers.map((c) => ({
          name: c.name,
          image: 'registry.example/app:1',
          resources: { requests: { ...c.requests }, limits: { ...c.limits } },
          ...(c.resizePolicy ? { resizePolicy: c.resizePolicy } : {}),
        })),
        ...(this.#pod
          ? { resources: { requests: { ...this.#pod.requests }, limits: { ...this.#pod.limits } } }
          : {}),
      },
      status: {
        phase: this.#phase,
        ...(this.#observedGeneration === undefined
          ? {}
          : { observedGeneration: this.#observedGeneration }),
        conditions: this.#conditions,
        ...(this.#pod ? { resources: this.#podActual ?? this.#pod } : {}),
        containerStatuses: this.#containers.map((c) => ({
          name: c.name,
          image: 'registry.example/app:1',
          imageID: '',
          ready: true,
          restartCount: c.restartCount,
          resources: c.actual ?? { requests: { ...c.requests }, limits: { ...c.limits } },
          allocatedResources: { ...(c.actual?.requests ?? c.requests) },
          ...(c.lastTerminated
            ? {
                lastState: {
                  terminated: {
                    exitCode: 137,
                    reason: c.lastTerminated.reason,
                    finishedAt: new Date(c.lastTerminated.finishedAt),
                  },
                },
              }
            : {}),
        })),
      },
    } as V1Pod;
  }
}

export function aRunningPod(name: string, namespace: string): RunningPodBuilder {
  return new RunningPodBuilder(name, namespace);
}

export function aResizePolicy(overrides: Partial<ResizePolicy> = {}): ResizePolicy {
  return {
    name: 'web-resize',
    source: { file: 'resize/web.yaml', document: 0 },
    tenant: 'team-a',
    selector: { matchLabels: { app: 'web' }, matchExpressions: [] },
    containers: {
      app: {
        cpu: { min: 250, max: 2000, step: 250 },
        memory: { min: 128 * 2 ** 20, max: 1024 * 2 ** 20, step: 128 * 2 ** 20 },
      } satisfies ResourceBounds,
    },
    signals: [queueSignal],
    windowMs: 60_000,
    hysteresis: 0.1,
    cooldownMs: 120_000,
    deferredTimeoutMs: 300_000,
    maxAttempts: 3,
    rollback: { onOOMKilled: true, pauseForReview: true },
    pause: { restarts: 5, stuckMs: 1_800_000, unreadableMs: 7_200_000 },
    allowRestart: false,
    ...overrides,
  };
}

export const queueSignal: Signal = {
  name: 'queue',
  query: 'queue_length{namespace="$namespace",pod="$pod"}',
  scaleUpAbove: 100,
  scaleDownBelow: 20,
};

/** Samples every `stepMs` ending at `endMs`, one per value (oldest first). */
export function series(values: readonly number[], endMs: number, stepMs = 15_000): WindowSample[] {
  return values.map((value, i) => ({ at: endMs - (values.length - 1 - i) * stepMs, value }));
}

/** A constant value over a window of `windowMs` at `stepMs`. */
export function steady(
  value: number,
  endMs: number,
  windowMs = 60_000,
  stepMs = 15_000,
): WindowSample[] {
  return series(
    Array.from({ length: windowMs / stepMs + 1 }, () => value),
    endMs,
    stepMs,
  );
}

/** A node as a 1.37 kubelet reports it: in-place resize, pod-level resize declared. */
export function aNode(name: string, cpu: string, memory: string) {
  return {
    metadata: { name },
    status: {
      allocatable: { cpu, memory },
      capacity: { cpu, memory },
      nodeInfo: { kubeletVersion: 'v1.37.2' },
      declaredFeatures: ['InPlacePodLevelResourcesVerticalScaling'],
    },
  };
}
