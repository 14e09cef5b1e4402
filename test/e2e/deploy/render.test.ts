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
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  deployDir,
  kustomizeBuild,
  kustomizeOverlay,
  parseManifests,
  repoRoot,
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
/** The rules granted to tollgate (not the break-glass role, which is bound to nobody). */
const rulesOf = (objects: Manifest[]): Rule[] =>
  objects
    .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
    .filter((o) => o.metadata?.name !== 'tollgate-break-glass')
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

describe('the persistent-cache component', () => {
  const overlays: { name: string; fields: Record<string, unknown>; prefix: string }[] = [
    { name: 'as shipped', fields: {}, prefix: '' },
    {
      name: 'with a namespace and a name prefix',
      fields: { namespace: 'ops', namePrefix: 'blue-' },
      prefix: 'blue-',
    },
  ];
  for (const { name, fields, prefix } of overlays) {
    it(`${name}: runs tollgate as a StatefulSet whose replicas each claim their own 2Gi ReadWriteOnce cache`, () => {
      const objects = kustomizeOverlay({ components: ['persistent-cache'], fields });
      assert.ok(!objects.some((o) => o.kind === 'Deployment'), 'the Deployment is replaced');
      const statefulSet = find(objects, 'StatefulSet', `${prefix}tollgate`);
      assert.equal(statefulSet.spec.replicas, 2);
      assert.equal(statefulSet.spec.podManagementPolicy, 'Parallel');
      assert.deepEqual(
        statefulSet.spec.volumeClaimTemplates.map((t: any) => [
          t.metadata.name,
          t.spec.accessModes,
          t.spec.resources.requests.storage,
        ]),
        [['tollgate-cache', ['ReadWriteOnce'], '2Gi']],
      );
      const spec = statefulSet.spec.template.spec;
      const mount = spec.containers[0].volumeMounts.find(
        (m: { mountPath: string }) => m.mountPath === '/var/cache/tollgate',
      );
      assert.equal(mount.name, 'tollgate-cache', 'the cache is the claim');
      assert.ok(
        !spec.volumes.some((v: { name: string }) => v.name === 'tollgate-cache'),
        'no pod volume shadows the claim',
      );
      assert.equal(spec.serviceAccountName, `${prefix}tollgate`);
      assert.equal(spec.containers[0].envFrom[0].configMapRef.name, `${prefix}tollgate-config`);
    });
  }

  it('keeps the pod template of the base, apart from the cache volume', () => {
    const deployment = find(base, 'Deployment', 'tollgate').spec.template;
    const statefulSet = find(
      kustomizeOverlay({ components: ['persistent-cache'] }),
      'StatefulSet',
      'tollgate',
    ).spec.template;
    const withoutCache = (template: any): unknown => ({
      ...template,
      spec: {
        ...template.spec,
        volumes: template.spec.volumes.filter((v: { name: string }) => v.name !== 'tollgate-cache'),
      },
    });
    assert.deepEqual(withoutCache(statefulSet), withoutCache(deployment));
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
  const overlays: { name: string; fields: Record<string, unknown>; prefix: string }[] = [
    { name: 'the base as shipped', fields: {}, prefix: '' },
    { name: "an overlay's namespace", fields: { namespace: 'ops' }, prefix: '' },
    {
      name: "an overlay's namespace and name prefix",
      fields: { namespace: 'ops', namePrefix: 'blue-' },
      prefix: 'blue-',
    },
  ];
  for (const { name, fields, prefix } of overlays) {
    it(`${name}: bindings name their policies and need no parameter object`, () => {
      const objects = kustomizeOverlay({ fields });
      const policies = objects.filter((o) => o.kind === 'ValidatingAdmissionPolicy');
      assert.deepEqual(policies.map((p) => p.metadata?.name).sort(), [
        `${prefix}tollgate-gate-removal`,
        `${prefix}tollgate-tenant-gates`,
      ]);
      for (const policy of policies) assert.equal((policy as any).spec.paramKind, undefined);
      for (const binding of objects.filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding')) {
        assert.equal((binding as any).spec.paramRef, undefined);
        assert.ok(
          policies.some((p) => p.metadata?.name === (binding as any).spec.policyName),
          `${binding.metadata?.name} binds an existing policy`,
        );
      }
    });
  }

  it("grants the admission policies' permission to tollgate's service account, wherever it lands", () => {
    const objects = kustomizeOverlay({ fields: { namespace: 'ops' } });
    const role = find(objects, 'ClusterRole', 'tollgate');
    assert.ok(
      role.rules.some(
        (r: Rule) =>
          r.apiGroups.includes('tollgate.io') &&
          r.resources.includes('schedulinggates') &&
          r.verbs.includes('remove'),
      ),
    );
    const binding = find(objects, 'ClusterRoleBinding', 'tollgate');
    assert.ok(
      binding.subjects.some(
        (s: { kind: string; name: string; namespace?: string }) =>
          s.kind === 'ServiceAccount' && s.name === 'tollgate' && s.namespace === 'ops',
      ),
    );
  });

  it('governs one list of domains, the same in every expression', () => {
    const text = readFileSync(join(deployDir, 'base/admission.yaml'), 'utf8');
    const lists = [...text.matchAll(/(\[[^\]]*\])\.exists\(d,/g)].map((m) => m[1]);
    assert.equal(lists.length, 4, 'matchConditions and filters of both policies');
    assert.deepEqual(new Set(lists), new Set(["['tollgate.io']"]));
  });

  it('`tollgate admission-params` accepts the example policy: its gates are governed out of the box', () => {
    const generated = runTollgate(['admission-params', 'policy-examples', '-o', 'json']);
    assert.equal(generated.code, 0, generated.stderr);
    const items = (JSON.parse(generated.stdout) as { items: Manifest[] }).items;
    assert.deepEqual(
      Object.fromEntries(
        items.map((n) => [
          n.metadata?.name,
          n.metadata?.annotations?.['admission.tollgate.io/gate-prefixes'],
        ]),
      ),
      {
        'api-canary': 'api.tollgate.io/',
        'api-prod': 'api.tollgate.io/',
        etl: 'data.tollgate.io/',
        'etl-staging': 'data.tollgate.io/',
        'ml-eval': 'ml.tollgate.io/',
        'ml-train': 'ml.tollgate.io/',
      },
    );
  });
});

describe('the GitOps and release examples', () => {
  const example = (file: string): Manifest[] =>
    parseManifests(readFileSync(join(deployDir, 'examples', file), 'utf8'), file);

  it('Argo CD: tollgate syncs first and tenant Pods ignore the fields tollgate owns', () => {
    const [tollgate, tenant] = example('argocd-application.yaml') as (Manifest &
      Record<string, any>)[];
    const wave = (app: Manifest): number =>
      Number(app.metadata?.annotations?.['argocd.argoproj.io/sync-wave'] ?? 0);
    assert.ok(wave(tollgate!) < wave(tenant!), 'tollgate syncs in an earlier wave');
    assert.ok(tenant!.spec.syncPolicy.syncOptions.includes('RespectIgnoreDifferences=true'));
    const ignored = tenant!.spec.ignoreDifferences.find((d: { kind: string }) => d.kind === 'Pod');
    for (const path of ['.spec.schedulingGates', '.spec.containers[].resources', '.spec.resources'])
      assert.ok(ignored.jqPathExpressions.includes(path), path);
    assert.deepEqual(ignored.managedFieldsManagers, ['tollgate']);
  });

  it('Flux: tenant Pods are created once (ssa: IfNotPresent) after tollgate is healthy', () => {
    const kustomizations = example('flux-kustomization.yaml').filter(
      (o) => o.kind === 'Kustomization',
    ) as (Manifest & Record<string, any>)[];
    const tollgate = kustomizations.find((k) => k.metadata?.name === 'tollgate')!;
    assert.ok(
      tollgate.spec.healthChecks.some(
        (h: { kind: string; name: string }) => h.kind === 'StatefulSet' && h.name === 'tollgate',
      ),
    );
    const tenant = kustomizations.find((k) => k.metadata?.name === 'team-a-workloads')!;
    assert.deepEqual(tenant.spec.dependsOn, [{ name: 'tollgate' }]);
    assert.match(tenant.spec.patches[0].patch, /kustomize\.toolkit\.fluxcd\.io\/ssa: IfNotPresent/);
  });

  it('the release workflow publishes the policy schemas under the tag, with the CHANGELOG section as notes', () => {
    const text = readFileSync(join(deployDir, 'examples/release-workflow.yaml'), 'utf8');
    const workflow = parseManifests(text, 'release-workflow.yaml')[0] as Record<string, any>;
    const [check, publish] = (workflow.jobs.schemas.steps as { run?: string }[]).filter(
      (s) => s.run,
    );
    assert.match(publish!.run!, /gh release upload "\$GITHUB_REF_NAME" schemas\/\*\.schema\.json/);
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
    const runCheck = (tag: string) => {
      const temp = mkdtempSync(join(tmpdir(), 'tollgate-release-'));
      const result = spawnSync('bash', ['-euo', 'pipefail', '-c', check!.run!], {
        cwd: repoRoot,
        env: { ...process.env, GITHUB_REF_NAME: tag, RUNNER_TEMP: temp },
        encoding: 'utf8',
      });
      return {
        code: result.status,
        notes: existsSync(join(temp, 'notes.md'))
          ? readFileSync(join(temp, 'notes.md'), 'utf8')
          : '',
      };
    };
    const released = runCheck(`v${version}`);
    assert.equal(released.code, 0, "the tag of package.json's version passes");
    assert.match(released.notes, /^### Added$/m, "the notes are CHANGELOG.md's section");
    assert.ok(!released.notes.includes(`## [${version}]`), 'without its heading');
    assert.notEqual(runCheck('v0.0.0-not-this').code, 0, 'another tag fails the release');
  });

  it('the release workflow builds with the script CI uses, pushes that digest, signs it and attests the SBOM', () => {
    const text = readFileSync(join(deployDir, 'examples/release-workflow.yaml'), 'utf8');
    const workflow = parseManifests(text, 'release-workflow.yaml')[0] as Record<string, any>;
    const steps = (workflow.jobs.image.steps as { run?: string }[])
      .map((s) => s.run ?? '')
      .join('\n');
    assert.match(steps, /scripts\/build-image\.sh --check-reproducible/);
    assert.match(steps, /skopeo copy --preserve-digests "oci:/);
    assert.match(steps, /cosign sign --yes "\$IMAGE@\$digest"/);
    assert.match(steps, /cosign attest --yes --type cyclonedx --predicate "[^"]*sbom\.cdx\.json"/);
  });
});
