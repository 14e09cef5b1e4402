// Each phase of a gate-release pass (src/decide/release-plan.ts) on its own: its inputs,
// its outputs, nothing else. The whole pass is specified in release-plan.test.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admitUnits, nextUnit, tenantQueues } from '../../../src/decide/release-admit.ts';
import { classifyPods, type Classification } from '../../../src/decide/release-classify.ts';
import { judgePods } from '../../../src/decide/release-judge.ts';
import { earliestWakeup, emptyPlanState, planReleases } from '../../../src/decide/release-plan.ts';
import { recordVerdicts } from '../../../src/decide/release-record.ts';
import { groupReleaseUnits, releaseUnit } from '../../../src/decide/release-units.ts';
import type { Candidate, ReleaseUnit, Verdict } from '../../../src/decide/release-verdict.ts';
import { snapshotOf, type PodLike } from '../../../src/decide/objects.ts';
import { ownedGate } from '../../../src/decide/gates.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant, type GatePolicyBuilder } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const minutesAgo = (m: number) => now - m * 60_000;

function policyOf(...gatePolicies: GatePolicyBuilder[]): Policy {
  return aPolicy()
    .tenant(aTenant('team-a').budget({ pods: 4 }), aTenant('team-b').weight(3))
    .gatePolicy(...gatePolicies)
    .obj();
}
const objs = (pods: PodBuilder[]): PodLike[] => pods.map((p) => p.obj());
const classify = (policy: Policy, pods: PodLike[]): Classification =>
  classifyPods(policy, pods, new Map());
const judge = (policy: Policy, pods: PodBuilder[]) => {
  const list = objs(pods);
  return judgePods(policy, snapshotOf(list, [aNode('n1').obj()]), classify(policy, list), now);
};
/** Every pod a candidate for a release unit of its own policy. */
function candidatesOf(policy: Policy, pods: PodLike[]): Candidate[] {
  return pods.map((pod) => ({
    pod,
    owned: ownedGate(pod, policy) as Candidate['owned'],
    inputs: [],
    requests: { pods: 1, resources: {} },
    reasonPrefix: 'conditions met',
    expiryForced: false,
  }));
}
const names = (verdicts: readonly Verdict[]) =>
  verdicts.map((v) => `${v.kind} ${v.pod.metadata?.name}: ${v.reason}`);

describe('phase 1, classifyPods: the cluster alone, plus the writes it does not show yet', () => {
  const policy = policyOf(aGatePolicy('ready', 'team-a'));
  it('charges running and released pods to their tenant, and counts released-but-unbound ones in flight', () => {
    const classified = classify(
      policy,
      objs([
        aPod('gated', 'team-a').gated('team-a.tollgate.io/ready'),
        aPod('pending', 'team-a'),
        aPod('running', 'team-a').boundTo('n1').running(),
      ]),
    );
    assert.equal(classified.usage.get('team-a')?.pods, 2);
    assert.equal(classified.inFlight.get('team-a'), 1);
    assert.equal(classified.globalInFlight, 1);
    assert.deepEqual(classified.summary.gated, [
      { tenant: 'team-a', gate: 'team-a.tollgate.io/ready', count: 1 },
    ]);
  });
  it('a release sent but not yet shown counts as in flight; one the view shows is dropped', () => {
    const pods = objs([
      aPod('sent', 'team-a').gated('team-a.tollgate.io/ready'),
      aPod('shown', 'team-a'),
    ]);
    const releasing = { write: 'release', gate: 'team-a.tollgate.io/ready' } as const;
    const classified = classifyPods(
      policy,
      pods,
      new Map([
        ['uid-team-a-sent', releasing],
        ['uid-team-a-shown', releasing],
      ]),
    );
    assert.deepEqual(classified.acting, new Map([['uid-team-a-sent', releasing]]));
    assert.equal(classified.stateOf.get(pods[0] as PodLike), 'pending');
    assert.equal(classified.globalInFlight, 2);
  });
});

describe('phase 2, judgePods: each gated pod on its own', () => {
  const gated = (name: string, minutes = 1) =>
    aPod(name, 'team-a').gated('team-a.tollgate.io/ready').createdAt(minutesAgo(minutes));
  const cases: {
    name: string;
    policy: GatePolicyBuilder;
    approve?: 'Release' | 'Cancel';
    minutes?: number;
    candidate?: { reason: RegExp; expiryForced: boolean };
    verdicts?: RegExp[];
  }[] = [
    {
      name: 'conditions met: a candidate, not expiry-forced',
      policy: aGatePolicy('ready', 'team-a'),
      candidate: { reason: /^conditions met$/, expiryForced: false },
    },
    {
      name: 'a condition not met: held, naming it',
      policy: aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }),
      verdicts: [/^Hold p: waiting for Approved$/],
    },
    {
      name: 'expired with action Release: a candidate forced by expiry, the waived condition named',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Release'),
      minutes: 5,
      candidate: {
        reason: /^expired \(gated 300s, expiry after 60s\); policy action Release waives Approved$/,
        expiryForced: true,
      },
    },
    {
      name: 'expired with action Cancel: a Cancel that records the expiry first',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Cancel'),
      minutes: 5,
      verdicts: [/^Cancel p: expired \(gated 300s, expiry after 60s\) waiting for Approved$/],
    },
    {
      name: 'expired with action Review: marked for review',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Review'),
      minutes: 5,
      verdicts: [/^Review p: expired .* awaiting an Approval$/],
    },
    {
      name: 'a Cancel approval cancels whatever the conditions say',
      policy: aGatePolicy('ready', 'team-a'),
      approve: 'Cancel',
      verdicts: [/^Cancel p: approval cancel-team-a-p by alice@example.com: checked by hand$/],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const builder = aPolicy().tenant(aTenant('team-a')).gatePolicy(c.policy);
      if (c.approve) builder.approve(c.approve, 'team-a', 'p');
      const judged = judge(builder.obj(), [gated('p', c.minutes)]);
      if (c.candidate) {
        assert.equal(judged.candidates.length, 1);
        assert.match(judged.candidates[0]?.reasonPrefix ?? '', c.candidate.reason);
        assert.equal(judged.candidates[0]?.expiryForced, c.candidate.expiryForced);
        assert.deepEqual(judged.verdicts, []);
      } else {
        assert.equal(judged.candidates.length, 0);
        const got = names(judged.verdicts);
        assert.equal(got.length, c.verdicts?.length);
        c.verdicts?.forEach((want, i) => assert.match(got[i] ?? '', want));
      }
    });
  }
  it('a held pod with an expiry asks to be woken when it expires', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-a'))
      .gatePolicy(
        aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }).expiry(600_000, 'Cancel'),
      )
      .obj();
    const judged = judge(policy, [gated('p', 1)]);
    assert.deepEqual(judged.wakeups, [minutesAgo(1) + 600_000]);
  });
  it('a pod no GatePolicy selects is held, naming its gate', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-a'))
      .gatePolicy(aGatePolicy('ready', 'team-a').selector({ matchLabels: { app: 'x' } }))
      .obj();
    assert.deepEqual(names(judge(policy, [gated('p')]).verdicts), [
      'Hold p: no GatePolicy for gate team-a.tollgate.io/ready selects this pod',
    ]);
  });
});

describe('phase 3, groupReleaseUnits: a gang is one unit, all or none', () => {
  const gangPolicy = policyOf(
    aGatePolicy('ready', 'team-a').conditions({
      type: 'GangComplete',
      groupLabel: 'gang',
      sizeAnnotation: 'gang-size',
    }),
  );
  const member = (name: string) =>
    aPod(name, 'team-a')
      .gated('team-a.tollgate.io/ready')
      .label('gang', 'g1')
      .annotate('gang-size', '3');
  it('single pods are units of one; a gang whose every gated member is a candidate is one unit', () => {
    const pods = objs([member('m1'), member('m2'), member('m3')]);
    const grouped = groupReleaseUnits(candidatesOf(gangPolicy, pods), classify(gangPolicy, pods));
    assert.deepEqual(
      grouped.units.map((u) => u.members.map((m) => m.pod.metadata?.name)),
      [['m1', 'm2', 'm3']],
    );
    assert.deepEqual(grouped.verdicts, []);
  });
  it('a gang with a gated member that is not a candidate holds every candidate member, naming it', () => {
    const pods = objs([member('m1'), member('m2'), member('m3')]);
    const grouped = groupReleaseUnits(
      candidatesOf(gangPolicy, pods.slice(0, 2)),
      classify(gangPolicy, pods),
    );
    assert.deepEqual(grouped.units, []);
    assert.deepEqual(names(grouped.verdicts), [
      'Hold m1: gang team-a/g1: members not ready (m3)',
      'Hold m2: gang team-a/g1: members not ready (m3)',
    ]);
  });
});

describe('phase 4, admitUnits: priority, then fair share, under budget and pacing', () => {
  const unitsOf = (policy: Policy, pods: PodLike[]): ReleaseUnit[] =>
    candidatesOf(policy, pods).map((c) => releaseUnit([c]));
  const admit = (policy: Policy, pods: PodBuilder[]) => {
    const list = objs(pods);
    return admitUnits({
      policy,
      units: unitsOf(policy, list),
      classified: classify(policy, list),
      state: emptyPlanState,
      now,
      rampMs: 10_000,
    });
  };
  const pods = (tenant: string, n: number, gate = 'ready') =>
    Array.from({ length: n }, (_, i) =>
      aPod(`${tenant}-${i}`, tenant)
        .gated(`${tenant}.tollgate.io/${gate}`)
        .createdAt(minutesAgo(10 - i)),
    );
  it('units of a higher-priority policy go first, whatever the tenant', () => {
    const policy = policyOf(
      aGatePolicy('ready', 'team-a'),
      aGatePolicy('ready', 'team-b').priority(10),
    );
    const order = admit(policy, [...pods('team-a', 2), ...pods('team-b', 2)]).verdicts.map(
      (v) => v.pod.metadata?.name,
    );
    assert.deepEqual(order, ['team-b-0', 'team-b-1', 'team-a-0', 'team-a-1']);
  });
  it('at one priority, tenants share by weight: team-b (weight 3) gets three for each of team-a', () => {
    const policy = policyOf(aGatePolicy('ready', 'team-a'), aGatePolicy('ready', 'team-b'));
    const order = admit(policy, [...pods('team-a', 2), ...pods('team-b', 6)]).verdicts.map(
      (v) => v.tenant.name,
    );
    assert.deepEqual(order.slice(0, 4).sort(), ['team-a', 'team-b', 'team-b', 'team-b']);
  });
  it('Budget holds the unit that does not fit; a budget of 4 pods releases 4', () => {
    const policy = policyOf(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }));
    const verdicts = admit(policy, pods('team-a', 6)).verdicts;
    assert.deepEqual(
      verdicts.map((v) => v.kind),
      ['Release', 'Release', 'Release', 'Release', 'Hold', 'Hold'],
    );
    assert.equal(verdicts[5]?.reason, 'waiting for Budget');
  });
  it('a scope that blocks one unit holds every later unit of that scope with the same reason', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-a').pacing({ batchSize: 1 }))
      .gatePolicy(aGatePolicy('ready', 'team-a'))
      .obj();
    assert.deepEqual(
      admit(policy, pods('team-a', 3)).verdicts.map((v) => `${v.kind}: ${v.reason}`),
      [
        'Release: conditions met',
        'Hold: queued: tenant batch of 1 done',
        'Hold: queued: tenant batch of 1 done',
      ],
    );
  });
  it('a unit taken from the buckets leaves them for the next pass', () => {
    const policy = policyOf(aGatePolicy('ready', 'team-b'));
    const admitted = admit(policy, pods('team-b', 2));
    assert.deepEqual(Object.keys(admitted.buckets).sort(), [
      'global',
      'policy:team-b/ready',
      'tenant:team-b',
    ]);
    assert.equal(admitted.served['team-b'], 2);
  });
  it('nextUnit takes queue heads by priority, then virtual time, then tenant name', () => {
    const policy = policyOf(aGatePolicy('ready', 'team-a'), aGatePolicy('ready', 'team-b'));
    const queues = tenantQueues(
      unitsOf(policy, objs([...pods('team-a', 1), ...pods('team-b', 1)])),
    );
    assert.equal(nextUnit(queues, { 'team-a': 0, 'team-b': 0 })?.tenant.name, 'team-a');
    assert.equal(nextUnit(queues, { 'team-a': 0, 'team-b': 0 })?.tenant.name, 'team-b');
    assert.equal(nextUnit(queues, {}), undefined);
  });
});

describe('phase 5, recordVerdicts: decisions and writes, in verdict order', () => {
  const policy = policyOf(aGatePolicy('ready', 'team-a'));
  const pod = aPod('p', 'team-a').gated('team-a.tollgate.io/ready').resourceVersion('7').obj();
  const owned = ownedGate(pod, policy) as Candidate['owned'];
  const base = { pod, tenant: owned.tenant, gatePolicy: owned.gatePolicy, inputs: [] };
  it('a Hold is recorded once per reason; the same reason again records nothing', () => {
    const hold: Verdict = {
      ...base,
      kind: 'Hold',
      reasonKey: 'Budget',
      reason: 'waiting for Budget',
    };
    const first = recordVerdicts(policy, [hold], new Map(), now);
    assert.deepEqual(
      first.decisions.map((d) => d.kind),
      ['Hold'],
    );
    assert.deepEqual(first.writes, []);
    const again = recordVerdicts(policy, [hold], first.holds, now + 1000);
    assert.deepEqual(again.decisions, []);
    assert.ok(again.holds.get('uid-team-a-p'));
  });
  it('an expiry-forced Release says so on its write, not only in its reason', () => {
    const release = (expiryForced: boolean): Verdict => ({
      ...base,
      kind: 'Release',
      reason: 'r',
      gate: owned,
      expiryForced,
    });
    const recorded = recordVerdicts(policy, [release(true)], new Map(), now);
    assert.deepEqual(recorded.writes[0]?.op, {
      type: 'removeGate',
      gate: 'team-a.tollgate.io/ready',
      gateIndex: 0,
      markReleased: { annotationsPresent: false },
    });
    assert.equal(recorded.writes[0]?.expiryForced, true);
    assert.equal(
      recordVerdicts(policy, [release(false)], new Map(), now).writes[0]?.expiryForced,
      false,
    );
    assert.deepEqual(recorded.acting, {
      'uid-team-a-p': { write: 'release', gate: 'team-a.tollgate.io/ready' },
    });
  });
  it('Review: an Expire record, then the Review decision with its annotation write', () => {
    const review: Verdict = { ...base, kind: 'Review', reason: 'r', expiredReason: 'e', mark: 'm' };
    const recorded = recordVerdicts(policy, [review], new Map(), now);
    assert.deepEqual(
      recorded.decisions.map((d) => [d.kind, d.reason, d.outcome.result]),
      [
        ['Expire', 'e', 'recorded'],
        ['Review', 'r', 'pending'],
      ],
    );
    assert.deepEqual(recorded.writes[0]?.op, {
      type: 'annotate',
      annotations: { 'tollgate.io/review': 'm' },
    });
    assert.equal(recorded.writes[0]?.decisionId, recorded.decisions[1]?.id);
  });
});

describe('planReleases: the phases in order', () => {
  it('the Release an expiry forces carries expiryForced on its write; one whose conditions hold does not', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-a'))
      .gatePolicy(
        aGatePolicy('late', 'team-a')
          .selector({ matchLabels: { k: 'late' } })
          .conditions({ type: 'Approved' })
          .expiry(60_000, 'Release'),
        aGatePolicy('ok', 'team-a')
          .selector({ matchLabels: { k: 'ok' } })
          .gate('team-a.tollgate.io/ok'),
      )
      .obj();
    const pods = objs([
      aPod('late', 'team-a')
        .gated('team-a.tollgate.io/late')
        .label('k', 'late')
        .createdAt(minutesAgo(5)),
      aPod('ok', 'team-a').gated('team-a.tollgate.io/ok').label('k', 'ok'),
    ]);
    const plan = planReleases(policy, snapshotOf(pods, []), emptyPlanState, now);
    assert.deepEqual(plan.writes.map((w) => [w.target.name, w.expiryForced]).sort(), [
      ['late', true],
      ['ok', false],
    ]);
  });
  it('earliestWakeup: the nearest future instant, at least 1 ms; none = only on change', () => {
    assert.equal(earliestWakeup(now, [now + 500, now + 100, Number.POSITIVE_INFINITY]), 100);
    assert.equal(earliestWakeup(now, [now - 10]), 1);
    assert.equal(earliestWakeup(now, []), undefined);
    assert.equal(earliestWakeup(now), undefined);
  });
  it('earliestWakeup: the nearest of several lists', () => {
    assert.equal(earliestWakeup(now, [now + 500], [], [now + 300, now + 900]), 300);
  });
  it('earliestWakeup: a pass holding 200,000 pods (a wake-up each) still finds its nearest', () => {
    const wakeups = Array.from({ length: 200_000 }, (_, i) => now + 1000 + (i % 7) * 10);
    assert.equal(earliestWakeup(now, wakeups), 1000);
  });
});
