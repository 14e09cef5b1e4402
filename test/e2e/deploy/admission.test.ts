/**
 * tollgate's admission policies on the real API server, installed the way an operator
 * installs them into a namespace of their choosing: deploy/base rendered by the real
 * kustomize with an overlay's `namespace: tg-elsewhere`, the namespace annotations
 * rendered from the example policy by `tollgate admission-params` and applied
 * server-side.
 *
 * Removal: tollgate's service account of the install namespace may remove governed
 * gates; intruders (an identity with pods/patch, tollgate's service account of ANOTHER
 * namespace) may not, until break-glass grants them; system:masters may.
 * Creation, for each state of a namespace's annotation (as generated, missing,
 * malformed): governed gates only under the prefixes the annotation lists.
 * Other controllers' gates are never touched: created and removed freely throughout.
 *
 * Run: node --test --test-concurrency=1 test/e2e/deploy/admission.test.ts
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { creatable } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import {
  describeObject,
  kustomizeOverlay,
  parseManifests,
  repoRoot,
  runTollgate,
  type Manifest,
} from './tools.ts';
import { gatePrefixesAnnotation } from '../../../src/cli/admission-params.ts';

const installNamespace = 'tg-elsewhere';
const fieldManager = 'tollgate-admission-test';
// Gates and namespaces of policy-examples/: governed out of the box.
const etl = 'etl';
const mlTrain = 'ml-train';
const nobody = 'adm-nobody';
const dataGate = 'data.tollgate.io/nightly-load';
const mlGate = 'ml.tollgate.io/gpu-gang';
const foreignGate = 'other.example.com/hold';

let cp: ControlPlane;
let admin: KubeConfig;
const core = (): CoreV1Api => admin.makeApiClient(CoreV1Api);

function apply(kc: KubeConfig, object: KubernetesObject, manager = fieldManager) {
  return kc
    .makeApiClient(KubernetesObjectApi)
    .patch(object, undefined, undefined, manager, true, PatchStrategy.ServerSideApply);
}

/**
 * Sets (or, with undefined, removes) a namespace's gate-prefixes annotation the way an
 * operator does: a server-side apply by the field manager that owns it.
 */
async function annotate(namespace: string, prefixes: string | undefined): Promise<void> {
  await apply(
    admin,
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: namespace,
        annotations: prefixes === undefined ? {} : { [gatePrefixesAnnotation]: prefixes },
      },
    },
    'tollgate-admission-params',
  );
}

/**
 * Dry-run create of a pod carrying `gate` in `namespace`: 'allowed' or the denial. A
 * policy denies with 403; a binding whose parameters are missing with 422.
 */
async function tryCreate(namespace: string, gate: string, dryRun = true): Promise<string> {
  const body = creatable(
    aPod(`probe-${Math.random().toString(36).slice(2, 8)}`, namespace)
      .gated(gate)
      .obj(),
  );
  try {
    await core().createNamespacedPod({ namespace, body, ...(dryRun ? { dryRun: 'All' } : {}) });
    return 'allowed';
  } catch (error) {
    const e = error as { code?: number; body?: string };
    if (!isAdmissionDenial(e.code, e.body)) throw error;
    return `denied: ${String(e.body)}`;
  }
}

function isAdmissionDenial(code: number | undefined, message: string | undefined): boolean {
  return (
    (code === 403 || code === 422) &&
    /ValidatingAdmissionPolicy 'tollgate-(gate-removal|tenant-gates)'/.test(String(message))
  );
}

/** The API server sees policies and parameters through informers: wait until it does. */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; !(await check()); i++) {
    if (i > 300) throw new Error(`admission never reached: ${what}`);
    await sleep(100);
  }
}

/** A kubeconfig authenticating as a service account, with a token from the TokenRequest API. */
async function serviceAccountKubeConfig(namespace: string, name: string): Promise<KubeConfig> {
  const request = await core().createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
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

/** Removes `gate` from `pod` through tollgate's own write path: 'allowed' or the error. */
async function removeGate(kc: KubeConfig, pod: V1Pod, gate: string): Promise<string> {
  const current = await core().readNamespacedPod({
    namespace: pod.metadata!.namespace!,
    name: pod.metadata!.name!,
  });
  const gates = (current.spec?.schedulingGates ?? []).map((g) => g.name);
  assert.ok(gates.includes(gate), `${pod.metadata!.name} still carries ${gate}`);
  const write = createWriteExecutor(kc, { fieldManager });
  return write(
    {
      key: `${current.metadata!.namespace}/${current.metadata!.name}`,
      target: {
        namespace: current.metadata!.namespace!,
        name: current.metadata!.name!,
        uid: current.metadata!.uid!,
        resourceVersion: current.metadata!.resourceVersion!,
      },
      op: { type: 'removeGate', gate, gateIndex: gates.indexOf(gate) },
      priority: 0,
      tenant: 'ml-training',
      deadline: Date.now() + 30_000,
      decisionId: `admission-${current.metadata!.name}`,
    },
    AbortSignal.timeout(30_000),
  ).then(
    () => 'allowed',
    (error: { statusCode?: number; message?: string }) => {
      if (!isAdmissionDenial(error.statusCode, error.message)) throw error;
      return `denied ${error.statusCode}: ${error.message}`;
    },
  );
}

let rendered: Manifest[];
const identities: Record<string, KubeConfig> = {};

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin');
  rendered = kustomizeOverlay({ fields: { namespace: installNamespace } });
  for (const name of [etl, mlTrain, nobody]) {
    await apply(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  }
  const install = rendered.filter(
    (o) =>
      o.kind === 'Namespace' ||
      o.kind === 'ServiceAccount' ||
      o.kind === 'ClusterRole' ||
      o.kind === 'ClusterRoleBinding' ||
      o.kind?.startsWith('ValidatingAdmissionPolicy'),
  );
  assert.deepEqual(install.map(describeObject).sort(), [
    'ClusterRole/tollgate',
    'ClusterRole/tollgate-break-glass',
    'ClusterRoleBinding/tollgate',
    `Namespace/${installNamespace}`,
    `ServiceAccount/${installNamespace}/tollgate`,
    'ValidatingAdmissionPolicy/tollgate-gate-removal',
    'ValidatingAdmissionPolicy/tollgate-tenant-gates',
    'ValidatingAdmissionPolicyBinding/tollgate-gate-removal',
    'ValidatingAdmissionPolicyBinding/tollgate-tenant-gates',
  ]);
  for (const object of install) await apply(admin, object);

  // The operator's step: render the annotations from the policy, apply them server-side.
  const generated = runTollgate(['admission-params', `${repoRoot}/policy-examples`]);
  assert.equal(generated.code, 0, generated.stderr);
  for (const namespace of parseManifests(generated.stdout, 'tollgate admission-params'))
    await apply(admin, namespace, 'tollgate-admission-params');

  await until('a governed gate in a namespace of no tenant is denied', async () =>
    (await tryCreate(nobody, mlGate)).startsWith('denied'),
  );
  // Every identity has pods/patch in ml-train: denials come from admission, not RBAC.
  await apply(admin, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'pod-editor', namespace: mlTrain },
    rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }],
  } as KubernetesObject);
  await apply(admin, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'everyone-edits-pods', namespace: mlTrain },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-editor' },
    subjects: [
      { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'intruder' },
      { kind: 'ServiceAccount', name: 'tollgate', namespace: 'tollgate-system' },
    ],
  } as KubernetesObject);
  identities.tollgate = await serviceAccountKubeConfig(installNamespace, 'tollgate');
  identities['tollgate of another namespace'] = await serviceAccountKubeConfig(
    'tollgate-system',
    'tollgate',
  );
  identities['a cluster admin (system:masters)'] = admin;
  identities.intruder = cp.kubeConfig('intruder');
});
after(async () => {
  await cp?.stop();
});

let podIndex = 0;
async function gatedPod(...gates: string[]): Promise<V1Pod> {
  return core().createNamespacedPod({
    namespace: mlTrain,
    body: creatable(
      aPod(`removal-${podIndex++}`, mlTrain)
        .gated(...gates)
        .obj(),
    ),
  });
}

async function expectRemoval(who: string, gate: string, allowed: boolean): Promise<void> {
  const pod = await gatedPod(mlGate, foreignGate);
  const outcome = await removeGate(identities[who]!, pod, gate);
  if (allowed) assert.equal(outcome, 'allowed', who);
  else
    assert.match(
      outcome,
      /^denied 403: .*only tollgate may remove the scheduling gates it governs \(ml\.tollgate\.io\/gpu-gang\)/,
      who,
    );
  const after = await core().readNamespacedPod({ namespace: mlTrain, name: pod.metadata!.name! });
  assert.deepEqual(
    (after.spec?.schedulingGates ?? []).map((g) => g.name),
    allowed ? [mlGate, foreignGate].filter((g) => g !== gate) : [mlGate, foreignGate],
    `${who}: the pod's gates`,
  );
}

async function removalAllowed(who: string): Promise<boolean> {
  const pod = await gatedPod(mlGate);
  return (await removeGate(identities[who]!, pod, mlGate)) === 'allowed';
}

describe(`admission installed into ${installNamespace} by an overlay`, () => {
  describe('removing gates', () => {
    const governed: [string, boolean][] = [
      ['tollgate', true],
      ['tollgate of another namespace', false],
      ['intruder', false],
      ['a cluster admin (system:masters)', true],
    ];
    for (const [who, allowed] of governed) {
      it(`${who} removing a governed gate is ${allowed ? 'allowed' : 'denied'}`, async () => {
        await expectRemoval(who, mlGate, allowed);
      });
    }

    it("every identity with pods/patch may remove another controller's gate", async () => {
      for (const who of Object.keys(identities)) await expectRemoval(who, foreignGate, true);
    });

    it('break-glass: bound to tollgate-break-glass in the namespace, the intruder may remove governed gates', async () => {
      await apply(admin, {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'break-glass', namespace: mlTrain },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'tollgate-break-glass',
        },
        subjects: [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'intruder' }],
      } as KubernetesObject);
      // RBAC reaches the authorizer through an informer: wait for the grant, then prove it.
      await until('break-glass granted', () => removalAllowed('intruder'));
      await expectRemoval('intruder', mlGate, true);
      await admin
        .makeApiClient(RbacAuthorizationV1Api)
        .deleteNamespacedRoleBinding({ name: 'break-glass', namespace: mlTrain });
      await until('break-glass revoked', async () => !(await removalAllowed('intruder')));
      await expectRemoval('intruder', mlGate, false);
    });
  });

  const annotationStates: {
    name: string;
    etl: string | undefined;
    mlTrain: string;
    allowed: { etl: boolean; mlTrain: boolean };
  }[] = [
    {
      name: 'as generated from the policy',
      etl: 'data.tollgate.io/',
      mlTrain: 'ml.tollgate.io/',
      allowed: { etl: true, mlTrain: true },
    },
    {
      name: 'missing in one namespace',
      etl: undefined,
      mlTrain: 'ml.tollgate.io/',
      allowed: { etl: false, mlTrain: true },
    },
    {
      name: 'malformed (a prefix without "/"; stray commas and spaces)',
      etl: 'data.tollgate.io',
      mlTrain: ' , ml.tollgate.io/ ,',
      allowed: { etl: false, mlTrain: true },
    },
    {
      name: "naming another tenant's prefix",
      etl: 'ml.tollgate.io/',
      mlTrain: 'ml.tollgate.io/',
      allowed: { etl: false, mlTrain: true },
    },
  ];
  for (const state of annotationStates) {
    describe(`creating pods, the namespace annotation ${state.name}`, () => {
      before(async () => {
        await annotate(etl, state.etl);
        await annotate(mlTrain, state.mlTrain);
        const wanted = state.allowed.etl ? 'allowed' : 'denied';
        await until(`etl ${wanted}`, async () =>
          (await tryCreate(etl, dataGate)).startsWith(wanted),
        );
      });

      it(`a pod in ${etl} with ${dataGate} is ${state.allowed.etl ? 'allowed' : 'denied'}`, async () => {
        const outcome = await tryCreate(etl, dataGate);
        if (state.allowed.etl) assert.equal(outcome, 'allowed');
        else
          assert.match(
            outcome,
            /^denied: .*pods in namespace etl may not carry the scheduling gates data\.tollgate\.io\/nightly-load/,
          );
      });
      it(`a pod in ${mlTrain} with ${mlGate} is ${state.allowed.mlTrain ? 'allowed' : 'denied'}`, async () => {
        assert.equal(
          (await tryCreate(mlTrain, mlGate)).startsWith('allowed'),
          state.allowed.mlTrain,
        );
      });
      it(`a pod with ${dataGate} in a namespace of no tenant is denied`, async () => {
        assert.match(await tryCreate(nobody, dataGate), /^denied: /);
      });
      it("a pod with another controller's gate is allowed in every namespace", async () => {
        for (const namespace of [etl, mlTrain, nobody])
          assert.equal(await tryCreate(namespace, foreignGate, false), 'allowed', namespace);
      });
    });
  }
});
