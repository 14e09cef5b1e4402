/**
 * Defect 9 of the fault-isolation issue: an approval binds to pods, never to names.
 * - One that names the pod's uid cancels that pod and never a later pod of the same name
 *   (a re-created job, a StatefulSet replica).
 * - One that names the pod without its uid, Cancel or Release, hits the pod created
 *   before the approval was merged (its commit time in Git), once: the pod re-created
 *   under that name afterwards is not hit.
 * - One that targets a group (pods a label selector picks) releases the pods created
 *   before it was merged, not a later pod with the same labels.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/approval-uid.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { setTimeout as sleep } from 'node:timers/promises';
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

/** Waits until the wall clock is past the second `at` falls in: Git and pods count whole seconds. */
const pastTheSecondOf = async (at: number): Promise<void> => {
  const next = (Math.floor(at / 1000) + 1) * 1000;
  while (Date.now() < next) await sleep(next - Date.now());
};

const byName = (action: 'Release' | 'Cancel', pod: string): ApprovalSpec => ({
  name: `${action.toLowerCase()}-${pod}`,
  action,
  target: { kind: 'Pod', namespace, name: pod },
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

  test('a name-only Cancel and Release hit the pod that existed when merged, never the pod re-created after', async () => {
    const gates = async (name: string) =>
      (await world.core.readNamespacedPod({ namespace, name })).spec?.schedulingGates ?? [];
    await world.createPods([aPod('web-0', namespace).gated(gate).obj()]);
    await world.createPods([aPod('rel-0', namespace).gated(gate).obj()]);
    const web = await eventually('web-0 created', () => uidOf('web-0'));
    await eventually('web-0 in review', () => inReview('web-0'));
    await eventually('rel-0 in review', () => inReview('rel-0'));
    const approvals = [byName('Cancel', 'web-0'), byName('Release', 'rel-0')];
    await world.pushPolicy(policy(approvals), 'cancel web-0, release rel-0, by name');
    const merged = Date.now();
    await eventually('the first web-0 cancelled', async () => (await uidOf('web-0')) !== web, {
      timeoutMs: 30_000,
    });
    await eventually('rel-0 released', async () => (await gates('rel-0')).length === 0, {
      timeoutMs: 30_000,
    });

    // Both are created again under the same names, after the approvals were merged.
    await pastTheSecondOf(merged);
    await world.core.deleteNamespacedPod({ namespace, name: 'rel-0', gracePeriodSeconds: 0 });
    await eventually('rel-0 gone', async () => (await uidOf('rel-0')) === undefined);
    await eventually('web-0 gone', async () => (await uidOf('web-0')) === undefined);
    await world.createPods(['web-0', 'rel-0'].map((n) => aPod(n, namespace).gated(gate).obj()));
    const again = { web: await eventually('web-0 again', () => uidOf('web-0')) };
    await eventually('the new web-0 in review', () => inReview('web-0'), { timeoutMs: 30_000 });
    await eventually('the new rel-0 in review', () => inReview('rel-0'), { timeoutMs: 30_000 });

    // A later approval for another pod proves passes with both approvals ran after that.
    await world.createPods([aPod('other-2', namespace).gated(gate).obj()]);
    await eventually('other-2 in review', () => inReview('other-2'));
    await world.pushPolicy(policy([...approvals, byName('Cancel', 'other-2')]), 'cancel other-2');
    await eventually('other-2 cancelled', async () => (await uidOf('other-2')) === undefined, {
      timeoutMs: 30_000,
    });
    assert.equal(await uidOf('web-0'), again.web, 'the re-created web-0 is not cancelled');
    assert.deepEqual(
      (await gates('rel-0')).map((g) => g.name),
      [gate],
      'the re-created rel-0 is not released',
    );
  });

  test('a Release of the pods a selector picks releases those created before it was merged', async () => {
    const batch = (name: string) => aPod(name, namespace).label('tier', 'batch').gated(gate).obj();
    await world.createPods([batch('b-0'), batch('b-1')]);
    await eventually(
      'b-0 and b-1 in review',
      async () => (await inReview('b-0')) && (await inReview('b-1')),
    );
    const selector: ApprovalSpec = {
      name: 'release-batch',
      action: 'Release',
      target: { kind: 'Pods', namespace, selector: { matchLabels: { tier: 'batch' } } },
    };
    await world.pushPolicy(policy([selector]), 'release the batch tier');
    const merged = Date.now();
    const gated = async (name: string) =>
      ((await world.core.readNamespacedPod({ namespace, name })).spec?.schedulingGates ?? [])
        .length > 0;
    await eventually(
      'b-0 and b-1 released',
      async () => !(await gated('b-0')) && !(await gated('b-1')),
      {
        timeoutMs: 30_000,
      },
    );
    await pastTheSecondOf(merged);
    await world.createPods([batch('b-2')]);
    await eventually('the later b-2 in review', () => inReview('b-2'), { timeoutMs: 30_000 });
    await world.createPods([aPod('other-3', namespace).gated(gate).obj()]);
    await eventually('other-3 in review', () => inReview('other-3'));
    await world.pushPolicy(policy([selector, byName('Cancel', 'other-3')]), 'cancel other-3');
    await eventually('other-3 cancelled', async () => (await uidOf('other-3')) === undefined, {
      timeoutMs: 30_000,
    });
    assert.equal(await gated('b-2'), true, 'b-2, labelled after the approval, is not released');
  });
});
