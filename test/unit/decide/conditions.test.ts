import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  approvalFor,
  evaluateApproved,
  evaluateBudget,
  evaluateGangComplete,
  evaluateImagePresent,
  evaluateObjectCondition,
  indexNodeImages,
  tenantUsage,
  type BudgetLimits,
  type Usage,
} from '../../../src/decide/conditions.ts';
import { normaliseImage } from '../../../src/decide/images.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);

test('image references normalise the way the runtime resolves them', async (t) => {
  const cases = [
    {
      name: 'a bare name is a docker.io library image at latest',
      ref: 'nginx',
      want: { repository: 'docker.io/library/nginx', tag: 'latest' },
    },
    {
      name: 'a user image gets the docker.io registry',
      ref: 'bitnami/redis:7',
      want: { repository: 'docker.io/bitnami/redis', tag: '7' },
    },
    {
      name: 'a registry with a port keeps it',
      ref: 'localhost:5000/app:2',
      want: { repository: 'localhost:5000/app', tag: '2' },
    },
    {
      name: 'a digest reference keeps its digest and tag',
      ref: 'registry.example/app:1@sha256:abc',
      want: { repository: 'registry.example/app', digest: 'sha256:abc', tag: '1' },
    },
  ];
  for (const c of cases)
    await t.test(c.name, () => assert.deepEqual(normaliseImage(c.ref), c.want));
});

test('ImagePresent', async (t) => {
  const pod = aPod('p').image('nginx:1.27').obj();
  const cases = [
    { name: 'holds when no node has the image', nodes: [aNode('n1')], minNodes: 1, met: false },
    {
      name: 'is met when one node has it under its fully qualified name',
      nodes: [aNode('n1').images('docker.io/library/nginx:1.27')],
      minNodes: 1,
      met: true,
    },
    {
      name: 'does not count a node with another tag',
      nodes: [aNode('n1').images('docker.io/library/nginx:1.26')],
      minNodes: 1,
      met: false,
    },
    {
      name: 'does not count a node that is not ready',
      nodes: [aNode('n1').images('nginx:1.27').notReady(), aNode('n2').images('nginx:1.27')],
      minNodes: 2,
      met: false,
    },
    {
      name: 'is met on N ready nodes',
      nodes: [
        aNode('n1').images('nginx:1.27'),
        aNode('n2').images(['nginx@sha256:x', 'nginx:1.27']),
      ],
      minNodes: 2,
      met: true,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const input = evaluateImagePresent(
        pod,
        c.minNodes,
        c.nodes.map((n) => n.obj()),
      );
      assert.equal(input.met, c.met);
      assert.equal(input.condition, 'ImagePresent');
    });
  }
  await t.test('a digest-pinned image matches only that digest', () => {
    const pinned = aPod('p').image('registry.example/app@sha256:aaa').obj();
    assert.equal(
      evaluateImagePresent(pinned, 1, [aNode('n1').images('registry.example/app@sha256:aaa').obj()])
        .met,
      true,
    );
    assert.equal(
      evaluateImagePresent(pinned, 1, [aNode('n1').images('registry.example/app@sha256:bbb').obj()])
        .met,
      false,
    );
  });
  await t.test('an index built once per pass answers as the node list does', () => {
    const nodes = [
      aNode('n1').images('nginx:1.27', 'registry.example/app@sha256:aaa').obj(),
      aNode('n2').images(['docker.io/library/nginx:1.27', 'nginx@sha256:x']).obj(),
      aNode('n3').images('nginx:1.27').notReady().obj(),
      aNode('n4').images('nginx:1.28').obj(),
    ];
    const index = indexNodeImages(nodes);
    const pods = [
      aPod('tag').image('nginx:1.27').obj(),
      aPod('other-tag').image('nginx:1.28').obj(),
      aPod('digest').image('registry.example/app@sha256:aaa').obj(),
      aPod('absent').image('registry.example/absent:1').obj(),
    ];
    for (const p of pods)
      for (const minNodes of [1, 2, 3])
        assert.deepEqual(
          evaluateImagePresent(p, minNodes, index),
          evaluateImagePresent(p, minNodes, nodes),
          `${p.metadata?.name} minNodes ${minNodes}`,
        );
    assert.deepEqual(evaluateImagePresent(pods[0]!, 2, index).value, {
      minNodes: 2,
      readyNodes: 3,
      images: [{ image: 'nginx:1.27', nodes: 2 }],
    });
  });
});

test('ObjectCondition', async (t) => {
  const pod = aPod('p', 'team-a').obj();
  const dataset = { apiVersion: 'data.io/v1', kind: 'Dataset', namespace: 'team-a', name: 'train' };
  const cases = [
    {
      name: 'holds when the object is absent',
      objects: [],
      condition: { conditionType: 'Ready' },
      met: false,
    },
    {
      name: 'is met when the condition has the wanted status',
      objects: [
        { ...dataset, object: { status: { conditions: [{ type: 'Ready', status: 'True' }] } } },
      ],
      condition: { conditionType: 'Ready' },
      met: true,
    },
    {
      name: 'holds when the condition has another status',
      objects: [
        { ...dataset, object: { status: { conditions: [{ type: 'Ready', status: 'False' }] } } },
      ],
      condition: { conditionType: 'Ready' },
      met: false,
    },
    {
      name: 'compares a dotted field to a string',
      objects: [{ ...dataset, object: { data: { ready: 'true' } } }],
      condition: { field: 'data.ready', equals: 'true' },
      met: true,
    },
    {
      name: 'a missing field does not equal anything',
      objects: [{ ...dataset, object: { data: {} } }],
      condition: { field: 'data.ready', equals: 'true' },
      met: false,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const input = evaluateObjectCondition(
        pod,
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'data.io/v1', kind: 'Dataset', name: 'train' },
          ...c.condition,
        },
        snapshotOf([], [], c.objects),
      );
      assert.equal(input.met, c.met);
    });
  }
});

test('ObjectCondition on an object that cannot be read holds, saying why, instead of judging it absent', () => {
  const pod = aPod('p', 'team-a').obj();
  const snapshot = {
    ...snapshotOf([]),
    objectProblem: (ref: { kind: string; namespace?: string }) =>
      ref.kind === 'Widget' && ref.namespace === 'team-a'
        ? 'Widget.example.io/v1 in team-a cannot be read: the API server does not serve this kind'
        : undefined,
  };
  const input = evaluateObjectCondition(
    pod,
    {
      type: 'ObjectCondition',
      object: { apiVersion: 'example.io/v1', kind: 'Widget', name: 'w' },
      conditionType: 'Ready',
    },
    snapshot,
  );
  assert.equal(input.met, false);
  assert.deepEqual(input.value, {
    object: 'Widget/team-a/w',
    found: false,
    unreadable:
      'Widget.example.io/v1 in team-a cannot be read: the API server does not serve this kind',
  });
});

test('ObjectCondition finds a cluster-scoped object the view keeps under its bare name', () => {
  const pod = aPod('p', 'team-a').obj();
  const node = {
    apiVersion: 'v1',
    kind: 'Node',
    name: 'n1',
    object: { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
  };
  const input = evaluateObjectCondition(
    pod,
    {
      type: 'ObjectCondition',
      object: { apiVersion: 'v1', kind: 'Node', name: 'n1' },
      conditionType: 'Ready',
    },
    snapshotOf([], [], [node]),
  );
  assert.equal(input.met, true);
});

test('GangComplete', async (t) => {
  const gang = { type: 'GangComplete' as const, groupLabel: 'gang', sizeAnnotation: 'gang-size' };
  const member = (n: string) =>
    aPod(n, 'team-a').label('gang', 'g1').annotate('gang-size', '3').obj();
  const cases = [
    {
      name: 'is not complete with two of three members',
      members: [member('a'), member('b')],
      met: false,
    },
    {
      name: 'is complete with all three members',
      members: [member('a'), member('b'), member('c')],
      met: true,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () =>
      assert.equal(evaluateGangComplete(member('a'), gang, c.members).met, c.met),
    );
  }
  await t.test('a member without a size says so', () => {
    const input = evaluateGangComplete(aPod('x', 'team-a').label('gang', 'g1').obj(), gang, []);
    assert.equal(input.met, false);
    assert.match(JSON.stringify(input.value), /gang-size missing/);
  });
});

test('Approved', async (t) => {
  const pod = aPod('p', 'team-a').obj();
  const cases = [
    { name: 'holds without an approval', policy: aPolicy(), met: false },
    {
      name: 'is met by a Release approval for the pod',
      policy: aPolicy().approve('Release', 'team-a', 'p'),
      met: true,
    },
    {
      name: 'is not met by an approval for another pod',
      policy: aPolicy().approve('Release', 'team-a', 'q'),
      met: false,
    },
    {
      name: 'is not met by an expired approval',
      policy: aPolicy().approve('Release', 'team-a', 'p', now - 1),
      met: false,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () =>
      assert.equal(evaluateApproved(pod, c.policy.obj().approvals, now).met, c.met),
    );
  }
});

test('an approval naming a uid binds to that pod only, never to a later pod of the same name', async (t) => {
  const uid = '3f1c2b9e-7a64-4d0e-9b1a-2c5e8f7d6a10';
  const base = aPolicy().approve('Cancel', 'team-a', 'job-0').obj().approvals[0]!;
  const bound = {
    ...base,
    target: { kind: 'Pod' as const, namespace: 'team-a', name: 'job-0', uid },
  };
  const cases = [
    { name: 'matches the pod with that uid', pod: aPod('job-0', 'team-a').uid(uid), match: true },
    {
      name: 'does not match a re-created pod of the same name',
      pod: aPod('job-0', 'team-a').uid('0b7e1c2d-0000-4000-8000-000000000001'),
      match: false,
    },
    {
      name: 'compares uids without regard to case',
      pod: aPod('job-0', 'team-a').uid(uid.toUpperCase()),
      match: true,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () =>
      assert.equal(approvalFor([bound], c.pod.obj(), 'Cancel', now) !== undefined, c.match),
    );
  }
});

test('Budget', async (t) => {
  const cases: { name: string; used: Usage; limits: BudgetLimits; met: boolean }[] = [
    {
      name: 'fits when used plus adding stays within every limit',
      used: { pods: 3, resources: { cpu: 3000 } },
      limits: { pods: 4, resources: { cpu: 4000 } },
      met: true,
    },
    {
      name: 'holds when the pod count would exceed',
      used: { pods: 4, resources: { cpu: 0 } },
      limits: { pods: 4, resources: {} },
      met: false,
    },
    {
      name: 'holds when a GPU limit would be exceeded',
      used: { pods: 0, resources: { 'nvidia.com/gpu': 2 } },
      limits: { resources: { 'nvidia.com/gpu': 2 } },
      met: false,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const input = evaluateBudget(
        c.used,
        { pods: 1, resources: { cpu: 1000, 'nvidia.com/gpu': 1 } },
        c.limits,
      );
      assert.equal(input.met, c.met);
    });
  }
  await t.test('usage counts released unfinished pods only', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-a'))
      .gatePolicy(aGatePolicy('ready', 'team-a'))
      .obj();
    const usage = tenantUsage(policy, [
      aPod('gated', 'team-a').gated('team-a.tollgate.io/ready').requests({ cpu: '1' }).obj(),
      aPod('pending', 'team-a').requests({ cpu: '1' }).obj(),
      aPod('running', 'team-a').boundTo('n').running().requests({ cpu: '2' }).obj(),
      aPod('done', 'team-a').boundTo('n').phase('Succeeded').requests({ cpu: '4' }).obj(),
      aPod('other', 'elsewhere').requests({ cpu: '8' }).obj(),
    ]);
    assert.deepEqual(usage.get('team-a'), { pods: 2, resources: { cpu: 3000 } });
  });
});
