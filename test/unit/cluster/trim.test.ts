import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { KubernetesObject } from '@kubernetes/client-node';
import { trimObject } from '../../../src/cluster/trim.ts';

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
  it('its metadata, spec and containers have fast properties after the trim', () => {
    const trim = fileURLToPath(new URL('../../../src/cluster/trim.ts', import.meta.url));
    const script = `
      import { trimObject } from ${JSON.stringify(trim)};
      const pod = JSON.parse(${JSON.stringify(JSON.stringify({ ...servedPod(true), metadata: { name: 'p', managedFields: [{ manager: 'm' }], annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}', keep: 'x' } } }))});
      const t = trimObject(pod);
      const parts = { metadata: t.metadata, annotations: t.metadata.annotations, spec: t.spec, container: t.spec.containers[0] };
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
    });
  });
});
