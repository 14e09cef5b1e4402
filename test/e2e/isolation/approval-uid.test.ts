/**
 * Defect 9 of the fault-isolation issue (the uid part): an approval that names the pod's
 * uid cancels that pod and never a later pod of the same name (a re-created job, a
 * StatefulSet replica).
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/approval-uid.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { startWorld, type ApprovalSpec, type PolicyState, type World } from './world.ts';

const namespace = 'iso-approval';
const gate = 'ap.tollgate.io/hold';

const policy = (approvals: ApprovalSpec[]): PolicyState => ({
  tenants: [{ name: 'ap', namespaces: [namespace], gatePrefixes: ['ap.tollgate.io/'] }],
  gatePolicies: [
    {
      name: 'ap-hold',
      tenant: 'ap',
      gate,
      // Never met: the pods wait for a human decision.
      conditions: [
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'never' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
      expiry: { after: '1s', action: 'Review' },
      recheck: { initial: '300ms', max: '1s', maxAttempts: 100 },
    },
  ],
  approvals,
});

const cancel = (pod: string, uid: string): ApprovalSpec => ({
  name: `cancel-${pod}-${uid.slice(0, 8)}`,
  action: 'Cancel',
  target: { kind: 'Pod', namespace, name: pod, uid },
});

describe('approvals bound to a pod uid', () => {
  let world: World;

  before(async () => {
    world = await startWorld('iso-approval', policy([]));
    await world.createNamespaces(namespace);
    await world.grantCancel();
    await world.startTollgate();
  });

  after(async () => {
    await world?.stop();
  });

  const uidOf = async (name: string): Promise<string | undefined> => {
    try {
      return (await world.core.readNamespacedPod({ namespace, name })).metadata?.uid;
    } catch {
      return undefined;
    }
  };
  const inReview = async (name: string): Promise<boolean> => {
    const pod = await world.core.readNamespacedPod({ namespace, name });
    return pod.metadata?.annotations?.['tollgate.io/review'] !== undefined;
  };

  test('a Cancel approval with a uid cancels that pod, not the next pod of the same name', async () => {
    await world.createPods([aPod('job-0', namespace).gated(gate).obj()]);
    const first = await eventually('job-0 created', () => uidOf('job-0'));
    await eventually('job-0 in review', () => inReview('job-0'));
    await world.pushPolicy(policy([cancel('job-0', first)]), 'cancel job-0 by uid');
    await eventually('the first job-0 cancelled', async () => (await uidOf('job-0')) !== first, {
      timeoutMs: 30_000,
    });

    // The job is created again under the same name, and goes to review like any other.
    await eventually('job-0 re-created', async () => {
      if ((await uidOf('job-0')) === undefined)
        await world.createPods([aPod('job-0', namespace).gated(gate).obj()]);
      return uidOf('job-0');
    });
    const second = (await uidOf('job-0')) as string;
    assert.notEqual(second, first);
    await eventually('the new job-0 in review', () => inReview('job-0'), { timeoutMs: 30_000 });

    // A later approval for another pod proves passes with approvals ran after that.
    await world.createPods([aPod('other', namespace).gated(gate).obj()]);
    const other = await eventually('other created', () => uidOf('other'));
    await eventually('other in review', () => inReview('other'));
    await world.pushPolicy(
      policy([cancel('job-0', first), cancel('other', other)]),
      'cancel other by uid',
    );
    await eventually('other cancelled', async () => (await uidOf('other')) === undefined, {
      timeoutMs: 30_000,
    });
    assert.equal(await uidOf('job-0'), second, 'the re-created job-0 is not cancelled');
  });
});
