/**
 * Pod builder, shared by every area's tests. Defaults make a minimal valid pod: one
 * container `app` with image `registry.example/app:1`, created at the ManualClock's
 * default start, uid `uid-<name>`, resourceVersion "1". Chain what a case needs:
 *
 *   aPod('p', 'team-a').gated('team-a.tollgate.io/ready').requests({ cpu: '500m' }).obj()
 *   aPod('p', 'team-a').releasedPending().obj()        // no gates, not yet bound
 *   aPod('p', 'team-a').boundTo('node-1').running().obj()
 *
 * `.obj()` returns a fresh V1Pod each call, so one builder can stamp out variants.
 */
import type { V1Container, V1Pod } from '@kubernetes/client-node';

const defaultCreated = new Date(Date.UTC(2026, 10, 29, 7, 0, 0));

export class PodBuilder {
  #pod: V1Pod;

  constructor(name: string, namespace: string) {
    this.#pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace,
        uid: `uid-${namespace}-${name}`,
        resourceVersion: '1',
        creationTimestamp: defaultCreated,
        labels: {},
        annotations: {},
      },
      spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] },
      status: { phase: 'Pending' },
    };
  }

  /** Appends a scheduling gate (tollgate's or a foreign one). */
  gated(...gates: string[]): this {
    const spec = this.#pod.spec!;
    spec.schedulingGates = [...(spec.schedulingGates ?? []), ...gates.map((name) => ({ name }))];
    return this;
  }

  label(key: string, value: string): this {
    this.#pod.metadata!.labels![key] = value;
    return this;
  }

  annotate(key: string, value: string): this {
    this.#pod.metadata!.annotations![key] = value;
    return this;
  }

  uid(uid: string): this {
    this.#pod.metadata!.uid = uid;
    return this;
  }

  resourceVersion(rv: string): this {
    this.#pod.metadata!.resourceVersion = rv;
    return this;
  }

  /** Creation time: a Date, epoch ms, or an RFC 3339 string. */
  createdAt(at: Date | number | string): this {
    this.#pod.metadata!.creationTimestamp = at instanceof Date ? at : new Date(at);
    return this;
  }

  deleting(at: Date | number = defaultCreated): this {
    this.#pod.metadata!.deletionTimestamp = at instanceof Date ? at : new Date(at);
    return this;
  }

  /** Requests on the first container (limits optional). */
  requests(requests: Record<string, string>, limits?: Record<string, string>): this {
    const first = this.#pod.spec!.containers[0]!;
    first.resources = { requests, ...(limits ? { limits } : {}) };
    return this;
  }

  image(image: string): this {
    this.#pod.spec!.containers[0]!.image = image;
    return this;
  }

  container(container: V1Container): this {
    this.#pod.spec!.containers.push(container);
    return this;
  }

  initContainer(container: V1Container): this {
    const spec = this.#pod.spec!;
    spec.initContainers = [...(spec.initContainers ?? []), container];
    return this;
  }

  /** Pod-level spec.resources. */
  podResources(requests: Record<string, string>, limits?: Record<string, string>): this {
    this.#pod.spec!.resources = { requests, ...(limits ? { limits } : {}) };
    return this;
  }

  overhead(overhead: Record<string, string>): this {
    this.#pod.spec!.overhead = overhead;
    return this;
  }

  /** spec.nodeSelector: where the scheduler may place the pod once released. */
  nodeSelector(labels: Record<string, string>): this {
    this.#pod.spec!.nodeSelector = { ...labels };
    return this;
  }

  boundTo(node: string): this {
    this.#pod.spec!.nodeName = node;
    this.#pod.status = {
      ...this.#pod.status,
      conditions: [{ type: 'PodScheduled', status: 'True' }],
    };
    return this;
  }

  running(): this {
    this.#pod.status = { ...this.#pod.status, phase: 'Running' };
    return this;
  }

  phase(phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed'): this {
    this.#pod.status = { ...this.#pod.status, phase };
    return this;
  }

  /** The scheduler tried and found no node: PodScheduled=False, reason Unschedulable. */
  unschedulable(): this {
    this.#pod.status = {
      ...this.#pod.status,
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }],
    };
    return this;
  }

  /** Sets one status condition (replacing one of the same type). */
  condition(
    type: string,
    status: 'True' | 'False',
    reason?: string,
    lastTransitionTime?: Date | number,
  ): this {
    const others = (this.#pod.status?.conditions ?? []).filter((c) => c.type !== type);
    const at =
      lastTransitionTime === undefined ? {} : { lastTransitionTime: new Date(lastTransitionTime) };
    this.#pod.status = {
      ...this.#pod.status,
      conditions: [...others, { type, status, ...(reason ? { reason } : {}), ...at }],
    };
    return this;
  }

  /**
   * The container `app` waiting for `reason` (ErrImagePull, CrashLoopBackOff, ...); a
   * `lastExit` says how it last ended (exit code, when).
   */
  waiting(
    reason: string,
    options: { restarts?: number; lastExit?: { code: number; at: Date | number } } = {},
  ): this {
    const last = options.lastExit;
    this.#pod.status = {
      ...this.#pod.status,
      containerStatuses: [
        {
          name: 'app',
          image: 'registry.example/app:1',
          imageID: '',
          ready: false,
          restartCount: options.restarts ?? 0,
          state: { waiting: { reason } },
          ...(last
            ? {
                lastState: {
                  terminated: {
                    exitCode: last.code,
                    reason: 'Error',
                    finishedAt: new Date(last.at),
                  },
                },
              }
            : {}),
        },
      ],
    };
    return this;
  }

  obj(): V1Pod {
    return structuredClone(this.#pod);
  }
}

export function aPod(name: string, namespace = 'default'): PodBuilder {
  return new PodBuilder(name, namespace);
}
