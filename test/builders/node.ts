/**
 * Node builder: Ready, schedulable, 8 cpu / 32Gi, no images unless given.
 *
 *   aNode('n1').images('registry.example/app:1').obj()
 *   aNode('n2').notReady().obj()
 *   aNode('n3').notReady(Date.UTC(2026, 0, 1), 'Unknown').obj()
 */
import type { V1Node } from '@kubernetes/client-node';

export class NodeBuilder {
  #node: V1Node;

  constructor(name: string) {
    this.#node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, uid: `uid-node-${name}`, resourceVersion: '1', labels: {} },
      spec: {},
      status: {
        capacity: { cpu: '8', memory: '32Gi', pods: '110' },
        allocatable: { cpu: '8', memory: '32Gi', pods: '110' },
        conditions: [{ type: 'Ready', status: 'True' }],
        images: [],
      },
    };
  }

  /** Each argument is one image entry; pass several names for one image as an array. */
  images(...images: (string | string[])[]): this {
    this.#node.status!.images = images.map((names) => ({
      names: Array.isArray(names) ? names : [names],
    }));
    return this;
  }

  /** Ready False (or Unknown: the kubelet stopped reporting), since `since` when given. */
  notReady(since?: Date | number, status: 'False' | 'Unknown' = 'False'): this {
    this.#node.status!.conditions = [
      {
        type: 'Ready',
        status,
        ...(since !== undefined ? { lastTransitionTime: new Date(since) } : {}),
      },
    ];
    return this;
  }

  cordoned(): this {
    this.#node.spec!.unschedulable = true;
    return this;
  }

  allocatable(resources: Record<string, string>): this {
    this.#node.status!.allocatable = { ...resources };
    this.#node.status!.capacity = { ...resources };
    return this;
  }

  obj(): V1Node {
    return structuredClone(this.#node);
  }
}

export function aNode(name: string): NodeBuilder {
  return new NodeBuilder(name);
}
