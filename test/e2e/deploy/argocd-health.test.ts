/**
 * The Argo CD health checks of deploy/examples/argocd-health.yaml, run on the interpreter
 * Argo CD embeds (gopher-lua, built from the Go module proxy by test/tools/build.sh, with
 * the libraries Argo CD opens): on sample objects, and on tollgate's own
 * ValidatingAdmissionPolicies as the real API server reports them after type checking
 * (created without bindings, so they admit and deny nothing), beside one whose expression
 * names a field pods do not have. Every kind deploy/ renders (every component) and
 * `admission-params --opt-in` renders is either checked here or named by the example as
 * one Argo CD assesses itself or one without status: a new kind fails this test until the
 * example says which.
 *
 * Run: node --test --test-concurrency=1 test/e2e/deploy/argocd-health.test.ts
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually } from '../../support/eventually.ts';
import {
  deployDir,
  kustomizeOverlay,
  parseManifests,
  repoRoot,
  runTollgate,
  toolPath,
  type Manifest,
} from './tools.ts';

const example = join(deployDir, 'examples/argocd-health.yaml');
const prefix = 'resource.customizations.health.';
const scripts = (parse(readFileSync(example, 'utf8')) as { data: Record<string, string> }).data;
const vapKey = `${prefix}admissionregistration.k8s.io_ValidatingAdmissionPolicy`;

/** The kinds the example names as assessed by Argo CD itself, and those without status. */
const assessedByArgoCd = [
  'Deployment',
  'StatefulSet',
  'Service',
  'PersistentVolumeClaim',
  'PodDisruptionBudget',
];
const withoutStatus = [
  'Namespace',
  'ServiceAccount',
  'ConfigMap',
  'Secret',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'ValidatingAdmissionPolicyBinding',
  'ServiceMonitor',
  'PrometheusRule',
  'MutatingAdmissionPolicy',
  'MutatingAdmissionPolicyBinding',
];

interface Health {
  status: string;
  message?: string;
}

/** The health Argo CD would show for `object` under `key`'s script. */
function health(key: string, object: object): Health {
  const script = join(mkdtempSync(join(tmpdir(), 'tollgate-argocd-lua-')), 'health.lua');
  writeFileSync(script, scripts[key] ?? assert.fail(`${key} is not in ${example}`));
  const out = execFileSync(toolPath('argocd-lua'), [script], {
    input: JSON.stringify(object),
    encoding: 'utf8',
  });
  return JSON.parse(out) as Health;
}

/** A policy's generation and status as the API server writes them. */
const policy = (generation: number, status?: object) => ({
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicy',
  metadata: { name: 'tollgate-gate-removal', generation },
  ...(status ? { status } : {}),
});

describe('Argo CD health of tollgate’s ValidatingAdmissionPolicies, on sample objects', () => {
  const table: { name: string; object: object; status: string; message: RegExp }[] = [
    {
      name: 'never type-checked: Progressing',
      object: policy(1),
      status: 'Progressing',
      message: /type-check generation 1/,
    },
    {
      name: 'an older generation type-checked: Progressing',
      object: policy(3, { observedGeneration: 2, typeChecking: {} }),
      status: 'Progressing',
      message: /type-check generation 3/,
    },
    {
      name: 'the current generation type-checked without a warning: Healthy',
      object: policy(3, { observedGeneration: 3, typeChecking: {} }),
      status: 'Healthy',
      message: /generation 3 type-checked without a warning/,
    },
    {
      name: 'type checking warned: Degraded, naming each warning',
      object: policy(3, {
        observedGeneration: 3,
        typeChecking: {
          expressionWarnings: [
            { fieldRef: 'spec.validations[0].expression', warning: 'undefined field x' },
            { fieldRef: 'spec.variables[1].expression', warning: 'no matching overload' },
          ],
        },
      }),
      status: 'Degraded',
      message:
        /spec\.validations\[0\]\.expression: undefined field x; spec\.variables\[1\]\.expression: no matching overload/,
    },
  ];
  for (const row of table)
    it(row.name, () => {
      const shown = health(vapKey, row.object);
      assert.equal(shown.status, row.status, shown.message);
      assert.match(shown.message ?? '', row.message);
    });
});

/** Every object deploy/ renders with every component, and what `--opt-in` adds. */
function renderedObjects(): Manifest[] {
  const optIn = runTollgate([
    'admission-params',
    join(repoRoot, 'policy-examples'),
    '--opt-in',
    '-o',
    'yaml',
  ]);
  assert.equal(optIn.code, 0, optIn.stderr);
  return [
    ...kustomizeOverlay({ components: ['monitoring', 'cancel', 'persistent-cache'] }),
    ...parseManifests(optIn.stdout, 'admission-params --opt-in'),
  ];
}

describe('every kind tollgate ships is accounted for', () => {
  const rendered = renderedObjects();
  const groupKind = (o: Manifest) => `${o.apiVersion?.split('/').at(-2) ?? ''}_${o.kind}`;

  it('each kind rendered has a script, an Argo CD check of its own, or no status', () => {
    const scripted = Object.keys(scripts).map((k) => k.slice(prefix.length).split('_').at(-1));
    const unaccounted = [...new Set(rendered.map((o) => o.kind ?? ''))].filter(
      (kind) =>
        !scripted.includes(kind) &&
        !assessedByArgoCd.includes(kind) &&
        !withoutStatus.includes(kind),
    );
    assert.deepEqual(unaccounted, []);
    const text = readFileSync(example, 'utf8');
    for (const kind of [...assessedByArgoCd, ...withoutStatus])
      assert.match(text, new RegExp(`\\b${kind}\\b`), `the example names ${kind}`);
  });

  it('every key is the health customization of a group and kind tollgate renders', () => {
    const shipped = new Set(rendered.map(groupKind));
    for (const key of Object.keys(scripts)) {
      assert.ok(key.startsWith(prefix), key);
      assert.ok(shipped.has(key.slice(prefix.length)), `${key}: tollgate renders that kind`);
    }
  });
});

describe('Argo CD health of the policies a real API server type-checked', () => {
  let cp: ControlPlane;
  let api: KubernetesObjectApi;
  const typo: Manifest = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: 'argocd-health-typo' },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] },
        ],
      },
      validations: [{ expression: 'object.spec.schedulingGatez.size() == 0' }],
    },
  };

  before(async () => {
    cp = await sharedControlPlane();
    api = KubernetesObjectApi.makeApiClient(cp.kubeConfig('admin'));
  });
  after(async () => {
    await cp?.stop();
  });

  /** The live object once the API server has type-checked its current generation. */
  async function typeChecked(object: KubernetesObject): Promise<KubernetesObject> {
    await api.create(object);
    return eventually(
      `${object.metadata?.name} type-checked`,
      async () => {
        const live = (await api.read(object as { metadata: { name: string } })) as Manifest & {
          status?: { observedGeneration?: number; typeChecking?: object };
        };
        const checked =
          live.status?.typeChecking !== undefined &&
          live.status.observedGeneration === live.metadata?.generation;
        return checked ? live : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
  }

  it('tollgate’s shipped policies type-check clean: Healthy', async () => {
    const shipped = kustomizeOverlay().filter((o) => o.kind === 'ValidatingAdmissionPolicy');
    assert.ok(shipped.length >= 2, 'deploy/base ships its admission policies');
    for (const object of shipped) {
      const shown = health(vapKey, await typeChecked(object));
      assert.equal(shown.status, 'Healthy', `${object.metadata?.name}: ${shown.message}`);
    }
  });

  it('a policy whose expression names a field pods lack: Degraded, naming it', async () => {
    const shown = health(vapKey, await typeChecked(typo));
    assert.equal(shown.status, 'Degraded', shown.message);
    assert.match(shown.message ?? '', /spec\.validations\[0\]\.expression: .*schedulingGatez/);
  });
});
