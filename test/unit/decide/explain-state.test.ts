// explain tells apart where a governed pod is: gated, released but unschedulable,
// pulling its image, crash-looping, running but not ready, and the rest; each with the
// evidence and since when it holds.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { podConditionsOf, podLifeOf } from '../../../src/decide/explain-state.ts';
import { explainReleasedPod } from '../../../src/decide/explain.ts';
import { formatReleasedPod } from '../../../src/cli/explain.ts';
import { aPod } from '../../builders/pod.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';

const t0 = Date.UTC(2026, 10, 29, 8, 0, 0);
const at = (seconds: number) => t0 + seconds * 1000;
const iso = (seconds: number) => new Date(at(seconds)).toISOString();
const gate = 'team-a.tollgate.io/ready';

describe('where a governed pod is in its life', () => {
  const cases = [
    {
      name: 'a pod carrying tollgate gate is gated, since its hold began',
      pod: aPod('p', 'team-a')
        .gated(gate)
        .createdAt(at(0))
        .condition('tollgate.io/Released', 'False', 'Budget', at(5)),
      gated: true,
      want: { state: 'gated', since: iso(5), detail: 'held by tollgate (see Waiting)' },
    },
    {
      name: 'a gated pod without the condition is gated since it was created',
      pod: aPod('p', 'team-a').gated(gate).createdAt(at(0)),
      gated: true,
      want: { state: 'gated', since: iso(0), detail: 'held by tollgate (see Waiting)' },
    },
    {
      name: 'a released pod no node fits is unschedulable, since the scheduler said so',
      pod: aPod('p', 'team-a').condition('PodScheduled', 'False', 'Unschedulable', at(7)),
      gated: false,
      want: { state: 'unschedulable', since: iso(7), detail: 'PodScheduled False (Unschedulable)' },
    },
    {
      name: 'a released pod the scheduler has not judged yet is scheduling',
      pod: aPod('p', 'team-a'),
      gated: false,
      want: { state: 'scheduling', since: null, detail: 'released; waiting for the scheduler' },
    },
    {
      name: 'a bound pod whose image does not pull is pulling its image',
      pod: aPod('p', 'team-a')
        .boundTo('n1')
        .condition('PodScheduled', 'True', undefined, at(8))
        .waiting('ImagePullBackOff'),
      gated: false,
      want: { state: 'pulling-image', since: iso(8), detail: 'container app: ImagePullBackOff' },
    },
    {
      name: 'ErrImagePull is pulling its image too',
      pod: aPod('p', 'team-a').boundTo('n1').waiting('ErrImagePull'),
      gated: false,
      want: { state: 'pulling-image', since: null, detail: 'container app: ErrImagePull' },
    },
    {
      name: 'a bound pod whose container keeps exiting is crash-looping, since its last exit',
      pod: aPod('p', 'team-a')
        .boundTo('n1')
        .running()
        .waiting('CrashLoopBackOff', { restarts: 4, lastExit: { code: 1, at: at(30) } }),
      gated: false,
      want: {
        state: 'crash-looping',
        since: iso(30),
        detail: 'container app: CrashLoopBackOff, 4 restart(s), last exit 1 (Error)',
      },
    },
    {
      name: 'a running pod whose Ready is False is running but not ready',
      pod: aPod('p', 'team-a')
        .boundTo('n1')
        .running()
        .condition('Ready', 'False', 'ContainersNotReady', at(12)),
      gated: false,
      want: {
        state: 'not-ready',
        since: iso(12),
        detail: 'running; Ready False (ContainersNotReady)',
      },
    },
    {
      name: 'a running and ready pod is ready',
      pod: aPod('p', 'team-a')
        .boundTo('n1')
        .running()
        .condition('Ready', 'True', undefined, at(15)),
      gated: false,
      want: { state: 'ready', since: iso(15), detail: 'running and ready' },
    },
    {
      name: 'a bound pod with nothing to say yet is starting',
      pod: aPod('p', 'team-a').boundTo('n1'),
      gated: false,
      want: { state: 'starting', since: null, detail: 'bound; containers starting' },
    },
    {
      name: 'a succeeded pod is finished',
      pod: aPod('p', 'team-a').boundTo('n1').phase('Succeeded'),
      gated: false,
      want: { state: 'finished', since: null, detail: 'phase Succeeded' },
    },
  ];
  for (const c of cases)
    it(c.name, () => assert.deepEqual(podLifeOf(c.pod.obj(), c.gated), c.want));
});

describe('explain of a pod tollgate no longer gates', () => {
  const policy = aPolicy().tenant(aTenant('team-a')).obj();
  it('names its tenant, the policy commit and file, where it is and its conditions', () => {
    const pod = aPod('p', 'team-a')
      .condition('PodScheduled', 'False', 'Unschedulable', at(7))
      .obj();
    const explained = explainReleasedPod(policy, pod);
    assert.deepEqual(
      [explained?.tenant, explained?.life.state, explained?.podConditions],
      ['team-a', 'unschedulable', podConditionsOf(pod)],
    );
    assert.deepEqual(explained?.podConditions, [
      { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', since: iso(7) },
    ]);
    assert.equal(explained?.source.commit, policy.commit);
  });
  it('prints it byte for byte', () => {
    const pod = aPod('p', 'team-a')
      .boundTo('n1')
      .running()
      .condition('PodScheduled', 'True', undefined, at(1))
      .condition('Ready', 'False', 'ContainersNotReady', at(12))
      .obj();
    assert.equal(
      formatReleasedPod(explainReleasedPod(policy, pod)!, 'https://git.example/policy.git'),
      [
        'Pod:        team-a/p',
        'Tenant:     team-a',
        "Gate:       none of tollgate's (released, or never gated)",
        `Source:     https://git.example/policy.git at ${policy.commit}: tenants/team-a.yaml`,
        `State:      not-ready since ${iso(12)}: running; Ready False (ContainersNotReady)`,
        'Pod conditions:',
        `  PodScheduled True since ${iso(1)}`,
        `  Ready False (ContainersNotReady) since ${iso(12)}`,
        '',
      ].join('\n'),
    );
  });
  it('says nothing of a pod outside every tenant', () => {
    assert.equal(explainReleasedPod(policy, aPod('p', 'elsewhere').obj()), undefined);
  });
});
