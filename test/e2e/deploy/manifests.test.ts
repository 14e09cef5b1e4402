/**
 * deploy/ and the Helm chart against the real API server:
 * - every object of the kustomize base with every component, and of the chart with
 *   every option, rendered by the real kustomize and helm (test/tools), passes a
 *   server-side apply with dryRun=All, i.e. full decoding, defaulting, validation and
 *   admission.
 *   The Prometheus Operator CRDs are not available offline, so CRDs with a hand-written
 *   subset of their schemas are installed first: ServiceMonitor and PrometheusRule are
 *   checked only as far as that subset goes (stated, not hidden);
 * - the persistent-cache component, applied for real: the StatefulSet controller gives
 *   each replica its own claim.
 * The admission matrix lives in admission.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  ApiextensionsV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import {
  deployDir,
  describeObject,
  helmTemplate,
  kustomizeBuild,
  kustomizeOverlay,
  type Manifest,
} from './tools.ts';

const fieldManager = 'tollgate-deploy-test';

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

describe('deploy/ on the real API server', () => {
  const renderings: {
    name: string;
    objects: () => Manifest[];
    workload: 'Deployment' | 'StatefulSet';
  }[] = [
    {
      name: 'kustomize build of the base with the monitoring and cancel components',
      objects: () => kustomizeOverlay({ components: ['monitoring', 'cancel'] }),
      workload: 'Deployment',
    },
    {
      name: 'helm template with monitoring and cancel enabled',
      objects: () => helmTemplate({ set: ['monitoring.enabled=true', 'cancel.enabled=true'] }),
      workload: 'Deployment',
    },
    {
      name: 'kustomize build with the persistent-cache and monitoring components',
      objects: () => kustomizeOverlay({ components: ['persistent-cache', 'monitoring'] }),
      workload: 'StatefulSet',
    },
    {
      name: 'helm template with persistence and monitoring enabled',
      objects: () => helmTemplate({ set: ['persistence.enabled=true', 'monitoring.enabled=true'] }),
      workload: 'StatefulSet',
    },
  ];
  for (const { name, objects: render, workload } of renderings) {
    it(`every object of ${name} passes a server-side dry-run apply`, async () => {
      await installMinimalMonitoringCrds();
      const objects = render();
      const kinds = objects.map((o) => o.kind).sort();
      for (const kind of [
        'ServiceAccount',
        'ClusterRole',
        'ClusterRoleBinding',
        'Role',
        'RoleBinding',
        workload,
        'PodDisruptionBudget',
        'Service',
        'ServiceMonitor',
        'PrometheusRule',
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
        'ConfigMap',
      ]) {
        assert.ok(kinds.includes(kind), `${name} renders a ${kind}`);
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
  }

  it('the dry run is a real check: a broken Deployment and an alert without expr are refused', async () => {
    const deployment = kustomizeBuild(`${deployDir}/base`).find((o) => o.kind === 'Deployment')!;
    const broken = structuredClone(deployment) as Manifest & {
      spec: { template: { spec: { containers: { ports: { containerPort: number }[] }[] } } };
    };
    broken.spec.template.spec.containers[0]!.ports[0]!.containerPort = 70000;
    await assert.rejects(
      apply(admin, broken, true),
      (error: { code?: number }) => error.code === 422,
    );
    const rule = kustomizeOverlay({ components: ['monitoring'] }).find(
      (o) => o.kind === 'PrometheusRule',
    )!;
    const noExpr = structuredClone(rule) as Manifest & {
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
    const withCancel = kustomizeOverlay({ components: ['cancel'] });
    for (const object of withCancel.filter((o) => o.metadata?.name === 'tollgate-cancel')) {
      await apply(admin, object, false);
    }
    for (let i = 0; !(await canDelete()); i++) {
      if (i > 50) assert.fail('the cancel component never granted pod deletion');
      await sleep(100);
    }
  });
});

describe('the persistent cache', () => {
  it("gives each replica its own claim: the StatefulSet controller's pods never share a cache", async () => {
    const namespace = runNamespace('tollgate-pvc');
    const core = admin.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    try {
      const statefulSet = kustomizeOverlay({
        components: ['persistent-cache'],
        fields: { namespace },
      }).find((o) => o.kind === 'StatefulSet')!;
      await apply(admin, statefulSet, false);
      const claimOf = (pod: V1Pod): string | undefined =>
        pod.spec?.volumes?.find((v) => v.name === 'tollgate-cache')?.persistentVolumeClaim
          ?.claimName;
      const pods = await eventually('two tollgate pods, each with its cache claim', async () => {
        const items = (await core.listNamespacedPod({ namespace })).items;
        return items.length === 2 && items.every(claimOf) && items;
      });
      assert.deepEqual(pods.map((p) => [p.metadata?.name, claimOf(p)]).sort(), [
        ['tollgate-0', 'tollgate-cache-tollgate-0'],
        ['tollgate-1', 'tollgate-cache-tollgate-1'],
      ]);
      const claims = await eventually('the two claims', async () => {
        const items = (await core.listNamespacedPersistentVolumeClaim({ namespace })).items;
        return items.length === 2 && items;
      });
      for (const claim of claims) {
        assert.deepEqual(claim.spec?.accessModes, ['ReadWriteOnce']);
        assert.equal(claim.spec?.resources?.requests?.storage, '2Gi');
      }
    } finally {
      await removeNamespace(core, namespace);
    }
  });
});
