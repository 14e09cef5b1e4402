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
import { eventually, pastTheSecondOf } from '../../support/eventually.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { pushTree } from '../../support/git-server.ts';
import {
  policyFiles,
  startWorld,
  type ApprovalSpec,
  type PolicyState,
  type World,
} from './world.ts';

const run = promisify(execFile);

const namespace = 'iso-approval';
const gate = 'ap.tollgate.io/hold';
const gangGate = 'ap.tollgate.io/gang';

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
    {
      // Gangs that never complete (three members announced, two created).
      name: 'ap-gang',
      tenant: 'ap',
      gate: gangGate,
      conditions: [{ type: 'GangComplete', groupLabel: 'gang', sizeAnnotation: 'ap.example/size' }],
      recheck: { initial: '300ms', max: '1s', maxAttempts: 100 },
    },
  ],
  approvals,
});

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

  /** `tollgate plan` as a reviewer runs it (their own read access), against this cluster; its stdout (exit 0 or 3). */
  const planCli = async (args: string[]): Promise<string> => {
    try {
      const argv = ['src/cli/main.ts', 'plan', '--kubeconfig', world.cp.adminKubeconfig, ...args];
      const env = { ...process.env, TOLLGATE_GIT_TOKEN: world.git.token };
      return (await run('node', argv, { env })).stdout;
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      if (e.code === 3) return e.stdout;
      throw new Error(`tollgate plan exited ${e.code}: ${e.stderr}`, { cause: error });
    }
  };

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

  /** Proves passes under `approvals` ran: a new pod goes to review, then an added Cancel of it takes effect. */
  const passesRanUnder = async (approvals: ApprovalSpec[], probe: string): Promise<void> => {
    await world.createPods([aPod(probe, namespace).gated(gate).obj()]);
    await eventually(`${probe} in review`, () => inReview(probe));
    await world.pushPolicy(policy([...approvals, byName('Cancel', probe)]), `cancel ${probe}`);
    await eventually(`${probe} cancelled`, async () => (await uidOf(probe)) === undefined, {
      timeoutMs: 30_000,
    });
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
    await passesRanUnder(approvals, 'other-2');
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
    // Proposed on a branch first: tollgate plan names the pods the approval would hit.
    await pushTree(world.git, world.policyUrl, policyFiles(policy([selector])), {
      message: 'proposal: release the batch tier',
      branch: 'proposal',
    });
    const planned = await planCli([
      '--policy',
      world.policyUrl,
      '--ref',
      'proposal',
      '--base',
      'main',
    ]);
    const uidB0 = await uidOf('b-0');
    assert.match(
      planned,
      new RegExp(
        `release-batch \\(Release, approvals/release-batch\\.yaml\\): hits ${namespace}/b-0 \\(uid ${uidB0}\\), ${namespace}/b-1 `,
      ),
    );
    // A selector with a typo hits no pod: plan warns (in -o json: `warnings`).
    const typo: ApprovalSpec = {
      ...selector,
      name: 'release-typo',
      target: { kind: 'Pods', namespace, selector: { matchLabels: { tier: 'bacth' } } },
    };
    await pushTree(world.git, world.policyUrl, policyFiles(policy([typo])), {
      message: 'proposal: a typo in the selector',
      branch: 'proposal-typo',
    });
    const typoPlan = JSON.parse(
      await planCli([
        '--policy',
        world.policyUrl,
        '--ref',
        'proposal-typo',
        '--base',
        'main',
        '-o',
        'json',
      ]),
    ) as { warnings?: string[] };
    assert.match(
      (typoPlan.warnings ?? []).join('\n'),
      /approval "release-typo" \(Release, approvals\/release-typo\.yaml\) targets the pods of namespace \S+ its label selector picks but hits no pod tollgate holds/,
    );
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
    await passesRanUnder([selector], 'other-3');
    assert.equal(await gated('b-2'), true, 'b-2, labelled after the approval, is not released');
  });

  test('a Cancel of a gang cancels its members created before it was merged, not a later one', async () => {
    const member = (name: string) =>
      aPod(name, namespace)
        .label('gang', 'run-1')
        .annotate('ap.example/size', '3')
        .gated(gangGate)
        .obj();
    await world.createPods([member('g-0'), member('g-1')]);
    await eventually('g-0 and g-1 created', async () => (await uidOf('g-0')) && uidOf('g-1'));
    // Merged in a later second than they were created: a pod created in the merge's own
    // second may be newer than the approval, and is not reached.
    await pastTheSecondOf(Date.now());
    const gang: ApprovalSpec = {
      name: 'cancel-run-1',
      action: 'Cancel',
      target: { kind: 'Gang', gatePolicy: 'ap-gang', namespace, gang: 'run-1' },
    };
    await world.pushPolicy(policy([gang]), 'cancel gang run-1');
    const merged = Date.now();
    await eventually(
      'g-0 and g-1 cancelled',
      async () => (await uidOf('g-0')) === undefined && (await uidOf('g-1')) === undefined,
      { timeoutMs: 30_000 },
    );
    await pastTheSecondOf(merged);
    await world.createPods([member('g-2')]);
    const g2 = await eventually('g-2 created', () => uidOf('g-2'));
    await passesRanUnder([gang], 'other-4');
    assert.equal(await uidOf('g-2'), g2, 'g-2, created after the approval, is not cancelled');
  });
});
