/**
 * The admission and RBAC matrix of docs/security.md, on the real control plane with
 * deploy/base's RBAC and admission policies applied and a tenant namespace annotated the
 * way `tollgate admission-params` renders it. Each actor is a real identity: the cluster
 * admin's own credentials, tollgate's ServiceAccount (the harness identity), and people
 * reached by impersonation (`Impersonate-User` / `Impersonate-Group` on the admin
 * client, so the API server authorizes and admits each request as that person):
 * - a tenant policy author: bound to nothing in the cluster; everything they do goes
 *   through Git and tollgate's compile checks;
 * - a workload owner: may create and edit pods in their tenant's namespace (a Role);
 * - anyone with pod patch: may patch pods in the namespace (a Role with patch only).
 * Every row is a sentence; the table is what the threat model promises.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type ConfigurationOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { creatable, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { kustomizeBuild, deployDir } from '../deploy/tools.ts';
import { gatePrefixesAnnotation } from '../../../src/cli/admission-params.ts';

const tenantNs = runNamespace('actors-team');
const ownGate = 'team.tollgate.io/ready';
const otherTenantGate = 'rival.tollgate.io/ready';
const foreignGate = 'other.example.com/hold';
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

let cp: ControlPlane;
let admin: CoreV1Api;

type Actor = 'cluster admin' | 'policy author' | 'workload owner' | 'pod patcher' | 'tollgate';
const people: Record<'policy author' | 'workload owner' | 'pod patcher', string> = {
  'policy author': 'policy-author',
  'workload owner': 'workload-owner',
  'pod patcher': 'pod-patcher',
};

/** The API as `actor`: tollgate with its own token, people impersonated by the admin. */
function api(actor: Actor): {
  core: CoreV1Api;
  as: (o?: ConfigurationOptions) => ConfigurationOptions;
} {
  if (actor === 'tollgate')
    return { core: cp.kubeConfig('tollgate').makeApiClient(CoreV1Api), as: (o = {}) => o };
  if (actor === 'cluster admin') return { core: admin, as: (o = {}) => o };
  const user = people[actor];
  return {
    core: admin,
    as: (o) =>
      setHeaderOptions(
        'Impersonate-User',
        user,
        setHeaderOptions('Impersonate-Group', 'system:authenticated', o),
      ),
  };
}

type Outcome = 'allowed' | 'denied by RBAC' | 'denied by admission';

/** What the API server answered, and which boundary said no. */
async function outcome(call: () => Promise<unknown>): Promise<Outcome> {
  try {
    await call();
    return 'allowed';
  } catch (error) {
    const { code, body } = error as { code?: number; body?: unknown };
    if (code !== 403 && code !== 422) throw error;
    return /ValidatingAdmissionPolicy/.test(String(body))
      ? 'denied by admission'
      : 'denied by RBAC';
  }
}

async function gatedPod(name: string): Promise<void> {
  await admin.createNamespacedPod({
    namespace: tenantNs,
    body: creatable(aPod(name, tenantNs).gated(ownGate, foreignGate).obj()),
  });
}

type Row = [Actor, string, Outcome, (a: ReturnType<typeof api>) => Promise<unknown>];

/** Removes `gate` from pod `name`, keeping the other gate. */
function withoutGate(name: string, keep: string) {
  return (a: ReturnType<typeof api>) =>
    a.core.patchNamespacedPod(
      {
        name,
        namespace: tenantNs,
        body: [{ op: 'replace', path: '/spec/schedulingGates', value: [{ name: keep }] }],
        dryRun: 'All',
      },
      a.as(jsonPatch),
    );
}

function createWithGate(gate: string) {
  return (a: ReturnType<typeof api>) =>
    a.core.createNamespacedPod(
      {
        namespace: tenantNs,
        body: creatable(
          aPod(`probe-${Math.random().toString(36).slice(2, 8)}`, tenantNs)
            .gated(gate)
            .obj(),
        ),
        dryRun: 'All',
      },
      a.as(),
    );
}

const annotatePod = (a: ReturnType<typeof api>) =>
  a.core.patchNamespacedPod(
    {
      name: 'held',
      namespace: tenantNs,
      body: [{ op: 'add', path: '/metadata/annotations', value: { note: 'x' } }],
      dryRun: 'All',
    },
    a.as(jsonPatch),
  );

const rows: Row[] = [
  [
    'cluster admin',
    'may remove a governed gate (break-glass by hand)',
    'allowed',
    withoutGate('held', foreignGate),
  ],
  ['tollgate', 'may remove a governed gate', 'allowed', withoutGate('held', foreignGate)],
  ['tollgate', 'may not create pods', 'denied by RBAC', createWithGate(ownGate)],
  [
    'tollgate',
    'may not read secrets',
    'denied by RBAC',
    (a) => a.core.listNamespacedSecret({ namespace: tenantNs }, a.as()),
  ],
  [
    'policy author',
    'may not read pods (their power is the policy repository)',
    'denied by RBAC',
    (a) => a.core.listNamespacedPod({ namespace: tenantNs }, a.as()),
  ],
  [
    'policy author',
    'may not remove a governed gate',
    'denied by RBAC',
    withoutGate('held', foreignGate),
  ],
  [
    'workload owner',
    "may create a pod with their tenant's gate",
    'allowed',
    createWithGate(ownGate),
  ],
  [
    'workload owner',
    "may create a pod with another controller's gate",
    'allowed',
    createWithGate(foreignGate),
  ],
  [
    'workload owner',
    "may not create a pod with another tenant's governed gate",
    'denied by admission',
    createWithGate(otherTenantGate),
  ],
  [
    'workload owner',
    'may not remove a governed gate',
    'denied by admission',
    withoutGate('held', foreignGate),
  ],
  [
    'workload owner',
    "may remove another controller's gate",
    'allowed',
    withoutGate('held', ownGate),
  ],
  ['pod patcher', 'may annotate a pod (no annotation widens a decision)', 'allowed', annotatePod],
  [
    'pod patcher',
    'may not remove a governed gate',
    'denied by admission',
    withoutGate('held', foreignGate),
  ],
  ['pod patcher', 'may not create pods', 'denied by RBAC', createWithGate(ownGate)],
];

function apply(object: KubernetesObject): Promise<unknown> {
  return cp
    .kubeConfig('admin')
    .makeApiClient(KubernetesObjectApi)
    .patch(
      object,
      undefined,
      undefined,
      'tollgate-actors-test',
      true,
      PatchStrategy.ServerSideApply,
    );
}

function role(name: string, verbs: string[]): KubernetesObject[] {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace: tenantNs },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs }],
    } as KubernetesObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace: tenantNs },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name }],
    } as KubernetesObject,
  ];
}

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  for (const object of kustomizeBuild(`${deployDir}/base`).filter((o) =>
    /^ValidatingAdmissionPolicy/.test(o.kind ?? ''),
  ))
    await apply(object);
  await admin.createNamespace({
    body: {
      metadata: { name: tenantNs, annotations: { [gatePrefixesAnnotation]: 'team.tollgate.io/' } },
    },
  });
  for (const object of [
    ...role('workload-owner', ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']),
    ...role('pod-patcher', ['get', 'patch']),
  ])
    await apply(object);
  await gatedPod('held');
  // The API server sees each policy and binding through informers, each on its own: wait
  // until both policies bite (the removal policy for a pod patcher, the tenant-gates
  // policy for the cluster admin, whom it binds too) before any row is asked.
  await untilDenied('tollgate-gate-removal', withoutGate('held', foreignGate), 'pod patcher');
  await untilDenied('tollgate-tenant-gates', createWithGate(otherTenantGate), 'cluster admin');
});

async function untilDenied(
  policy: string,
  call: (a: ReturnType<typeof api>) => Promise<unknown>,
  actor: Actor,
): Promise<void> {
  for (let i = 0; (await outcome(() => call(api(actor)))) !== 'denied by admission'; i++) {
    if (i > 600) throw new Error(`the admission policy ${policy} never took effect`);
    await sleep(100);
  }
}

after(async () => {
  await removeNamespace(admin, tenantNs);
});

test('each actor of docs/security.md is allowed and denied what the threat model says', async () => {
  const wrong: string[] = [];
  for (const [actor, sentence, expected, call] of rows) {
    const got = await outcome(() => call(api(actor)));
    if (got !== expected) wrong.push(`${actor} ${sentence}: ${got}, expected ${expected}`);
  }
  assert.deepEqual(wrong, []);
});
