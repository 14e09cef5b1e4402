/**
 * Feature detection beyond nodes: what the API server answers (discovery: is pods/resize
 * served; a server-side dry-run of a pod-level resize: accepted or refused) decides what
 * tollgate sends, and plan and /readyz say per policy what will and will not happen.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  apiProbeKey,
  podLevelAnswer,
  podLevelProbeCandidate,
  policyResizeSupport,
  type ApiResizeSupport,
} from '../../../src/decide/resize-features.ts';
import { podLevelProbePatch } from '../../../src/cluster/resize-api.ts';
import { aResizePolicy, aRunningPod, decideResizeFor, steady } from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const high = [{ signal: 'queue', samples: steady(500, now) }];
const podLevel = 'InPlacePodLevelResourcesVerticalScaling';
const podPolicy = aResizePolicy({ pod: { cpu: { min: 1000, max: 4000, step: 1000 } } });

function node(name: string, declaredFeatures: string[] = [podLevel]) {
  return {
    metadata: { name },
    status: {
      allocatable: { cpu: '8', memory: '16Gi' },
      nodeInfo: { kubeletVersion: 'v1.37.0' },
      declaredFeatures,
    },
  };
}

function podLevelPod(name = 'web-0', nodeName = 'node-a') {
  return aRunningPod(name, 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .podResources({ cpu: '2', memory: '1Gi' })
    .node(nodeName)
    .obj();
}

const served: ApiResizeSupport = {
  resizeServed: true,
  podLevel: podLevelAnswer('team-a/web-0', { code: 200 }),
};

test("the dry-run's answer: accepted, refused by the API server, or nothing learnt", () => {
  const cases: { name: string; code?: number; message?: string; verdict: string }[] = [
    { name: 'a 200 is accepted', code: 200, verdict: 'accepted' },
    {
      name: 'an invalid spec.resources change is refused',
      code: 422,
      message:
        'Pod "web-0" is invalid: spec.resources: Forbidden: pod-level resources cannot be resized',
      verdict: 'refused',
    },
    {
      name: 'another invalid field says nothing about the feature',
      code: 422,
      message: 'Pod "web-0" is invalid: spec.containers[0].resources.requests: Invalid value',
      verdict: 'unknown',
    },
    {
      name: 'no permission for the dry-run',
      code: 403,
      message: 'pods "web-0" is forbidden: User cannot patch resource "pods/resize"',
      verdict: 'unknown',
    },
    { name: 'no answer at all', message: 'ECONNREFUSED', verdict: 'unknown' },
  ];
  for (const c of cases) {
    const answer = podLevelAnswer('team-a/web-0', {
      ...(c.code === undefined ? {} : { code: c.code }),
      ...(c.message === undefined ? {} : { message: c.message }),
    });
    assert.equal(answer.verdict, c.verdict, c.name);
    assert.match(answer.detail, /team-a\/web-0/, `${c.name}: names the pod asked about`);
    if (c.message) assert.ok(answer.detail.includes(c.message), `${c.name}: the API's words`);
  }
});

test('plan and /readyz lines: the nodes, then what the API server answered', () => {
  const nodes = [node('a'), node('b', [])];
  const cases: {
    name: string;
    api?: ApiResizeSupport;
    policy: typeof podPolicy;
    lines: string[];
  }[] = [
    {
      name: 'not asked: the node lines alone',
      policy: podPolicy,
      lines: [
        'container resize: 2 of 2 nodes',
        `pod-level resize: 1 of 2 nodes (not b: the node does not declare ${podLevel})`,
      ],
    },
    {
      name: 'served and accepted',
      api: served,
      policy: podPolicy,
      lines: [
        'container resize: 2 of 2 nodes',
        `pod-level resize: 1 of 2 nodes (not b: the node does not declare ${podLevel})`,
        'API server: pods/resize served',
        'API server: pod-level resize accepted by the API server (server-side dry-run on team-a/web-0)',
      ],
    },
    {
      name: 'a container-only policy has no pod-level line',
      api: served,
      policy: aResizePolicy(),
      lines: ['container resize: 2 of 2 nodes', 'API server: pods/resize served'],
    },
    {
      name: 'pods/resize not served',
      api: { resizeServed: false, podLevel: { verdict: 'unknown', detail: 'not asked' } },
      policy: aResizePolicy(),
      lines: [
        'container resize: 2 of 2 nodes',
        'API server: pods/resize not served, so nothing is resized',
      ],
    },
  ];
  for (const c of cases) {
    assert.deepEqual(policyResizeSupport(c.policy, nodes, c.api).lines, c.lines, c.name);
  }
});

test('what the API server answered decides what is sent: nothing without pods/resize, no pod-level change it refused', () => {
  const resize = (api: ApiResizeSupport) => {
    const p = decideResizeFor(now, {
      policy: podPolicy,
      pod: podLevelPod(),
      node: node('node-a'),
      readings: high,
      api,
    });
    const op = p.writes.find((w) => w.op.type === 'resize')?.op;
    return { plan: p, op: op?.type === 'resize' ? op : undefined };
  };
  assert.ok(resize(served).op?.pod, 'accepted: the pod level is resized');
  const unserved = resize({ resizeServed: false, podLevel: served.podLevel });
  assert.deepEqual(unserved.plan.decisions, [], 'pods/resize not served: nothing');
  assert.match(unserved.plan.skip ?? '', /does not serve pods\/resize/);
  const refused = resize({
    resizeServed: true,
    podLevel: podLevelAnswer('team-a/web-0', { code: 422, message: 'spec.resources: Forbidden' }),
  });
  assert.ok(refused.op, 'the containers are still resized');
  assert.equal(refused.op?.pod, undefined, 'no pod-level change sent');
  assert.match(
    refused.plan.decisions[0]?.reason ?? '',
    /pod-level resize refused by the API server/,
  );
});

test('the pod asked about is a pod-level pod on a node that declares the feature; the question is asked again when nodes change', () => {
  const a = podLevelPod('web-a', 'node-a');
  const b = podLevelPod('web-b', 'node-b');
  const plain = aRunningPod('plain-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .node('node-a')
    .obj();
  const nodes = [node('node-a', []), node('node-b')];
  assert.equal(
    podLevelProbeCandidate(new Map([[podPolicy, [plain, a, b]]]), nodes),
    b,
    'only web-b has pod-level resources on a declaring node',
  );
  assert.equal(podLevelProbeCandidate(new Map([[aResizePolicy(), [a, b]]]), nodes), undefined);
  const key = apiProbeKey(nodes, b);
  assert.equal(apiProbeKey([...nodes].reverse(), b), key, 'node order does not matter');
  assert.notEqual(
    apiProbeKey([node('node-a'), node('node-b')], b),
    key,
    'a node upgrade asks again',
  );
  assert.notEqual(apiProbeKey([...nodes, node('node-c')], b), key, 'a new node asks again');
  assert.notEqual(apiProbeKey(nodes, undefined), key, 'another pod asks again');
});

test('the dry-run moves one pod-level request one unit up, the limit with it when equal', () => {
  const pod = (resources: object) => ({
    metadata: { name: 'p', namespace: 'n' },
    spec: { containers: [], resources },
  });
  assert.deepEqual(podLevelProbePatch(pod({ requests: { cpu: '2' }, limits: { cpu: '4' } })), {
    spec: { resources: { requests: { cpu: '2001m' } } },
  });
  assert.deepEqual(podLevelProbePatch(pod({ requests: { cpu: '1' }, limits: { cpu: '1' } })), {
    spec: { resources: { requests: { cpu: '1001m' }, limits: { cpu: '1001m' } } },
  });
  assert.deepEqual(podLevelProbePatch(pod({ requests: { memory: '1Gi' } })), {
    spec: { resources: { requests: { memory: '1025Mi' } } },
  });
  assert.equal(podLevelProbePatch(pod({})), undefined);
});
