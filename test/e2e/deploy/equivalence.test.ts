/**
 * The Helm chart (chart/tollgate) and the kustomize base (deploy/) describe the same
 * install: rendered by the real `helm template` and `kustomize build` (test/tools), with
 * default values, with every optional part switched on, and into another namespace, they
 * produce the same objects, compared whole after parsing.
 *
 * Stated differences, removed before comparing:
 * - the Namespace object: deploy/base creates it (with Pod Security labels); a chart
 *   leaves that to `helm install --create-namespace` or the platform;
 * - the Secret tollgate-resize-state-key: the chart makes it at install when absent (a
 *   random key, test/e2e/deploy/resize-state-key.test.ts); the kustomize base keeps keys
 *   out of Git and leaves it to `kubectl create secret` (docs/install.md).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeObject, helmTemplate, kustomizeOverlay, type Manifest } from './tools.ts';

function normalizedKustomize(objects: Manifest[]): Manifest[] {
  return objects.filter((o) => o.kind !== 'Namespace');
}

const byIdentity = (objects: Manifest[]): Map<string, Manifest> =>
  new Map(objects.map((o) => [describeObject(o), o]));

const normalizedHelm = (objects: Manifest[]): Manifest[] =>
  objects.filter((o) => !(o.kind === 'Secret' && o.metadata?.name === 'tollgate-resize-state-key'));

function assertSameObjects(helm: Manifest[], kustomize: Manifest[]): void {
  const fromHelm = byIdentity(normalizedHelm(helm));
  const fromKustomize = byIdentity(normalizedKustomize(kustomize));
  assert.deepEqual([...fromHelm.keys()].sort(), [...fromKustomize.keys()].sort());
  for (const [identity, object] of fromKustomize)
    assert.deepEqual(fromHelm.get(identity), object, identity);
}

describe('the Helm chart and the kustomize base render the same objects', () => {
  it('with default values', () => {
    const helm = helmTemplate();
    assert.ok(helm.length >= 12, `${helm.length} objects`);
    assertSameObjects(helm, kustomizeOverlay());
  });

  it('with monitoring and the cancel component switched on', () => {
    assertSameObjects(
      helmTemplate({ set: ['monitoring.enabled=true', 'cancel.enabled=true'] }),
      kustomizeOverlay({ components: ['monitoring', 'cancel'] }),
    );
  });

  it('with the persistent cache: a StatefulSet with a claim per replica', () => {
    const helm = helmTemplate({ namespace: 'ops', set: ['persistence.enabled=true'] });
    assert.deepEqual(
      helm.filter((o) => o.kind === 'StatefulSet' || o.kind === 'Deployment').map(describeObject),
      ['StatefulSet/ops/tollgate'],
    );
    assertSameObjects(
      helm,
      kustomizeOverlay({ components: ['persistent-cache'], fields: { namespace: 'ops' } }),
    );
  });

  it("the chart's heap cap follows maxHeapMiB (the sizing table's last column)", () => {
    const deployment = helmTemplate({ set: ['maxHeapMiB=768'] }).find(
      (o) => o.kind === 'Deployment',
    ) as unknown as {
      spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
    };
    const env = deployment.spec.template.spec.containers[0]!.env;
    assert.equal(env.find((e) => e.name === 'NODE_OPTIONS')?.value, '--max-old-space-size=768');
  });

  it('into another namespace', () => {
    assertSameObjects(
      helmTemplate({ namespace: 'ops', set: ['monitoring.enabled=true'] }),
      kustomizeOverlay({ components: ['monitoring'], fields: { namespace: 'ops' } }),
    );
  });

  it('the chart governs the domains it is given, and refuses one that is not a domain', () => {
    const policies = helmTemplate({
      set: ['admission.governedDomains={tollgate.io,example.com}'],
    }).filter((o) => o.kind === 'ValidatingAdmissionPolicy');
    for (const policy of policies)
      assert.match(JSON.stringify(policy), /\['tollgate\.io', 'example\.com'\]\.exists/);
    assert.throws(
      () => helmTemplate({ set: ["admission.governedDomains={x'||true}"] }),
      /admission\.governedDomains: .* is not a DNS domain/,
    );
  });
});
