/**
 * Static checks of deploy/ that need no cluster: what the Deployment promises (two
 * replicas, non-root, read-only root filesystem, probes on the observe endpoints, a
 * writable git cache), least RBAC (no pod delete outside the cancel component), and the
 * renderer refusing kustomize features it does not implement.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deployDir, renderKustomization, type RenderedObject } from '../../support/kustomize.ts';

// Rendered YAML is untyped; these tests walk it as loosely typed data.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };
const base = renderKustomization(`${deployDir}/base`);
const find = (
  objects: RenderedObject[],
  kind: string,
  name?: string,
): RenderedObject & Record<string, any> => {
  const found = objects.find(
    (o) => o.kind === kind && (name === undefined || o.metadata?.name === name),
  );
  assert.ok(found, `${kind}${name ? `/${name}` : ''} is rendered`);
  return found as RenderedObject & Record<string, any>;
};
const verbsFor = (objects: RenderedObject[], resource: string): string[] =>
  objects
    .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
    .flatMap((o) => (o as { rules: Rule[] }).rules)
    .filter((r) => r.resources.includes(resource))
    .flatMap((r) => r.verbs)
    .sort();

describe('the deploy/ base', () => {
  it('runs two replicas as non-root with a read-only root filesystem and no capabilities', () => {
    const deployment = find(base, 'Deployment', 'tollgate');
    assert.equal(deployment.spec.replicas, 2);
    assert.equal(deployment.spec.template.spec.securityContext.runAsNonRoot, true);
    const container = deployment.spec.template.spec.containers[0];
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    assert.equal(container.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual(container.securityContext.capabilities.drop, ['ALL']);
    assert.ok(container.resources.requests.cpu && container.resources.limits.memory);
  });

  it('probes /healthz and /readyz and mounts a writable emptyDir for the git cache', () => {
    const spec = find(base, 'Deployment', 'tollgate').spec.template.spec;
    const container = spec.containers[0];
    assert.equal(container.livenessProbe.httpGet.path, '/healthz');
    assert.equal(container.readinessProbe.httpGet.path, '/readyz');
    const cache = container.volumeMounts.find(
      (m: { mountPath: string }) => m.mountPath === '/var/cache/tollgate',
    );
    assert.ok(cache, 'git cache mounted');
    assert.ok(spec.volumes.find((v: { name: string }) => v.name === cache.name).emptyDir);
    assert.equal(
      container.env.find((e: { name: string }) => e.name === 'TOLLGATE_GIT_CACHE_DIR').value,
      '/var/cache/tollgate',
    );
  });

  it('keeps one replica through voluntary disruptions', () => {
    assert.equal(find(base, 'PodDisruptionBudget').spec.minAvailable, 1);
  });

  it('grants no pod deletion unless the cancel component is added', () => {
    assert.deepEqual(verbsFor(base, 'pods'), ['get', 'list', 'patch', 'watch']);
    const withCancel = renderKustomization(`${deployDir}/base`, [`${deployDir}/components/cancel`]);
    assert.deepEqual(verbsFor(withCancel, 'pods'), ['delete', 'get', 'list', 'patch', 'watch']);
  });

  it('grants leases only through a Role in tollgate-system, never cluster-wide', () => {
    const clusterRoles = base.filter((o) => o.kind === 'ClusterRole') as unknown as {
      rules: Rule[];
    }[];
    assert.ok(
      clusterRoles.every((r) => r.rules.every((rule) => !rule.resources.includes('leases'))),
    );
    const role = find(base, 'Role', 'tollgate-leader-election');
    assert.equal(role.metadata?.namespace, 'tollgate-system');
  });

  it('never grants create or update on pods, nor any wildcard', () => {
    const rules = base
      .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
      .flatMap((o) => (o as { rules: Rule[] }).rules);
    for (const rule of rules) {
      assert.ok(
        ![...rule.verbs, ...rule.resources, ...rule.apiGroups].includes('*'),
        JSON.stringify(rule),
      );
      if (rule.resources.includes('pods'))
        assert.ok(!rule.verbs.includes('create') && !rule.verbs.includes('update'));
    }
  });

  it('ships the Grafana dashboard as valid JSON in a ConfigMap the sidecar picks up', () => {
    const dashboard = find(base, 'ConfigMap', 'tollgate-dashboard');
    assert.equal(dashboard.metadata?.labels?.grafana_dashboard, '1');
    const json = JSON.parse(dashboard.data['tollgate.json']);
    assert.equal(json.uid, 'tollgate');
    assert.ok(json.panels.length >= 10);
  });

  it('alerts on the five conditions operators must see', () => {
    const rules = find(base, 'PrometheusRule').spec.groups.flatMap(
      (g: { rules: { alert: string }[] }) => g.rules.map((r) => r.alert),
    );
    for (const alert of [
      'TollgateNoLeader',
      'TollgateGateDwellTooLong',
      'TollgateGatesExpiring',
      'TollgateStaleSkipsRising',
      'TollgateAuditPushFailing',
    ]) {
      assert.ok(rules.includes(alert), alert);
    }
  });
});

describe('the kustomize renderer', () => {
  it('refuses a field it does not implement, naming the file and the field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: x-\n',
    );
    assert.throws(
      () => renderKustomization(dir),
      /kustomization\.yaml: field "namePrefix" is not supported/,
    );
  });

  it('refuses a missing resource', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [nope.yaml]\n',
    );
    assert.throws(() => renderKustomization(dir), /resources: "nope\.yaml" does not exist/);
  });
});
