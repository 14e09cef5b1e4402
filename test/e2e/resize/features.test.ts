/**
 * Feature detection from the API server's answer, on the real control plane: discovery
 * says pods/resize is served, and a server-side dry-run of a pod-level resize of a
 * managed pod is accepted without storing anything (the pod's resourceVersion and
 * generation stay). The answer reaches /readyz's resize-features detail, and the loop asks
 * again when the nodes change (counted, not timed). A dry-run the API server refuses (here
 * for a node that does not declare the feature: 403) is never taken for support.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { aResizePolicy } from '../../builders/resize.ts';
import { eventually } from '../../support/eventually.ts';
import { createResizeApiProbe, type ResizeApiProbe } from '../../../src/cluster/resize-api.ts';
import { readinessChecks } from '../../../src/run/observe.ts';
import type { ResizeLoop } from '../../../src/loops/resize.ts';
import { mergePatch, policyFor, startResizeWorld, type ResizeWorld } from './harness.ts';

const policy = aResizePolicy({
  name: 'budgeted',
  source: { file: 'resize/budgeted.yaml', document: 0 },
  selector: { matchLabels: { app: 'budgeted' }, matchExpressions: [] },
  containers: { app: { cpu: { min: 250, max: 2000, step: 250 } } },
  pod: { cpu: { min: 1000, max: 4000, step: 500 } },
  signals: [
    {
      name: 'queue',
      query: 'tollgate_test_features_queue{namespace="$namespace",pod="$pod"}',
      scaleUpAbove: 100,
      scaleDownBelow: 20,
      resources: ['cpu'],
    },
  ],
  windowMs: 3000,
});

function budgetedPod(name: string, node: string): V1Pod {
  return {
    metadata: { name, labels: { app: 'budgeted' } },
    spec: {
      nodeName: node,
      resources: { requests: { cpu: '2', memory: '512Mi' }, limits: { cpu: '2', memory: '512Mi' } },
      containers: [
        {
          name: 'app',
          image: 'registry.example/app:1',
          resources: { requests: { cpu: '500m', memory: '256Mi' } },
        },
      ],
    },
  };
}

let world: ResizeWorld;
let asked = 0;
let loop: ResizeLoop;

before(async () => {
  world = await startResizeWorld('features', { 'rz-features-a': { cpu: '8', memory: '16Gi' } });
  const real = createResizeApiProbe(world.cp.kubeConfig('tollgate'));
  const probeApi: ResizeApiProbe = async (candidate) => {
    asked += 1;
    return real(candidate);
  };
  loop = world.loop(() => policyFor(world.namespace, [policy]), {
    intervalMs: 3_600_000,
    probeApi,
  });
});

after(async () => {
  await world?.stop();
});

test('the API server answers: pods/resize served, a pod-level dry-run accepted and nothing stored; /readyz says so per policy', async () => {
  const started = await world.runPod(budgetedPod('budgeted-0', 'rz-features-a'));
  await loop.pass();
  const api = loop.apiSupport();
  assert.equal(api?.resizeServed, true, 'discovery lists pods/resize with patch');
  assert.equal(api?.podLevel.verdict, 'accepted', api?.podLevel.detail);
  assert.match(api?.podLevel.detail ?? '', new RegExp(`${world.namespace}/budgeted-0`));
  const now = await world.pod('budgeted-0');
  assert.equal(
    now.metadata?.generation,
    started.metadata?.generation,
    'the dry-run stored nothing',
  );
  assert.deepEqual(now.spec?.resources, started.spec?.resources);

  const check = readinessChecks({
    policies: { current: () => policyFor(world.namespace, [policy]) },
    view: world.view,
    resizeApi: () => loop.apiSupport(),
  })['resize-features'];
  const detail = (check?.() as { detail: string } | null)?.detail ?? '';
  assert.match(detail, /budgeted: API server: pods\/resize served/);
  assert.match(detail, /budgeted: API server: pod-level resize accepted by the API server/);
});

test('the loop asks the API server again when the nodes change, not on every pass', async () => {
  const before = asked;
  await loop.pass();
  await loop.pass();
  assert.equal(asked, before, 'same nodes, same pod: not asked again');
  await world.kubelet.addNode('rz-features-b', { cpu: '4', memory: '8Gi' });
  await world.admin.patchNodeStatus(
    {
      name: 'rz-features-b',
      body: { status: { declaredFeatures: ['InPlacePodLevelResourcesVerticalScaling'] } },
    },
    mergePatch,
  );
  await eventually(
    'the view shows the new node',
    async () => [...world.view.nodes()].some((n) => n.metadata?.name === 'rz-features-b'),
    { timeoutMs: 20_000 },
  );
  await loop.pass();
  assert.ok(asked > before, 'a new node: asked again');
  assert.equal(loop.apiSupport()?.podLevel.verdict, 'accepted');
});

test('a pod-level dry-run the API server refuses for its node is not taken for support', async () => {
  // A node that does not declare pod-level resize: the API server refuses such a resize.
  await world.kubelet.addNode('rz-features-old', { cpu: '4', memory: '8Gi' });
  await world.admin.patchNodeStatus(
    { name: 'rz-features-old', body: { status: { declaredFeatures: [] } } },
    mergePatch,
  );
  const pod = await world.runPod(budgetedPod('budgeted-old', 'rz-features-old'));
  const answer = await createResizeApiProbe(world.cp.kubeConfig('tollgate'))(pod);
  // The API server refuses it for the node (403), not for its own gate: nothing learnt
  // about the API server's support, and certainly not taken for it.
  assert.equal(answer.podLevel.verdict, 'unknown', answer.podLevel.detail);
  assert.match(
    answer.podLevel.detail,
    /403 .*requires features InPlacePodLevelResourcesVerticalScaling .*not available on node "rz-features-old"/,
  );
  const now = await world.pod('budgeted-old');
  assert.equal(now.metadata?.generation, pod.metadata?.generation, 'nothing stored');
});
