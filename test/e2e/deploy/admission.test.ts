/**
 * tollgate's admission policies on the real API server, installed the way an operator
 * installs them into a namespace of their choosing: deploy/base rendered by the real
 * kustomize with an overlay's `namespace: tg-elsewhere`, the parameters rendered from the
 * example policy by `tollgate admission-params --namespace tg-elsewhere`.
 *
 * For each state of the parameters (as generated, one tenant key missing, malformed
 * values, no data at all, the ConfigMap missing) the matrix holds:
 * - tollgate's service account of the install namespace may remove governed gates
 *   (unless the ConfigMap is missing: then nobody may, fail closed);
 * - intruders (a cluster admin, an identity with pods/patch, tollgate's service account
 *   of ANOTHER namespace) may not;
 * - a pod may be created with a governed gate only in a namespace whose tenant owns the
 *   prefix;
 * - other controllers' gates are never touched: created and removed freely in every
 *   state, a missing parameter included.
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

const installNamespace = 'tg-elsewhere';
const fieldManager = 'tollgate-admission-test';
// Gates and namespaces of policy-examples/: governed out of the box.
const etl = 'etl';
const mlTrain = 'ml-train';
const nobody = 'adm-nobody';
const probeNamespace = 'adm-probe';
const dataGate = 'data.tollgate.io/nightly-load';
const mlGate = 'ml.tollgate.io/gpu-gang';
const foreignGate = 'other.example.com/hold';

let cp: ControlPlane;
let admin: KubeConfig;
let params: Manifest;
const core = (): CoreV1Api => admin.makeApiClient(CoreV1Api);

function apply(kc: KubeConfig, object: KubernetesObject): Promise<KubernetesObject> {
  return kc
    .makeApiClient(KubernetesObjectApi)
    .patch(object, undefined, undefined, fieldManager, true, PatchStrategy.ServerSideApply);
}

async function replaceParams(data: Record<string, string> | undefined): Promise<void> {
  const objects = admin.makeApiClient(KubernetesObjectApi);
  await objects.delete(params).catch((error: { code?: number }) => {
    if (error.code !== 404) throw error;
  });
  if (data === undefined) return;
  const { data: _generated, ...withoutData } = params;
  await objects.create({ ...withoutData, ...(Object.keys(data).length > 0 ? { data } : {}) });
}

/** Dry-run create of a pod carrying `gate` in `namespace`: 'allowed' or the 403 message. */
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
    if (e.code !== 403) throw error;
    return `denied: ${String(e.body)}`;
  }
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
    (error: { statusCode?: number; message?: string }) =>
      `denied ${error.statusCode}: ${error.message}`,
  );
}

let rendered: Manifest[];
const identities: Record<string, KubeConfig> = {};

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin');
  rendered = kustomizeOverlay({ fields: { namespace: installNamespace } });
  const generated = runTollgate([
    'admission-params',
    `${repoRoot}/policy-examples`,
    '--namespace',
    installNamespace,
  ]);
  assert.equal(generated.code, 0, generated.stderr);
  params = parseManifests(generated.stdout, 'tollgate admission-params')[0]!;
  for (const name of [etl, mlTrain, nobody, probeNamespace]) {
    await apply(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  }
  const admission = rendered.filter(
    (o) =>
      o.kind === 'Namespace' ||
      o.kind === 'ServiceAccount' ||
      o.kind?.startsWith('ValidatingAdmissionPolicy'),
  );
  assert.deepEqual(admission.map(describeObject).sort(), [
    `Namespace/${installNamespace}`,
    `ServiceAccount/${installNamespace}/tollgate`,
    'ValidatingAdmissionPolicy/tollgate-gate-removal',
    'ValidatingAdmissionPolicy/tollgate-tenant-gates',
    'ValidatingAdmissionPolicyBinding/tollgate-gate-removal',
    'ValidatingAdmissionPolicyBinding/tollgate-tenant-gates',
  ]);
  for (const object of admission) await apply(admin, object);
  await replaceParams(params.data as Record<string, string>);
  await until('a governed gate in a namespace of no tenant is denied', async () =>
    (await tryCreate(nobody, mlGate)).startsWith('denied'),
  );
  // Every identity has pods/patch in the tenants' namespaces: denials come from
  // admission, not from RBAC.
  for (const namespace of [etl, mlTrain]) {
    await apply(admin, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'pod-editor', namespace },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }],
    } as KubernetesObject);
    await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'intruder-edits-pods' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-editor' },
        subjects: [
          { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'intruder' },
          // Both service accounts get pods/patch here: tollgate's ClusterRole is not
          // what this file tests, admission is.
          { kind: 'ServiceAccount', name: 'tollgate', namespace: installNamespace },
          { kind: 'ServiceAccount', name: 'tollgate', namespace: 'tollgate-system' },
        ],
      },
    });
  }
  identities.tollgate = await serviceAccountKubeConfig(installNamespace, 'tollgate');
  identities['tollgate of another namespace'] = await serviceAccountKubeConfig(
    'tollgate-system',
    'tollgate',
  );
  identities.admin = admin;
  identities.intruder = cp.kubeConfig('intruder');
});
after(async () => {
  await cp?.stop();
});

interface ParamsState {
  readonly name: string;
  /** ConfigMap data, or undefined for no ConfigMap at all. */
  readonly data: (generated: Record<string, string>) => Record<string, string> | undefined;
  /** Resolves once the API server evaluates with this state. */
  readonly settled: () => Promise<boolean>;
  readonly tollgateMayRemove: boolean;
  readonly creations: Record<string, boolean>;
}

const marker = (state: string): Record<string, string> => ({
  [`namespace.${probeNamespace}`]: `${state}.tollgate.io/`,
});
const markerSeen = (state: string) => async (): Promise<boolean> =>
  (await tryCreate(probeNamespace, `${state}.tollgate.io/x`)) === 'allowed';

const states: ParamsState[] = [
  {
    name: 'as generated from the policy',
    data: (generated) => ({ ...generated, ...marker('generated') }),
    settled: markerSeen('generated'),
    tollgateMayRemove: true,
    creations: { [`${etl} ${dataGate}`]: true, [`${mlTrain} ${mlGate}`]: true },
  },
  {
    name: "with one tenant namespace's key missing",
    data: ({ [`namespace.${etl}`]: _missing, ...rest }) => ({ ...rest, ...marker('nokey') }),
    settled: markerSeen('nokey'),
    tollgateMayRemove: true,
    creations: { [`${etl} ${dataGate}`]: false, [`${mlTrain} ${mlGate}`]: true },
  },
  {
    name: 'with malformed values (a prefix without "/", an empty controllers list)',
    data: (generated) => ({
      ...generated,
      [`namespace.${etl}`]: 'data.tollgate.io',
      [`namespace.${mlTrain}`]: ' , ml.tollgate.io/ ,',
      controllers: ', ,',
      ...marker('malformed'),
    }),
    settled: markerSeen('malformed'),
    tollgateMayRemove: true,
    creations: { [`${etl} ${dataGate}`]: false, [`${mlTrain} ${mlGate}`]: true },
  },
  {
    name: 'with no data at all',
    data: () => ({}),
    settled: async () => !(await markerSeen('malformed')()),
    tollgateMayRemove: true,
    creations: { [`${etl} ${dataGate}`]: false, [`${mlTrain} ${mlGate}`]: false },
  },
  {
    name: 'with the ConfigMap missing',
    data: () => undefined,
    settled: async () => (await tryCreate(probeNamespace, 'generated.tollgate.io/x')) !== 'allowed',
    tollgateMayRemove: false,
    creations: { [`${etl} ${dataGate}`]: false, [`${mlTrain} ${mlGate}`]: false },
  },
];

describe(`admission installed into ${installNamespace} by an overlay`, () => {
  it('the bindings read the parameters from the install namespace', () => {
    for (const binding of rendered.filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding')) {
      assert.deepEqual(
        (binding as { spec: { paramRef: unknown } }).spec.paramRef,
        {
          name: 'tollgate-admission',
          namespace: installNamespace,
          parameterNotFoundAction: 'Deny',
        },
        describeObject(binding),
      );
    }
  });

  // Pods for every removal, created while creating governed gates is allowed.
  const removals = new Map<string, V1Pod>();
  const removalKey = (state: string, who: string, gate: string): string =>
    `${state} / ${who} / ${gate}`;

  it('creates the gated pods the removal matrix works on', async () => {
    await until('the generated parameters are in force', async () => {
      await replaceParams({ ...(params.data as Record<string, string>), ...marker('generated') });
      return markerSeen('generated')();
    });
    let index = 0;
    for (const state of states) {
      for (const who of Object.keys(identities)) {
        for (const gate of [mlGate, foreignGate]) {
          const pod = await core().createNamespacedPod({
            namespace: mlTrain,
            body: creatable(aPod(`removal-${index++}`, mlTrain).gated(mlGate, foreignGate).obj()),
          });
          removals.set(removalKey(state.name, who, gate), pod);
        }
      }
    }
  });

  for (const state of states) {
    describe(`parameters ${state.name}`, () => {
      before(async () => {
        await replaceParams(state.data(params.data as Record<string, string>));
        await until(state.name, state.settled);
      });

      for (const [what, allowed] of Object.entries(state.creations)) {
        const [namespace, gate] = what.split(' ') as [string, string];
        it(`creating a pod in ${namespace} with ${gate} is ${allowed ? 'allowed' : 'denied'}`, async () => {
          const outcome = await tryCreate(namespace, gate);
          if (allowed) assert.equal(outcome, 'allowed');
          else assert.match(outcome, /^denied: /);
        });
      }
      it(`creating a pod with ${dataGate} in a namespace of no tenant is denied`, async () => {
        assert.match(await tryCreate(nobody, dataGate), /^denied: /);
      });
      it("creating a pod with another controller's gate is allowed anywhere", async () => {
        for (const namespace of [etl, nobody, probeNamespace])
          assert.equal(await tryCreate(namespace, foreignGate, false), 'allowed', namespace);
      });

      for (const who of ['tollgate', 'tollgate of another namespace', 'admin', 'intruder']) {
        const allowed = who === 'tollgate' && state.tollgateMayRemove;
        it(`${who} removing a governed gate is ${allowed ? 'allowed' : 'denied'}`, async () => {
          const pod = removals.get(removalKey(state.name, who, mlGate))!;
          const outcome = await removeGate(identities[who]!, pod, mlGate);
          if (allowed) assert.equal(outcome, 'allowed');
          else assert.match(outcome, /^denied 403: /);
          const after = await core().readNamespacedPod({
            namespace: mlTrain,
            name: pod.metadata!.name!,
          });
          assert.deepEqual(
            (after.spec?.schedulingGates ?? []).map((g) => g.name),
            allowed ? [foreignGate] : [mlGate, foreignGate],
          );
        });
      }
      it("every identity with pods/patch may remove another controller's gate", async () => {
        for (const who of ['admin', 'intruder', 'tollgate']) {
          const pod = removals.get(removalKey(state.name, who, foreignGate))!;
          assert.equal(await removeGate(identities[who]!, pod, foreignGate), 'allowed', who);
        }
      });
    });
  }
});
