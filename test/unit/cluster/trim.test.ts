import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { trimObject } from '../../../src/cluster/trim.ts';
import { createClusterView } from '../../../src/cluster/view.ts';
import type { ResourceSource, ResourceTarget } from '../../../src/cluster/source.ts';
import { servedJobPod } from '../../builders/served-pod.ts';
import { viewHeapPerPod } from '../../support/heap-in-child.ts';

type Loose = KubernetesObject & Record<string, unknown>;

/** A container as the API server serves it for a batch worker: every field a Job's pod carries. */
function servedContainer(name: string): Record<string, unknown> {
  return {
    name,
    image: `registry.example/${name}:1`,
    imagePullPolicy: 'IfNotPresent',
    command: ['python', '-m', 'trainer'],
    args: ['--epochs=10'],
    workingDir: '/work',
    env: [{ name: 'A', value: 'b' }],
    envFrom: [{ configMapRef: { name: 'cfg' } }],
    ports: [{ containerPort: 8080 }],
    volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
    volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }],
    livenessProbe: { httpGet: { path: '/healthz', port: 8080 } },
    readinessProbe: { httpGet: { path: '/readyz', port: 8080 } },
    startupProbe: { httpGet: { path: '/healthz', port: 8080 } },
    lifecycle: { preStop: { exec: { command: ['sleep', '5'] } } },
    securityContext: { runAsNonRoot: true },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    resources: { requests: { cpu: '500m' }, limits: { memory: '2Gi' } },
    resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }],
    restartPolicy: 'Always',
  };
}

/** What tollgate keeps of such a container: what gates, resize and explain read. */
function keptContainer(name: string): Record<string, unknown> {
  return {
    name,
    image: `registry.example/${name}:1`,
    imagePullPolicy: 'IfNotPresent',
    resources: { requests: { cpu: '500m' }, limits: { memory: '2Gi' } },
    resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }],
    restartPolicy: 'Always',
  };
}

const status = {
  phase: 'Pending',
  conditions: [{ type: 'PodScheduled', status: 'False', reason: 'SchedulingGated' }],
  containerStatuses: [{ name: 'worker', ready: false, restartCount: 0 }],
};

/** A pod as listed (list items carry no kind) or watched (with kind), its containers built by `container`. */
function podOf(
  withKind: boolean,
  container: (name: string) => Record<string, unknown>,
  volumes: Record<string, unknown> = {},
): Loose {
  return {
    ...(withKind ? { apiVersion: 'v1', kind: 'Pod' } : {}),
    metadata: { name: 'p', namespace: 'ns', uid: 'u', resourceVersion: '9', labels: { a: 'b' } },
    spec: {
      schedulingGates: [{ name: 'tollgate.io/gate' }],
      nodeSelector: { pool: 'batch' },
      tolerations: [{ key: 'batch', operator: 'Exists' }],
      priority: 0,
      overhead: { cpu: '10m' },
      resources: { requests: { cpu: '1' } },
      initContainers: [container('init')],
      containers: [container('worker'), container('sidecar')],
      ephemeralContainers: [container('debug')],
      ...volumes,
    },
    status,
  };
}

const servedPod = (withKind: boolean): Loose =>
  podOf(withKind, servedContainer, { volumes: [{ name: 'scratch', emptyDir: {} }] });
const keptPod = (withKind: boolean): Loose => podOf(withKind, keptContainer);

describe('tollgate keeps pods in the compact form its decisions need', () => {
  for (const withKind of [false, true]) {
    it(`a pod ${withKind ? 'from a watch event (with kind)' : 'from a list (no kind)'} loses its containers' command, env, probes and mounts and its volumes, and keeps what gates, resize and explain read`, () => {
      assert.deepEqual(trimObject(servedPod(withKind)), keptPod(withKind));
    });
  }

  const untouched: { what: string; object: Loose }[] = [
    {
      what: 'a Deployment (its pod template is not a pod)',
      object: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'd' },
        spec: { template: { spec: { containers: [servedContainer('web')] } } },
      },
    },
    {
      what: 'a custom resource with spec.containers (an ObjectCondition may read any field)',
      object: {
        apiVersion: 'example.com/v1',
        kind: 'Trainer',
        metadata: { name: 't' },
        spec: { containers: [servedContainer('worker')], volumes: [{ name: 'v' }] },
      },
    },
    {
      what: 'a ConfigMap',
      object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { env: 'x' } },
    },
  ];
  for (const { what, object } of untouched) {
    it(`${what} keeps its spec whole`, () => {
      assert.deepEqual(trimObject(structuredClone(object)), object);
    });
  }
});

describe('a trimmed pod stays a fast V8 object', () => {
  /**
   * V8 turns an object that loses a property (`delete`) into a dictionary object, larger
   * and slower: 10,000 pods trimmed that way held 60 MB of heap, copies 36 MB. Asked of
   * V8 itself (`%HasFastProperties`, a child with --allow-natives-syntax): no timing.
   */
  const forms = [
    { form: 'the compact form (a pod an ObjectCondition names)', trim: 'trimObject' },
    { form: 'the form the view holds', trim: 'trimPod' },
  ];
  for (const { form, trim } of forms) {
    it(`in ${form}, its metadata, spec, containers and status have fast properties`, () => {
      const source = fileURLToPath(new URL('../../../src/cluster/trim.ts', import.meta.url));
      const served = servedJobPod(7, { running: true }) as { metadata: Record<string, unknown> };
      const withExtras = {
        ...served,
        metadata: {
          ...served.metadata,
          managedFields: [{ manager: 'm' }],
          annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}', keep: 'x' },
        },
      };
      const script = `
        import { ${trim} as trim } from ${JSON.stringify(source)};
        const t = trim(JSON.parse(${JSON.stringify(JSON.stringify(withExtras))}));
        const parts = { metadata: t.metadata, annotations: t.metadata.annotations, spec: t.spec, container: t.spec.containers[0], status: t.status, containerStatus: t.status.containerStatuses[0] };
        process.stdout.write(JSON.stringify(Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, %HasFastProperties(v)]))));
      `;
      const child = spawnSync(
        process.execPath,
        ['--allow-natives-syntax', '--input-type=module', '-e', script],
        { encoding: 'utf8' },
      );
      assert.equal(child.status, 0, child.stderr);
      assert.deepEqual(JSON.parse(child.stdout), {
        metadata: true,
        annotations: true,
        spec: true,
        container: true,
        status: true,
        containerStatus: true,
      });
    });
  }
});

/** The value at a dotted path ("spec.containers.0.image"); undefined where any step is missing. */
function valueAt(object: unknown, path: string): unknown {
  let current = object;
  for (const step of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/** A source that lists `objects` (the pods kind only) as JSON text parses them, and watches in silence. */
function listing(target: ResourceTarget, objects: readonly unknown[]): ResourceSource {
  const served = target.kind === 'Pod' && target.namespace === undefined ? objects : [];
  return {
    description: `${target.kind} ${target.namespace ?? ''}`,
    list: async () => ({
      items: served.map((object) => JSON.parse(JSON.stringify(object)) as KubernetesObject),
      resourceVersion: '1',
      continueToken: undefined,
    }),
    watch: () => ({ stop() {} }),
  };
}

/** The pod the cluster view holds once it has listed `served`. */
async function heldByTheView(served: Record<string, unknown>): Promise<unknown> {
  const view = createClusterView({
    kubeConfig: new KubeConfig(),
    sourceFactory: (target) => listing(target, [served]),
  });
  view.start();
  try {
    await view.whenSynced(AbortSignal.timeout(5000));
    const { namespace, name } = served.metadata as { namespace: string; name: string };
    const held = view.pod(namespace, name);
    assert.ok(held, 'the view holds the pod');
    return held;
  } finally {
    await view.stop();
  }
}

/** A running pod with pod-level resources and a runtime class's overhead, being deleted. */
function servedDeletingPod(): Record<string, unknown> {
  const pod = servedJobPod(8, { running: true }) as {
    metadata: Record<string, unknown>;
    spec: Record<string, unknown>;
    status: Record<string, unknown>;
  };
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      deletionTimestamp: '2026-11-29T08:00:00Z',
      deletionGracePeriodSeconds: 30,
    },
    spec: {
      ...pod.spec,
      runtimeClassName: 'kata',
      overhead: { cpu: '250m', memory: '120Mi' },
      resources: { requests: { cpu: '1', memory: '2Gi' }, limits: { memory: '4Gi' } },
    },
    status: { ...pod.status, resources: { requests: { cpu: '1', memory: '2Gi' } } },
  };
}

/**
 * Every pod field some part of tollgate reads (decide/, loops/, the stale-guard, explain
 * and queue, the read-back of writes), by the pod it is found on. Each must reach the
 * view as the API server served it.
 */
/** Field paths of a served pod, by the pod they are found on. */
type FieldTable = { pod: string; served: () => Record<string, unknown>; paths: string[] }[];

const readFields: FieldTable = [
  {
    pod: 'a gated Job pod',
    served: () => servedJobPod(7),
    paths: [
      'apiVersion',
      'kind',
      'metadata.name',
      'metadata.namespace',
      'metadata.uid',
      'metadata.resourceVersion',
      'metadata.generation',
      'metadata.creationTimestamp',
      'metadata.labels',
      'metadata.annotations',
      'spec.schedulingGates',
      'spec.containers.0.name',
      'spec.containers.0.image',
      'spec.containers.0.resources',
      'spec.containers.0.resizePolicy',
      'spec.initContainers.0.name',
      'spec.initContainers.0.image',
      'spec.initContainers.0.restartPolicy',
      'spec.initContainers.0.resources',
      'status.phase',
      'status.observedGeneration',
      'status.conditions.0.type',
      'status.conditions.0.status',
      'status.conditions.0.reason',
      'status.conditions.0.message',
      'status.conditions.0.lastTransitionTime',
      'status.conditions.0.observedGeneration',
    ],
  },
  {
    pod: 'a running Job pod',
    served: () => servedJobPod(7, { running: true }),
    paths: [
      'spec.nodeName',
      'status.phase',
      'status.conditions.2.type',
      'status.conditions.2.status',
      'status.conditions.2.lastTransitionTime',
      'status.containerStatuses.0.name',
      'status.containerStatuses.0.restartCount',
      'status.containerStatuses.0.state',
      'status.containerStatuses.0.lastState',
      'status.containerStatuses.0.resources',
      'status.containerStatuses.0.allocatedResources',
      'status.initContainerStatuses.0.name',
      'status.initContainerStatuses.0.restartCount',
      'status.initContainerStatuses.0.state',
      'status.initContainerStatuses.0.lastState',
    ],
  },
  {
    pod: 'a running pod with pod-level resources and overhead, being deleted',
    served: servedDeletingPod,
    paths: ['metadata.deletionTimestamp', 'spec.overhead', 'spec.resources', 'status.resources'],
  },
];

/** What the API server serves of those pods that nothing in tollgate reads. */
const unreadFields: FieldTable = [
  {
    pod: 'a gated Job pod',
    served: () => servedJobPod(7),
    paths: [
      'metadata.generateName',
      'metadata.ownerReferences',
      'metadata.finalizers',
      'spec.volumes',
      'spec.restartPolicy',
      'spec.terminationGracePeriodSeconds',
      'spec.dnsPolicy',
      'spec.nodeSelector',
      'spec.serviceAccountName',
      'spec.serviceAccount',
      'spec.securityContext',
      'spec.hostname',
      'spec.subdomain',
      'spec.affinity',
      'spec.schedulerName',
      'spec.tolerations',
      'spec.priority',
      'spec.enableServiceLinks',
      'spec.preemptionPolicy',
      'spec.containers.0.command',
      'spec.containers.0.args',
      'spec.containers.0.env',
      'spec.containers.0.volumeMounts',
      'spec.containers.0.readinessProbe',
      'spec.containers.0.terminationMessagePath',
      'spec.containers.0.terminationMessagePolicy',
      'spec.containers.0.imagePullPolicy',
      'spec.initContainers.0.imagePullPolicy',
      'status.qosClass',
      'status.conditions.0.lastProbeTime',
    ],
  },
  {
    pod: 'a running Job pod',
    served: () => servedJobPod(7, { running: true }),
    paths: [
      'status.hostIP',
      'status.hostIPs',
      'status.podIP',
      'status.podIPs',
      'status.startTime',
      'status.containerStatuses.0.image',
      'status.containerStatuses.0.imageID',
      'status.containerStatuses.0.containerID',
      'status.containerStatuses.0.ready',
      'status.containerStatuses.0.started',
      'status.containerStatuses.0.volumeMounts',
      'status.containerStatuses.0.user',
      'status.initContainerStatuses.0.imageID',
    ],
  },
  {
    pod: 'a running pod with pod-level resources and overhead, being deleted',
    served: servedDeletingPod,
    paths: ['metadata.deletionGracePeriodSeconds', 'spec.runtimeClassName'],
  },
];

describe('the cluster view holds pods in the form the decisions read', () => {
  for (const { pod, served, paths } of readFields) {
    for (const path of paths) {
      it(`${pod} keeps ${path} as served`, async () => {
        const before = served();
        assert.notEqual(valueAt(before, path), undefined, `the served pod has ${path}`);
        assert.deepEqual(valueAt(await heldByTheView(before), path), valueAt(before, path));
      });
    }
  }
  for (const { pod, served, paths } of unreadFields) {
    it(`${pod} loses what no decision reads: ${paths.join(', ')}`, async () => {
      const before = served();
      const held = await heldByTheView(before);
      for (const path of paths)
        assert.notEqual(valueAt(before, path), undefined, `the served pod has ${path}`);
      assert.deepEqual(
        paths.filter((path) => valueAt(held, path) !== undefined),
        [],
        'fields no decision reads, still held',
      );
    });
  }

  it('a pod an ObjectCondition names keeps those fields: a policy may compare any of them', () => {
    const served = servedJobPod(7, { running: true });
    const referenced = trimObject(JSON.parse(JSON.stringify(served)) as KubernetesObject);
    for (const path of ['status.podIP', 'spec.serviceAccountName', 'metadata.ownerReferences'])
      assert.deepEqual(valueAt(referenced, path), valueAt(served, path), path);
  });
});

describe('the heap the cluster view takes for its pods', () => {
  /**
   * Held in the compact form (containers without command, env, probes and mounts, no
   * volumes) these pods took 3,870 B each; in the form the decisions read, 2,125 B; with
   * the parts pods of one Job hold alike shared (containers, gates, conditions, a spec or
   * status whole), 587 B. These pods were created, and the running ones started, in the
   * same second, so every gated pod shares its spec and status whole: a cluster's pods
   * share less. The bound sits a quarter and more from the last two, so the collector's
   * noise does not flake it.
   */
  it('10,000 Job pods, half gated and half running, take under 800 B of heap each', () => {
    const perPod = viewHeapPerPod(10_000);
    assert.ok(perPod < 800, `heap per pod: ${perPod.toFixed(0)} B`);
  });
});
