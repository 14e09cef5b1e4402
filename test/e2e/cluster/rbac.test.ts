/**
 * Proof that the identities of the local control plane are real RBAC subjects: the
 * harness's `tollgate` identity is the tollgate-system/tollgate ServiceAccount the
 * Deployment runs as, and gets exactly what deploy/base/rbac.yaml grants, and is denied
 * the rest; no User `tollgate` is bound; `intruder` gets nothing.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  AuthenticationV1Api,
  CoordinationV1Api,
  EventsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
} from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { creatable, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';

const namespace = runNamespace('e2e-rbac');
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const leaseSpec = { holderIdentity: 'x', leaseDurationSeconds: 15 };

async function statusOf(call: () => Promise<unknown>): Promise<number> {
  try {
    await call();
    return 200;
  } catch (error) {
    const code = (error as { code?: number }).code;
    if (code === undefined) throw error;
    return code;
  }
}

describe('RBAC of the tollgate identity', () => {
  let cp: ControlPlane;
  let admin: CoreV1Api;

  before(async () => {
    cp = await sharedControlPlane();
    admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    await admin.createNamespace({ body: { metadata: { name: namespace } } });
    await admin.createNamespacedPod({
      namespace,
      body: creatable(aPod('target', namespace).gated('tollgate.io/e2e').obj()),
    });
  });

  after(async () => {
    await removeNamespace(admin, namespace);
  });

  /** Runs the table for one identity's kubeconfig. */
  async function expectTable(
    kc: KubeConfig,
    who: string,
    cases: Array<
      [
        string,
        number,
        (core: CoreV1Api, leases: CoordinationV1Api, events: EventsV1Api) => Promise<unknown>,
      ]
    >,
  ) {
    const core = kc.makeApiClient(CoreV1Api);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const events = kc.makeApiClient(EventsV1Api);
    for (const [sentence, expected, call] of cases) {
      assert.equal(
        await statusOf(() => call(core, leases, events)),
        expected,
        `${who}: ${sentence}`,
      );
    }
  }

  const tollgateCases: Array<
    [
      string,
      number,
      (core: CoreV1Api, leases: CoordinationV1Api, events: EventsV1Api) => Promise<unknown>,
    ]
  > = [
    ['may list pods in every namespace', 200, (core) => core.listPodForAllNamespaces()],
    ['may read nodes', 200, (core) => core.listNode()],
    [
      'may read resource quotas in every namespace (resize stays within them)',
      200,
      (core) => core.listResourceQuotaForAllNamespaces(),
    ],
    [
      'may not change a resource quota',
      403,
      (core) =>
        core.createNamespacedResourceQuota({
          namespace,
          body: { metadata: { name: 'tollgate-made-this' }, spec: { hard: { pods: '1' } } },
        }),
    ],
    [
      'may read configmaps for object conditions',
      200,
      (core) => core.listNamespacedConfigMap({ namespace }),
    ],
    [
      'may create events through events.k8s.io/v1, the API tollgate writes',
      200,
      (_core, _leases, events) =>
        events.createNamespacedEvent({
          namespace,
          body: {
            metadata: { name: `rbac-${Math.random().toString(36).slice(2)}` },
            eventTime: new V1MicroTime(Date.now()),
            reportingController: 'tollgate.io/rbac-test',
            reportingInstance: 'rbac-test',
            action: 'Test',
            regarding: { apiVersion: 'v1', kind: 'Pod', name: 'target', namespace },
            reason: 'Test',
            note: 'rbac test',
            type: 'Normal',
          },
        }),
    ],
    [
      'may not create core v1 events (tollgate does not use that API)',
      403,
      (core) =>
        core.createNamespacedEvent({
          namespace,
          body: {
            metadata: { name: `rbac-${Math.random().toString(36).slice(2)}` },
            involvedObject: { kind: 'Pod', name: 'target', namespace },
            reason: 'Test',
            message: 'rbac test',
            type: 'Normal',
          },
        }),
    ],
    [
      'may hold its lease in tollgate-system',
      200,
      (_core, leases) =>
        leases.createNamespacedLease({
          namespace: 'tollgate-system',
          body: {
            metadata: { name: `tollgate-${Math.random().toString(36).slice(2)}` },
            spec: leaseSpec,
          },
        }),
    ],
    [
      'may not create a lease in another namespace',
      403,
      (_core, leases) =>
        leases.createNamespacedLease({
          namespace: 'kube-system',
          body: { metadata: { name: 'tollgate-stolen' }, spec: leaseSpec },
        }),
    ],
    [
      'may not create a pod',
      403,
      (core) =>
        core.createNamespacedPod({
          namespace,
          body: creatable(aPod('forbidden', namespace).obj()),
        }),
    ],
    ['may not delete a node', 403, (core) => core.deleteNode({ name: 'any-node' })],
    [
      'may not patch a node',
      403,
      (core) =>
        core.patchNode(
          { name: 'any-node', body: [{ op: 'add', path: '/metadata/labels/x', value: 'y' }] },
          jsonPatch,
        ),
    ],
    ['may not read secrets', 403, (core) => core.listNamespacedSecret({ namespace })],
    [
      'may patch pod status (its own tollgate.io/Released condition)',
      200,
      (core) =>
        core.patchNamespacedPodStatus(
          { name: 'target', namespace, body: [{ op: 'add', path: '/status/message', value: 'x' }] },
          jsonPatch,
        ),
    ],
    [
      'may not replace pod status (that is the kubelet)',
      403,
      async (core) =>
        core.replaceNamespacedPodStatus({
          name: 'target',
          namespace,
          body: await core.readNamespacedPod({ name: 'target', namespace }),
        }),
    ],
    [
      'may not create namespaces',
      403,
      (core) => core.createNamespace({ body: { metadata: { name: 'tollgate-made-this' } } }),
    ],
  ];

  test("the harness's tollgate identity is the tollgate-system/tollgate ServiceAccount", async () => {
    const review = await cp
      .kubeConfig('tollgate')
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({ body: {} });
    assert.equal(
      review.status?.userInfo?.username,
      'system:serviceaccount:tollgate-system:tollgate',
    );
  });

  test('the ServiceAccount gets what deploy/base/rbac.yaml grants and is denied the rest', async () => {
    await expectTable(cp.kubeConfig('tollgate'), 'tollgate', tollgateCases);
  });

  test('the ServiceAccount may remove a scheduling gate (pods patch)', async () => {
    const core = cp.kubeConfig('tollgate').makeApiClient(CoreV1Api);
    const patched = await core.patchNamespacedPod(
      { name: 'target', namespace, body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
      jsonPatch,
    );
    assert.equal(patched.spec?.schedulingGates, undefined);
  });

  test('a User named tollgate is bound to nothing (deploy/base binds only the ServiceAccount)', async () => {
    const asUser = setHeaderOptions('Impersonate-User', 'tollgate');
    assert.equal(await statusOf(() => admin.listPodForAllNamespaces({}, asUser)), 403);
    assert.equal(await statusOf(() => admin.listNode({}, asUser)), 403);
  });

  test('the intruder identity, bound to nothing, is denied even reads', async () => {
    await expectTable(cp.kubeConfig('intruder'), 'intruder', [
      ['may not list pods', 403, (core) => core.listPodForAllNamespaces()],
      ['may not read nodes', 403, (core) => core.listNode()],
      [
        'may not remove a scheduling gate',
        403,
        (core) =>
          core.patchNamespacedPod(
            { name: 'target', namespace, body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
            jsonPatch,
          ),
      ],
    ]);
  });
});
