/**
 * Which pods an approval reaches: bound to a uid, or to pods created before the approval
 * was merged (a name-only approval hits the pod that existed then, once; a later pod of
 * the same name is not hit), and group targets (a selector, a gang, a whole GatePolicy).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  approvalHits,
  approvalTargets,
  formatApprovalHits,
  groupApprovalsHittingNothing,
} from '../../../src/decide/approvals.ts';
import { approvalFor } from '../../../src/decide/conditions.ts';
import type { Approval } from '../../../src/policy/model.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, anApproval, aPolicy, aTenant } from '../../builders/policy.ts';

const merged = Date.UTC(2026, 10, 29, 9, 0, 0);
const before = merged - 60_000;
const after = merged + 1_000;
const trainer = aGatePolicy('trainer', 'team-a').obj();
const other = aGatePolicy('other', 'team-a').obj();
const uid = '3f1c2b9e-7a64-4d0e-9b1a-2c5e8f7d6a10';
const byName = { kind: 'Pod' as const, namespace: 'team-a', name: 'job-0' };
const selector = { matchLabels: { tier: 'batch' }, matchExpressions: [] };
const gang = {
  kind: 'Gang' as const,
  gatePolicy: 'trainer',
  namespace: 'team-a',
  groupLabel: 'gang',
  gang: 'run-1',
};
const job = (created: number) => aPod('job-0', 'team-a').createdAt(created);
const member = (name: string, created: number) =>
  aPod(name, 'team-a').label('gang', 'run-1').label('tier', 'batch').createdAt(created);

test('approvalTargets: an approval binds to pods, never to names', async (t) => {
  const cases: {
    name: string;
    approval: Approval;
    pod: ReturnType<typeof aPod>;
    gatePolicy?: typeof trainer;
    hits: boolean;
  }[] = [
    {
      name: 'a uid approval hits the pod with that uid',
      approval: anApproval('Cancel', { ...byName, uid }, merged),
      pod: job(after).uid(uid),
      hits: true,
    },
    {
      name: 'a uid approval misses another pod of the same name, even one created before',
      approval: anApproval('Cancel', { ...byName, uid }, merged),
      pod: job(before).uid('0b7e1c2d-0000-4000-8000-000000000001'),
      hits: false,
    },
    {
      name: 'a name-only approval hits the pod created before it was merged',
      approval: anApproval('Cancel', byName, merged),
      pod: job(before),
      hits: true,
    },
    {
      name: 'a name-only approval hits a pod created the second before it was merged',
      approval: anApproval('Cancel', byName, merged),
      pod: job(merged - 1_000),
      hits: true,
    },
    {
      name: 'a name-only approval misses a pod created in the second it was merged (it may be newer)',
      approval: anApproval('Cancel', byName, merged),
      pod: job(merged),
      hits: false,
    },
    {
      name: 'a name-only approval read from a folder mid-second misses a pod created in that second',
      approval: anApproval('Release', byName, merged + 700),
      pod: job(merged),
      hits: false,
    },
    {
      name: 'a name-only approval read from a folder mid-second hits a pod of the second before',
      approval: anApproval('Release', byName, merged + 700),
      pod: job(merged - 1_000),
      hits: true,
    },
    {
      name: 'a name-only approval misses a pod of the same name created after it was merged',
      approval: anApproval('Release', byName, merged),
      pod: job(after),
      hits: false,
    },
    {
      name: 'a name-only approval without a merge time matches by name',
      approval: anApproval('Cancel', byName),
      pod: job(after),
      hits: true,
    },
    {
      name: 'a selector approval hits a labelled pod of its namespace created before',
      approval: anApproval('Release', { kind: 'Pods', namespace: 'team-a', selector }, merged),
      pod: member('m-1', before),
      hits: true,
    },
    {
      name: 'a selector approval misses a labelled pod created in the second it was merged',
      approval: anApproval('Release', { kind: 'Pods', namespace: 'team-a', selector }, merged),
      pod: member('m-1', merged),
      hits: false,
    },
    {
      name: 'a selector approval misses a pod its selector does not pick',
      approval: anApproval('Release', { kind: 'Pods', namespace: 'team-a', selector }, merged),
      pod: aPod('m-2', 'team-a').createdAt(before),
      hits: false,
    },
    {
      name: 'a selector approval misses a labelled pod created after',
      approval: anApproval('Release', { kind: 'Pods', namespace: 'team-a', selector }, merged),
      pod: member('m-3', after),
      hits: false,
    },
    {
      name: 'a selector approval misses a pod of another namespace',
      approval: anApproval('Release', { kind: 'Pods', namespace: 'team-b', selector }, merged),
      pod: member('m-4', before),
      hits: false,
    },
    {
      name: 'a gang approval hits a member gated by its GatePolicy',
      approval: anApproval('Cancel', gang, merged),
      pod: member('m-5', before),
      gatePolicy: trainer,
      hits: true,
    },
    {
      name: 'a gang approval misses a pod with the gang label gated by another GatePolicy',
      approval: anApproval('Cancel', gang, merged),
      pod: member('m-6', before),
      gatePolicy: other,
      hits: false,
    },
    {
      name: 'a gang approval misses a member created after',
      approval: anApproval('Cancel', gang, merged),
      pod: member('m-7', after),
      gatePolicy: trainer,
      hits: false,
    },
    {
      name: 'a GatePolicy approval hits a pod that policy gates',
      approval: anApproval('Release', { kind: 'GatePolicy', name: 'trainer' }, merged),
      pod: aPod('x', 'team-a').createdAt(before),
      gatePolicy: trainer,
      hits: true,
    },
    {
      name: 'a GatePolicy approval misses a pod created in the second it was merged',
      approval: anApproval('Release', { kind: 'GatePolicy', name: 'trainer' }, merged),
      pod: aPod('x', 'team-a').createdAt(merged),
      gatePolicy: trainer,
      hits: false,
    },
    {
      name: 'a GatePolicy approval misses a pod another policy gates',
      approval: anApproval('Release', { kind: 'GatePolicy', name: 'trainer' }, merged),
      pod: aPod('x', 'team-a').createdAt(before),
      gatePolicy: other,
      hits: false,
    },
    {
      name: 'a group approval without a merge time reaches nothing',
      approval: anApproval('Release', { kind: 'GatePolicy', name: 'trainer' }),
      pod: aPod('x', 'team-a').createdAt(before),
      gatePolicy: trainer,
      hits: false,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () =>
      assert.equal(approvalTargets(c.approval, c.pod.obj(), c.gatePolicy), c.hits),
    );
  }
});

test('approvalFor: only an approval of that action, in force at now', () => {
  const cancel = anApproval('Cancel', byName, merged);
  const expired = { ...anApproval('Release', byName, merged), expiresAt: merged + 10_000 };
  const pod = job(before).obj();
  assert.equal(approvalFor([cancel], pod, 'Release', after), undefined);
  assert.equal(approvalFor([cancel], pod, 'Cancel', after), cancel);
  assert.equal(approvalFor([expired], pod, 'Release', merged + 5_000), expired);
  assert.equal(approvalFor([expired], pod, 'Release', merged + 10_000), undefined);
});

test('approvalHits: the pods tollgate holds that each approval would hit, for tollgate plan', () => {
  const gated = 'team-a.tollgate.io/ready';
  const policy = aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(aGatePolicy('ready', 'team-a'))
    .approval(
      anApproval('Cancel', byName, merged),
      { ...anApproval('Release', { kind: 'GatePolicy', name: 'ready' }, merged), name: 'all' },
      { ...anApproval('Release', byName, merged), name: 'old', expiresAt: merged },
    )
    .obj();
  const pods = [
    job(before).uid('u-job').gated(gated).obj(),
    aPod('later', 'team-a').uid('u-later').gated(gated).createdAt(after).obj(),
    aPod('free', 'team-a').uid('u-free').createdAt(before).obj(),
  ];
  const hits = approvalHits(policy, pods, after);
  assert.deepEqual(hits, [
    {
      approval: 'cancel-pod',
      action: 'Cancel',
      file: 'approvals/cancel-pod.yaml',
      pods: [{ namespace: 'team-a', name: 'job-0', uid: 'u-job' }],
    },
    {
      approval: 'all',
      action: 'Release',
      file: 'approvals/release-gatepolicy.yaml',
      pods: [{ namespace: 'team-a', name: 'job-0', uid: 'u-job' }],
    },
    {
      approval: 'old',
      action: 'Release',
      file: 'approvals/release-pod.yaml',
      pods: [],
      note: 'expired',
    },
  ]);
  assert.equal(
    formatApprovalHits(hits, false),
    [
      'Approvals:',
      '  cancel-pod (Cancel, approvals/cancel-pod.yaml): hits team-a/job-0 (uid u-job)',
      '  all (Release, approvals/release-gatepolicy.yaml): hits team-a/job-0 (uid u-job)',
      '  old (Release, approvals/release-pod.yaml): expired: hits no pod',
      '',
    ].join('\n'),
  );
  assert.equal(formatApprovalHits([], false), '');
});

test('plan names the pods an approval misses only because they were created in the second it was merged', () => {
  const gated = 'team-a.tollgate.io/ready';
  const policy = aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(aGatePolicy('ready', 'team-a'))
    .approval(anApproval('Cancel', byName, merged))
    .obj();
  const pods = [
    job(merged).uid('u-same-second').gated(gated).obj(),
    aPod('job-1', 'team-a').uid('u-other').gated(gated).createdAt(merged).obj(),
  ];
  const hits = approvalHits(policy, pods, after);
  assert.deepEqual(hits, [
    {
      approval: 'cancel-pod',
      action: 'Cancel',
      file: 'approvals/cancel-pod.yaml',
      pods: [],
      mergeSecond: [{ namespace: 'team-a', name: 'job-0', uid: 'u-same-second' }],
    },
  ]);
  assert.equal(
    formatApprovalHits(hits, false),
    [
      'Approvals:',
      '  cancel-pod (Cancel, approvals/cancel-pod.yaml): hits no pod tollgate holds; does not hit team-a/job-0 (uid u-same-second): created in the second the approval was merged, it may be newer than the approval (name its uid to approve it)',
      '',
    ].join('\n'),
  );
});

test('plan warns about a group approval in force that hits no pod tollgate holds', async (t) => {
  const gated = 'team-a.tollgate.io/ready';
  const rows = [
    {
      name: 'a selector no held pod carries',
      approval: anApproval('Release', { kind: 'Pods', namespace: 'team-a', selector }, merged),
      warned: /targets the pods of namespace team-a its label selector picks but hits no pod/,
    },
    {
      name: 'a gang value no pod has',
      approval: anApproval('Cancel', { ...gang, gang: 'run-9' }, merged),
      warned: /targets gang "run-9" of GatePolicy trainer in namespace team-a but hits no pod/,
    },
    {
      name: 'a GatePolicy whose pods were all created after the merge',
      approval: anApproval('Release', { kind: 'GatePolicy', name: 'ready' }, before - 1),
      warned:
        /targets every pod GatePolicy ready gates but hits no pod .*created before it was merged/,
    },
    {
      name: 'a group approval that hits a pod: no warning',
      approval: anApproval('Release', { kind: 'GatePolicy', name: 'ready' }, merged),
      warned: undefined,
    },
    {
      name: 'an expired group approval: the table says so, no warning',
      approval: { ...anApproval('Release', { ...gang, gang: 'run-9' }, merged), expiresAt: merged },
      warned: undefined,
    },
    {
      name: 'a Pod target that hits nothing: the table says so, no warning',
      approval: anApproval('Cancel', { ...byName, name: 'gone' }, merged),
      warned: undefined,
    },
  ];
  for (const row of rows) {
    await t.test(row.name, () => {
      const policy = aPolicy()
        .tenant(aTenant('team-a'))
        .gatePolicy(aGatePolicy('ready', 'team-a'))
        .approval(row.approval)
        .obj();
      const pods = [job(before).uid('u-job').gated(gated).obj()];
      const warnings = groupApprovalsHittingNothing(policy, approvalHits(policy, pods, after));
      if (row.warned === undefined) assert.deepEqual(warnings, []);
      else {
        assert.equal(warnings.length, 1);
        assert.match(warnings[0] ?? '', row.warned);
      }
    });
  }
});
