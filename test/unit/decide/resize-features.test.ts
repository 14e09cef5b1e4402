/**
 * Feature detection: whether a node can resize in place (its kubelet's version) and at
 * pod level (the node declares InPlacePodLevelResourcesVerticalScaling in
 * status.declaredFeatures), reported per ResizePolicy, and never asked of a node that
 * cannot: tollgate does not learn it from the API server's refusals.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeResizeSupport, policyResizeSupport } from '../../../src/decide/resize-features.ts';
import { aResizePolicy, aRunningPod, decideResizeFor, steady } from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const high = [{ signal: 'queue', samples: steady(500, now) }];
const podLevel = 'InPlacePodLevelResourcesVerticalScaling';

function node(name: string, kubeletVersion: string | undefined, declaredFeatures?: string[]) {
  return {
    metadata: { name },
    status: {
      allocatable: { cpu: '8', memory: '16Gi' },
      ...(kubeletVersion ? { nodeInfo: { kubeletVersion } } : {}),
      ...(declaredFeatures ? { declaredFeatures } : {}),
    },
  };
}

test('what a node supports, from its kubelet version and declared features', () => {
  const cases: {
    name: string;
    node: ReturnType<typeof node>;
    containers: boolean;
    pod: boolean;
  }[] = [
    {
      name: 'a 1.37 kubelet declaring pod-level resize',
      node: node('a', 'v1.37.2', [podLevel]),
      containers: true,
      pod: true,
    },
    {
      name: 'a 1.35 kubelet without the declaration',
      node: node('b', 'v1.35.0', []),
      containers: true,
      pod: false,
    },
    { name: 'a 1.32 kubelet', node: node('c', 'v1.32.4'), containers: false, pod: false },
    {
      name: 'a vendor build of 1.34',
      node: node('d', 'v1.34.1-eks-4f2a'),
      containers: true,
      pod: false,
    },
    { name: 'no version reported', node: node('e', undefined), containers: false, pod: false },
  ];
  for (const c of cases) {
    const support = nodeResizeSupport(c.node);
    assert.equal(support.containers, c.containers, `${c.name}: container resize`);
    assert.equal(support.podLevel, c.pod, `${c.name}: pod-level resize`);
    if (!c.containers) assert.match(support.why ?? '', /in-place resize/, c.name);
  }
});

test('per policy: what will and will not happen on the nodes of the cluster', () => {
  const nodes = [node('a', 'v1.37.2', [podLevel]), node('b', 'v1.35.0', []), node('c', 'v1.32.4')];
  const containersOnly = policyResizeSupport(aResizePolicy(), nodes);
  assert.deepEqual(containersOnly.lines, [
    'container resize: 2 of 3 nodes (not c: kubelet v1.32.4 has no in-place resize, 1.33 or later needed)',
  ]);
  const withPod = policyResizeSupport(
    aResizePolicy({ pod: { cpu: { min: 500, max: 4000, step: 500 } } }),
    nodes,
  );
  assert.deepEqual(withPod.lines, [
    'container resize: 2 of 3 nodes (not c: kubelet v1.32.4 has no in-place resize, 1.33 or later needed)',
    `pod-level resize: 1 of 3 nodes (not b, c: the node does not declare ${podLevel})`,
  ]);
});

test('a pod-level step is not asked of a node that does not declare pod-level resize; container steps still are', () => {
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .podResources({ cpu: '2', memory: '1Gi' })
    .obj();
  const policy = aResizePolicy({ pod: { cpu: { min: 1000, max: 4000, step: 1000 } } });
  const on = (n: ReturnType<typeof node>) =>
    decideResizeFor(now, { policy, pod, node: n, readings: high });
  const declared = on(node('node-a', 'v1.37.2', [podLevel]));
  const resize = (p: ReturnType<typeof on>) => {
    const op = p.writes.find((w) => w.op.type === 'resize')?.op;
    return op?.type === 'resize' ? op : undefined;
  };
  assert.ok(resize(declared)?.pod, 'pod level resized where the node declares it');
  const undeclared = on(node('node-a', 'v1.35.0', []));
  assert.equal(resize(undeclared)?.pod, undefined, 'no pod-level change sent');
  assert.match(
    undeclared.decisions[0]?.reason ?? '',
    /does not declare InPlacePodLevelResourcesVerticalScaling/,
  );
});

test('nothing is asked of a node whose kubelet cannot resize in place', () => {
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .obj();
  const p = decideResizeFor(now, { pod, node: node('node-a', 'v1.32.0'), readings: high });
  assert.deepEqual(p.decisions, []);
  assert.match(p.skip ?? '', /kubelet v1\.32\.0 has no in-place resize/);
});
