/**
 * The resize state key as installed: every rendering of tollgate (kustomize base, with the
 * persistent cache, the Helm chart with and without persistence, into another namespace)
 * mounts the Secret `tollgate-resize-state-key` and points `TOLLGATE_RESIZE_STATE_KEY_FILE`
 * at its `keys` file, so every replica seals and verifies resize state with the same key
 * and a successor trusts what its predecessor wrote (docs/resize.md, "Sealed state"). The
 * chart creates the Secret when it is absent, keeps it on uninstall and never in Git; the
 * kustomize base leaves it to `kubectl create secret` (docs/install.md).
 *
 * Rendered by the real `kustomize` and `helm` (test/tools); the chart's `lookup` of an
 * existing Secret against the real API server (`helm template --dry-run=server`).
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { runNamespace } from '../../support/eventually.ts';
import { helmTemplate, kustomizeOverlay, type Manifest } from './tools.ts';

// Rendered YAML is untyped; these tests walk it as loosely typed data.
/* eslint-disable @typescript-eslint/no-explicit-any */
const secretName = 'tollgate-resize-state-key';

const podSpecOf = (objects: Manifest[]): any => {
  const workload = objects.find((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet') as any;
  assert.ok(workload, 'a Deployment or StatefulSet is rendered');
  return workload.spec.template.spec;
};

/** The file TOLLGATE_RESIZE_STATE_KEY_FILE names, as the Secret's volume provides it. */
function keyFileSource(objects: Manifest[]): { secret: string; key: string } | undefined {
  const spec = podSpecOf(objects);
  const container = spec.containers[0];
  const file = container.env.find((e: any) => e.name === 'TOLLGATE_RESIZE_STATE_KEY_FILE')?.value;
  if (typeof file !== 'string') return undefined;
  const mount = container.volumeMounts.find((m: any) => file.startsWith(`${m.mountPath}/`));
  if (!mount) return undefined;
  assert.equal(mount.readOnly, true, 'the key is mounted read-only');
  const volume = spec.volumes.find((v: any) => v.name === mount.name);
  if (!volume?.secret) return undefined;
  return { secret: volume.secret.secretName, key: file.slice(mount.mountPath.length + 1) };
}

const renderings: [string, () => Manifest[]][] = [
  ['kustomize deploy/base', () => kustomizeOverlay()],
  [
    'kustomize with the persistent cache',
    () => kustomizeOverlay({ components: ['persistent-cache'] }),
  ],
  ['kustomize into another namespace', () => kustomizeOverlay({ fields: { namespace: 'ops' } })],
  ['helm with default values', () => helmTemplate()],
  ['helm with persistence', () => helmTemplate({ set: ['persistence.enabled=true'] })],
  ['helm into another namespace', () => helmTemplate({ namespace: 'ops' })],
];

describe('the resize state key, wherever tollgate is installed', () => {
  for (const [name, render] of renderings) {
    it(`${name}: every replica reads the key file of the Secret ${secretName}`, () => {
      assert.deepEqual(keyFileSource(render()), { secret: secretName, key: 'keys' });
    });
  }

  it('the chart creates the Secret when absent: a key of 64 characters, kept on uninstall', () => {
    const secret = helmTemplate().find((o) => o.kind === 'Secret') as any;
    assert.ok(secret, 'the chart renders the key Secret');
    assert.equal(secret.metadata.name, secretName);
    assert.equal(secret.metadata.annotations['helm.sh/resource-policy'], 'keep');
    const keys = Buffer.from(secret.data.keys, 'base64').toString('utf8');
    assert.match(keys, /^[A-Za-z0-9]{64}$/);
  });

  it('the chart leaves the Secret to the operator when told to (GitOps renders have no lookup)', () => {
    const objects = helmTemplate({ set: ['resizeStateKey.create=false'] });
    assert.equal(objects.filter((o) => o.kind === 'Secret').length, 0);
    assert.deepEqual(keyFileSource(objects), { secret: secretName, key: 'keys' });
  });

  it('the kustomize base puts no key in Git: it renders no Secret at all', () => {
    assert.equal(kustomizeOverlay().filter((o) => o.kind === 'Secret').length, 0);
  });
});

describe("the chart's key Secret on a real API server", () => {
  let cp: ControlPlane;
  before(async () => {
    cp = await sharedControlPlane();
  });

  const renderedKey = (namespace: string): string => {
    const secret = helmTemplate({ namespace, kubeconfig: cp.adminKubeconfig }).find(
      (o) => o.kind === 'Secret',
    ) as any;
    return Buffer.from(secret.data.keys, 'base64').toString('utf8');
  };

  it('keeps the key of an existing Secret (upgrade, reinstall) and makes one only when absent', async () => {
    const namespace = runNamespace('keylookup');
    const core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const made = [renderedKey(namespace), renderedKey(namespace)];
    assert.notEqual(made[0], made[1], 'absent: a new random key at each render');
    const installed = `${'k'.repeat(40)}\n${'o'.repeat(40)}\n`;
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: secretName }, stringData: { keys: installed } },
    });
    assert.equal(renderedKey(namespace), installed, 'present: its keys, rotated lines included');
    assert.equal(renderedKey(namespace), installed);
    await core.deleteNamespace({ name: namespace });
  });
});
