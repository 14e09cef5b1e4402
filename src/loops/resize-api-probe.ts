/**
 * The API server's answer about resize, as the resize loop holds it (the question itself
 * is `cluster/resize-api.ts`, its judgment `decide/resize-features.ts`).
 */
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ResizePolicy } from '../policy/model.ts';
import {
  apiProbeKey,
  podLevelProbeCandidate,
  type ApiResizeSupport,
} from '../decide/resize-features.ts';
import type { ResizeApiProbe } from '../cluster/resize-api.ts';

export type { ResizeApiProbe };

/**
 * The API server's answer as the resize loop holds it: asked at the first pass and again
 * whenever the nodes or the pod to ask about change (`apiProbeKey`); a failed question
 * keeps the key unset, so the next pass asks again.
 */
export class ApiSupportTracker {
  readonly #probe: ResizeApiProbe | undefined;
  #key: string | undefined;
  #current: ApiResizeSupport | undefined;

  constructor(probe: ResizeApiProbe | undefined) {
    this.#probe = probe;
  }

  current(): ApiResizeSupport | undefined {
    return this.#current;
  }

  async refresh(
    byPolicy: ReadonlyMap<ResizePolicy, readonly V1Pod[]>,
    nodes: readonly V1Node[],
  ): Promise<ApiResizeSupport | undefined> {
    if (!this.#probe) return undefined;
    const candidate = podLevelProbeCandidate(byPolicy, nodes);
    const key = apiProbeKey(nodes, candidate);
    if (key === this.#key) return this.#current;
    this.#current = await this.#probe(candidate);
    this.#key = this.#current.resizeServed === undefined ? undefined : key;
    return this.#current;
  }
}
