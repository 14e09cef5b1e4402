/**
 * deploy/ against the real API server:
 * - every object of the kustomize base (plus the cancel component) passes a server-side
 *   apply with dryRun=All, i.e. full decoding, defaulting, validation and admission.
 *   The Prometheus Operator CRDs are not available offline, so CRDs with a hand-written
 *   subset of their schemas are installed first: ServiceMonitor and PrometheusRule are
 *   checked only as far as that subset goes (stated, not hidden);
 * - the ValidatingAdmissionPolicies, applied for real with test parameters, decide the
 *   admission matrix: who may remove governed gates, which gates a tenant's pods may carry.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiextensionsV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { deployDir, renderKustomization, type RenderedObject } from '../../support/kustomize.ts';
import { aPod } from '../../builders/pod.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';
import { admissionParams, defaultControllers } from '../../../src/cli/admission-params.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';

const fieldManager = 'tollgate-deploy-test';
const teamA = 'adm-team-a';
const teamB = 'adm-team-b';
const nobody = 'adm-nobody';
const gateA = 'team-a.tollgate.io/ready';
const gateB = 'team-b.tollgate.io/ready';
const foreignGate = 'other.example.com/hold';

let cp: ControlPlane;
let admin: KubeConfig;

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin');
});
after(async () => {
  await cp?.stop();
});

function apply(
  kc: KubeConfig,
  object: KubernetesObject,
  dryRun: boolean,
): Promise<KubernetesObject> {
  return kc
    .makeApiClient(KubernetesObjectApi)
    .patch(
      object,
      undefined,
      dryRun ? 'All' : undefined,
      fieldManager,
      true,
      PatchStrategy.ServerSideApply,
    );
}

/**
 * A hand-written SUBSET of the Prometheus Operator schemas (the fields deploy/ uses and
 * their required-ness and types, from the upstream CRDs); unknown fields are kept, so
 * a typo in a field name outside this subset would pass. Good enough to catch a missing
 * `expr`, a rule group without `name`, or an endpoint that is not a list.
 */
const monitoringSchemas = {
  ServiceMonitor: {
    type: 'object',
    required: ['selector', 'endpoints'],
    'x-kubernetes-preserve-unknown-fields': true,
    properties: {
      selector: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      endpoints: {
        type: 'array',
        items: {
          type: 'object',
          'x-kubernetes-preserve-unknown-fields': true,
          properties: {
            port: { type: 'string' },
            path: { type: 'string' },
            interval: {
              type: 'string',
              pattern:
                '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$',
            },
          },
        },
      },
    },
  },
  PrometheusRule: {
    type: 'object',
    'x-kubernetes-preserve-unknown-fields': true,
    properties: {
      groups: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name'],
          'x-kubernetes-preserve-unknown-fields': true,
          properties: {
            name: { type: 'string', minLength: 1 },
            rules: {
              type: 'array',
              items: {
                type: 'object',
                required: ['expr'],
                'x-kubernetes-preserve-unknown-fields': true,
                properties: {
                  alert: { type: 'string' },
                  record: { type: 'string' },
                  expr: { 'x-kubernetes-int-or-string': true },
                  for: { type: 'string' },
                  labels: { type: 'object', additionalProperties: { type: 'string' } },
                  annotations: { type: 'object', additionalProperties: { type: 'string' } },
                },
              },
            },
          },
        },
      },
    },
  },
};

async function installMinimalMonitoringCrds(): Promise<void> {
  const crds = admin.makeApiClient(ApiextensionsV1Api);
  for (const [plural, kind] of [
    ['servicemonitors', 'ServiceMonitor'],
    ['prometheusrules', 'PrometheusRule'],
  ] as const) {
    await apply(
      admin,
      {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: `${plural}.monitoring.coreos.com` },
        spec: {
          group: 'monitoring.coreos.com',
          scope: 'Namespaced',
          names: { plural, kind, singular: kind.toLowerCase(), listKind: `${kind}List` },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  required: ['spec'],
                  properties: {
                    apiVersion: { type: 'string' },
                    kind: { type: 'string' },
                    metadata: { type: 'object' },
                    spec: monitoringSchemas[kind],
                  },
                },
              },
            },
          ],
        },
      } as KubernetesObject,
      false,
    );
    for (let i = 0; ; i++) {
      const crd = await crds.readCustomResourceDefinition({
        name: `${plural}.monitoring.coreos.com`,
      });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'))
        break;
      if (i > 100) throw new Error(`CRD ${plural} never became Established`);
      await sleep(100);
    }
  }
}

function describeObject(object: KubernetesObject): string {
  return `${object.kind}/${object.metadata?.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata?.name}`;
}

describe('deploy/ on the real API server', () => {
  it('every object of the base and the cancel component passes a server-side dry-run apply', async () => {
    await installMinimalMonitoringCrds();
    const objects = renderKustomization(`${deployDir}/base`, [`${deployDir}/components/cancel`]);
    const kinds = objects.map((o) => o.kind).sort();
    for (const kind of [
      'Namespace',
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'Deployment',
      'PodDisruptionBudget',
      'Service',
      'ServiceMonitor',
      'PrometheusRule',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
      'ConfigMap',
    ]) {
      assert.ok(kinds.includes(kind), `deploy/base renders a ${kind}`);
    }
    const failures: string[] = [];
    for (const object of objects) {
      try {
        await apply(admin, object, true);
      } catch (error) {
        failures.push(
          `${describeObject(object)}: ${(error as { body?: string }).body ?? (error as Error).message}`,
        );
      }
    }
    console.log(`dry-run applied ${objects.length} objects (${kinds.join(', ')})`);
    assert.deepEqual(failures, []);
  });

  it('the dry run is a real check: a broken Deployment and an alert without expr are refused', async () => {
    const deployment = renderKustomization(`${deployDir}/base`).find(
      (o) => o.kind === 'Deployment',
    )!;
    const broken = structuredClone(deployment) as RenderedObject & {
      spec: { template: { spec: { containers: { ports: { containerPort: number }[] }[] } } };
    };
    broken.spec.template.spec.containers[0]!.ports[0]!.containerPort = 70000;
    await assert.rejects(
      apply(admin, broken, true),
      (error: { code?: number }) => error.code === 422,
    );
    const rule = renderKustomization(`${deployDir}/base`).find((o) => o.kind === 'PrometheusRule')!;
    const noExpr = structuredClone(rule) as RenderedObject & {
      spec: { groups: { rules: { expr?: string }[] }[] };
    };
    delete noExpr.spec.groups[0]!.rules[0]!.expr;
    await assert.rejects(
      apply(admin, noExpr, true),
      (error: { code?: number }) => error.code === 422,
    );
  });
});

describe('the cancel component', () => {
  it('grants pod deletion to tollgate only once applied', async () => {
    const canDelete = async (): Promise<boolean> => {
      const review = await cp
        .kubeConfig('tollgate')
        .makeApiClient(AuthorizationV1Api)
        .createSelfSubjectAccessReview({
          body: {
            spec: {
              resourceAttributes: { verb: 'delete', resource: 'pods', namespace: 'anywhere' },
            },
          },
        });
      return review.status?.allowed === true;
    };
    assert.equal(await canDelete(), false, 'deploy/base alone grants no pod deletion');
    const withCancel = renderKustomization(`${deployDir}/base`, [`${deployDir}/components/cancel`]);
    for (const object of withCancel.filter((o) => o.metadata?.name === 'tollgate-cancel')) {
      await apply(admin, object, false);
    }
    for (let i = 0; !(await canDelete()); i++) {
      if (i > 50) assert.fail('the cancel component never granted pod deletion');
      await sleep(100);
    }
  });
});

describe('the admission matrix (ValidatingAdmissionPolicy)', () => {
  const core = () => admin.makeApiClient(CoreV1Api);

  before(async () => {
    for (const name of [teamA, teamB, nobody]) {
      await apply(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }, false);
    }
    const admission = renderKustomization(`${deployDir}/base`).filter(
      (o) =>
        o.kind?.startsWith('ValidatingAdmissionPolicy') ||
        o.metadata?.name === 'tollgate-admission',
    );
    assert.equal(admission.length, 5, 'params ConfigMap + 2 policies + 2 bindings');
    for (const object of admission) {
      if (object.kind === 'ConfigMap') {
        // Rendered from a policy by the generator operators use; the shipped controllers
        // list names only the service account, and the harness's `tollgate` user is the
        // same controller under test, so it is added here.
        const policy = aPolicy()
          .tenant(
            aTenant('team-a').namespaces(teamA).prefixes('team-a.tollgate.io/'),
            aTenant('team-b').namespaces(teamB).prefixes('team-b.tollgate.io/'),
          )
          .obj();
        (object as { data: Record<string, string> }).data = admissionParams(policy, [
          ...defaultControllers,
          'tollgate',
        ]).data;
      }
      await apply(admin, object, false);
    }
    // Policies take effect once the API server's policy informer has them: probe with a
    // dry-run create that must be denied.
    const probe = forCreate(aPod('probe', teamA).gated(gateB).obj());
    for (let i = 0; ; i++) {
      try {
        await core().createNamespacedPod({ namespace: teamA, body: probe, dryRun: 'All' });
      } catch (error) {
        if ((error as { code?: number }).code === 403) break;
        throw error;
      }
      if (i > 200) throw new Error('the tenant-gates policy never took effect');
      await sleep(100);
    }
  });

  const creations: { name: string; namespace: string; gates: string[]; denied: RegExp | false }[] =
    [
      {
        name: "a team-a pod with team-a's gate is admitted",
        namespace: teamA,
        gates: [gateA],
        denied: false,
      },
      {
        name: "a team-a pod with team-b's gate is denied",
        namespace: teamA,
        gates: [gateA, gateB],
        denied:
          /pods in namespace adm-team-a may not carry the scheduling gates team-b\.tollgate\.io\/ready/,
      },
      {
        name: 'a pod in a namespace of no tenant with a governed gate is denied',
        namespace: nobody,
        gates: [gateA],
        denied: /may not carry the scheduling gates team-a\.tollgate\.io\/ready/,
      },
      {
        name: "a team-a pod with another controller's gate is admitted (not tollgate's to judge)",
        namespace: teamA,
        gates: [foreignGate],
        denied: false,
      },
    ];
  for (const [index, { name, namespace, gates, denied }] of creations.entries()) {
    it(name, async () => {
      const body = forCreate(
        aPod(`create-${index}`, namespace)
          .gated(...gates)
          .obj(),
      );
      const attempt = core().createNamespacedPod({ namespace, body });
      if (denied === false) {
        await attempt;
      } else {
        await assert.rejects(attempt, (error: { code?: number; body?: string }) => {
          assert.equal(error.code, 403);
          assert.match(String(error.body), denied);
          return true;
        });
      }
    });
  }

  it('removing a governed gate: foreign identities are denied, tollgate (user and service account) is allowed', async () => {
    // A foreign identity that does have RBAC to patch pods in the namespace, so the
    // denial below comes from admission, not from RBAC.
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await apply(
      admin,
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name: 'pod-editor', namespace: teamA },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }],
      } as KubernetesObject,
      false,
    );
    await rbac.createNamespacedRoleBinding({
      namespace: teamA,
      body: {
        metadata: { name: 'intruder-edits-pods' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-editor' },
        subjects: [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'intruder' }],
      },
    });
    const serviceAccount = await serviceAccountKubeConfig('tollgate-system', 'tollgate');

    const identities: { who: string; kc: KubeConfig; gate: string; allowed: boolean }[] = [
      {
        who: 'a cluster admin removing a governed gate is denied',
        kc: admin,
        gate: gateA,
        allowed: false,
      },
      {
        who: 'an identity with pods/patch removing a governed gate is denied',
        kc: cp.kubeConfig('intruder'),
        gate: gateA,
        allowed: false,
      },
      {
        who: "a cluster admin removing another controller's gate is allowed",
        kc: admin,
        gate: foreignGate,
        allowed: true,
      },
      {
        who: 'the tollgate user (harness identity) removing a governed gate is allowed',
        kc: cp.kubeConfig('tollgate'),
        gate: gateA,
        allowed: true,
      },
      {
        who: "tollgate's service account removing a governed gate is allowed",
        kc: serviceAccount,
        gate: gateA,
        allowed: true,
      },
    ];
    const results: string[] = [];
    for (const [index, { who, kc, gate, allowed }] of identities.entries()) {
      const created = await core().createNamespacedPod({
        namespace: teamA,
        body: forCreate(aPod(`remove-${index}`, teamA).gated(gateA, foreignGate).obj()),
      });
      const write = createWriteExecutor(kc, { fieldManager });
      const gates = created.spec!.schedulingGates!.map((g) => g.name);
      const outcome = await write(
        {
          key: `${teamA}/${created.metadata!.name}`,
          target: {
            namespace: teamA,
            name: created.metadata!.name!,
            uid: created.metadata!.uid!,
            resourceVersion: created.metadata!.resourceVersion!,
          },
          op: { type: 'removeGate', gate, gateIndex: gates.indexOf(gate) },
          priority: 0,
          tenant: 'team-a',
          deadline: Date.now() + 30_000,
          decisionId: `admission-${index}`,
        },
        AbortSignal.timeout(30_000),
      ).then(
        () => 'allowed',
        (error: { statusCode?: number; message?: string }) =>
          `denied ${error.statusCode}: ${error.message}`,
      );
      const after: V1Pod = await core().readNamespacedPod({
        namespace: teamA,
        name: created.metadata!.name!,
      });
      const remaining = (after.spec?.schedulingGates ?? []).map((g) => g.name);
      results.push(`${who}: ${outcome}`);
      if (allowed) {
        assert.equal(outcome, 'allowed', who);
        assert.ok(!remaining.includes(gate), `${who}: the gate is gone`);
      } else {
        assert.match(
          outcome,
          /^denied 403: .*only tollgate may remove the scheduling gates it governs \(team-a\.tollgate\.io\/ready\)/,
          who,
        );
        assert.deepEqual(remaining, [gateA, foreignGate], `${who}: the pod is unchanged`);
      }
    }
    console.log(results.join('\n'));
  });
});

/** A pod body the API accepts on create: no server-owned fields. */
function forCreate(pod: V1Pod): V1Pod {
  const {
    uid: _uid,
    resourceVersion: _rv,
    creationTimestamp: _ct,
    ...metadata
  } = pod.metadata ?? {};
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: pod.spec };
}

/** A kubeconfig authenticating as a service account, with a token from the TokenRequest API. */
async function serviceAccountKubeConfig(namespace: string, name: string): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const request = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  const token = request.status?.token;
  assert.ok(token, 'TokenRequest returned a token');
  const cluster = admin.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return kc;
}
