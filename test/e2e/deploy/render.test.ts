/**
 * deploy/ rendered by the real kustomize (test/tools/build.sh), checked without a
 * cluster: what the Deployment promises (two replicas, non-root, read-only root
 * filesystem, probes on the observe endpoints, a writable git cache), least RBAC (no pod
 * delete outside the cancel component, only the verbs tollgate uses), optional parts
 * that are really optional, an overlay's namespace and name prefix carried into the
 * admission bindings, and admission parameters that match the example policy.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  deployDir,
  kustomizeBuild,
  kustomizeOverlay,
  parseManifests,
  runTollgate,
  withMonitoring,
  type Manifest,
} from './tools.ts';

// Rendered YAML is untyped; these tests walk it as loosely typed data.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };
const base = kustomizeBuild(join(deployDir, 'base'));
const find = (objects: Manifest[], kind: string, name?: string): Manifest & Record<string, any> => {
  const found = objects.find(
    (o) => o.kind === kind && (name === undefined || o.metadata?.name === name),
  );
  assert.ok(found, `${kind}${name ? `/${name}` : ''} is rendered`);
  return found as Manifest & Record<string, any>;
};
const rulesOf = (objects: Manifest[]): Rule[] =>
  objects
    .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
    .flatMap((o) => (o as unknown as { rules: Rule[] }).rules);
const verbsFor = (objects: Manifest[], resource: string): string[] =>
  rulesOf(objects)
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
    const withCancel = kustomizeOverlay({ components: ['cancel'] });
    assert.deepEqual(verbsFor(withCancel, 'pods'), ['delete', 'get', 'list', 'patch', 'watch']);
  });

  it('grants only the verbs tollgate uses: informers list and watch, single reads only of pods', () => {
    assert.deepEqual(verbsFor(base, 'configmaps'), ['list', 'watch']);
    assert.deepEqual(verbsFor(base, 'resourcequotas'), ['list', 'watch']);
    assert.deepEqual(verbsFor(base, 'nodes'), ['list', 'watch']);
    const events = rulesOf(base).filter((r) => r.resources.includes('events'));
    assert.deepEqual(
      events.map((r) => r.apiGroups),
      [['events.k8s.io']],
      'events only through events.k8s.io, the API tollgate writes',
    );
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
    for (const rule of rulesOf(kustomizeOverlay({ components: ['cancel'] }))) {
      assert.ok(
        ![...rule.verbs, ...rule.resources, ...rule.apiGroups].includes('*'),
        JSON.stringify(rule),
      );
      if (rule.resources.includes('pods'))
        assert.ok(!rule.verbs.includes('create') && !rule.verbs.includes('update'));
    }
  });

  it('needs no Prometheus Operator: monitoring objects only come with the monitoring component', () => {
    const kinds = (objects: Manifest[]): string[] => objects.map((o) => o.kind!);
    assert.ok(!kinds(base).includes('ServiceMonitor'));
    assert.ok(!kinds(base).includes('PrometheusRule'));
    assert.ok(!base.some((o) => o.metadata?.name === 'tollgate-dashboard'));
    const monitored = withMonitoring();
    for (const kind of ['ServiceMonitor', 'PrometheusRule'])
      assert.equal(
        find(monitored, kind).metadata?.labels?.release,
        'kube-prometheus-stack',
        `${kind} carries the label kube-prometheus-stack selects by default`,
      );
  });
});

describe('the monitoring component', () => {
  const monitored = withMonitoring();

  it('ships the Grafana dashboard as valid JSON in a ConfigMap the sidecar picks up', () => {
    const dashboard = find(monitored, 'ConfigMap', 'tollgate-dashboard');
    assert.equal(dashboard.metadata?.labels?.grafana_dashboard, '1');
    const json = JSON.parse(dashboard.data['tollgate.json']);
    assert.equal(json.uid, 'tollgate');
    assert.ok(json.panels.length >= 10);
  });

  it('alerts on the five conditions operators must see', () => {
    const rules = find(monitored, 'PrometheusRule').spec.groups.flatMap(
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

describe('admission wherever it lands', () => {
  const bindings = (objects: Manifest[]): Record<string, unknown>[] =>
    objects
      .filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding')
      .map((o) => ({ name: o.metadata?.name, ...(o as any).spec }));

  const overlays: { name: string; fields: Record<string, unknown>; ns: string; prefix: string }[] =
    [
      { name: 'the base as shipped', fields: {}, ns: 'tollgate-system', prefix: '' },
      { name: "an overlay's namespace", fields: { namespace: 'ops' }, ns: 'ops', prefix: '' },
      {
        name: "an overlay's namespace and name prefix",
        fields: { namespace: 'ops', namePrefix: 'blue-' },
        ns: 'ops',
        prefix: 'blue-',
      },
    ];
  for (const { name, fields, ns, prefix } of overlays) {
    it(`${name}: bindings, policies, parameters and service account stay consistent`, () => {
      const objects = kustomizeOverlay({ fields });
      const params = find(objects, 'ConfigMap', `${prefix}tollgate-admission`);
      assert.equal(params.metadata?.namespace, ns);
      // The policies allow the service account named like the parameters without -admission.
      assert.equal(find(objects, 'ServiceAccount', `${prefix}tollgate`).metadata?.namespace, ns);
      const policies = objects
        .filter((o) => o.kind === 'ValidatingAdmissionPolicy')
        .map((o) => o.metadata?.name);
      for (const binding of bindings(objects)) {
        assert.deepEqual(binding.paramRef, {
          name: `${prefix}tollgate-admission`,
          namespace: ns,
          parameterNotFoundAction: 'Deny',
        });
        assert.ok(policies.includes(binding.policyName as string), String(binding.policyName));
      }
    });
  }

  it('the shipped parameters are what `tollgate admission-params` renders from policy-examples', () => {
    const generated = runTollgate(['admission-params', 'policy-examples']);
    assert.equal(generated.code, 0, generated.stderr);
    const shipped = readFileSync(join(deployDir, 'base/admission-params.yaml'), 'utf8');
    assert.deepEqual(
      parseManifests(shipped, 'deploy/base/admission-params.yaml'),
      parseManifests(generated.stdout, 'tollgate admission-params'),
      'regenerate: tollgate admission-params policy-examples > deploy/base/admission-params.yaml',
    );
  });

  it('governs one list of domains, the same in every expression, and the examples lie inside it', () => {
    const text = readFileSync(join(deployDir, 'base/admission.yaml'), 'utf8');
    const lists = [...text.matchAll(/(\[[^\]]*\])\.exists\(d,/g)].map((m) => m[1]);
    assert.equal(lists.length, 4, 'matchConditions and filters of both policies');
    assert.deepEqual(new Set(lists), new Set(["['tollgate.io']"]));
    const params = find(base, 'ConfigMap', 'tollgate-admission').data as Record<string, string>;
    assert.deepEqual(Object.keys(params).sort(), [
      'namespace.api-canary',
      'namespace.api-prod',
      'namespace.etl',
      'namespace.etl-staging',
      'namespace.ml-eval',
      'namespace.ml-train',
    ]);
  });
});
