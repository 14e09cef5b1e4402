/**
 * What a reviewed policy commit can do to a whole GatePolicy, on the real control plane
 * (simulated kubelet, real Git server, tollgate's gate-release stack as the `tollgate`
 * identity), each seen by an independent watcher and read back from the audit trail:
 * - Schedule: pods are held outside the policy's window and released inside it. The
 *   loop's clock is injected and set to fixed instants (a winter day in Europe/Berlin),
 *   so the test depends neither on today's date nor on how long it runs.
 * - suspend: nothing is released while `suspend: true`; a commit setting it back releases.
 * - drain: a commit setting `drain: true` cancels (deletes) every pod the policy still
 *   gates, with a Cancel record each; a pod it released before runs on.
 *
 * Run: node --test --test-concurrency=1 test/e2e/opt-in/policy-controls.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, stringify } from 'yaml';
import { aPod } from '../../builders/pod.ts';
import { auditRecords } from '../../support/audit-records.ts';
import { eventually, pastTheSecondOf } from '../../support/eventually.ts';
import { pushTree } from '../../support/git-server.ts';
import type { Finisher } from '../gate-release/harness.ts';
import type { Clock } from '../../../src/lib/clock.ts';
import type { GateReleaseStack } from '../../support/gate-release-stack.ts';
import {
  policyFiles,
  startWatchedWorld,
  stopWatchedWorld,
  type PolicyState,
  type World,
} from '../isolation/world.ts';
import type { IsolationWatcher } from '../isolation/watcher.ts';

const namespace = 'pc';
const prefix = 'pc.tollgate.io/';
const nightly = `${prefix}nightly`;
const paused = `${prefix}paused`;
const drained = `${prefix}drained`;
/** Between 01:00 and 05:00 Berlin time. */
const window = { cron: '* 1-4 * * *', timeZone: 'Europe/Berlin' };
const noonInBerlin = Date.parse('2030-01-15T12:00:00+01:00');
const halfPastOneNextNight = Date.parse('2030-01-16T01:30:00+01:00');

/** Set to a fixed instant; from there it runs on with the process's monotonic time. */
class SetClock implements Clock {
  #base: number;
  #setAt = performance.now();
  constructor(at: number) {
    this.#base = at;
  }
  set(at: number): void {
    this.#base = at;
    this.#setAt = performance.now();
  }
  now(): number {
    return this.#base + (performance.now() - this.#setAt);
  }
}

const state: PolicyState = {
  tenants: [{ name: 'pc', namespaces: [namespace], gatePrefixes: [prefix], budget: { pods: 50 } }],
  gatePolicies: [
    {
      name: 'nightly',
      tenant: 'pc',
      gate: nightly,
      conditions: [{ type: 'Budget' }, { type: 'Schedule', windows: [window] }],
    },
    { name: 'paused', tenant: 'pc', gate: paused },
    { name: 'drained', tenant: 'pc', gate: drained, conditions: [{ type: 'Approved' }] },
  ],
};
/** Merged in a later second than drain-early was created: an Approval by name reaches pods created before it. */
const releaseEarly: PolicyState = {
  ...state,
  approvals: [
    {
      name: 'release-early',
      action: 'Release',
      target: { kind: 'Pod', namespace, name: 'drain-early' },
    },
  ],
};

/** The policy files for `policy`, with `spec` fields set on named GatePolicies. */
function withSpec(
  extra: Record<string, Record<string, unknown>>,
  policy = state,
): Record<string, string | null> {
  const files = policyFiles(policy);
  for (const [name, fields] of Object.entries(extra)) {
    const document = parse(files[`gates/${name}.yaml`] as string) as { spec: object };
    document.spec = { ...document.spec, ...fields };
    files[`gates/${name}.yaml`] = stringify(document);
  }
  return files;
}

describe('a reviewed commit holds, schedules or drains a whole GatePolicy', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;
  let stack: GateReleaseStack;
  const clock = new SetClock(noonInBerlin);

  const push = async (files: Record<string, string | null>, message: string) => {
    const commit = await pushTree(world.git, world.policyUrl, files, { message, replace: true });
    await eventually(`policy ${message} applied`, async () =>
      stack.policies.current()?.commit === commit ? true : undefined,
    );
  };
  const records = () => auditRecords(world.auditUrl, world.git.token);
  const heldFor = async (names: readonly string[], reason: RegExp) =>
    eventually(`a Hold record (${reason}) for ${names.join(', ')}`, async () => {
      const holds = (await records()).filter((r) => r.kind === 'Hold' && reason.test(r.reason));
      return names.every((n) => holds.some((r) => r.target.name === n)) ? holds : undefined;
    });
  const released = (names: readonly string[]) =>
    eventually(
      `${names.join(', ')} released once each`,
      async () => names.every((n) => watcher.releases(namespace, n) === 1),
      {
        timeoutMs: 60_000,
        describe: () => names.map((n) => `${n}:${watcher.releases(namespace, n)}`).join(' '),
      },
    );
  const stillGated = (names: readonly string[]) => {
    for (const n of names) assert.equal(watcher.releases(namespace, n), 0, `${n} stays gated`);
  };

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('policy-controls', state, {
      namespaces: [namespace],
      budgets: () => ({ pc: { namespaces: [namespace], ourPrefix: prefix, pods: 50 } }),
      finish: [],
      startTollgate: false,
    }));
    await world.grantCancel();
    const files = withSpec({ paused: { suspend: true } });
    await pushTree(world.git, world.policyUrl, files, { message: 'suspend paused', replace: true });
    stack = await world.startTollgate('tollgate-1', undefined, clock);
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  test('Schedule: held outside the window at noon, released inside it the next night', async () => {
    const names = ['night-0', 'night-1', 'night-2'];
    await world.createPods(names.map((n) => aPod(n, namespace).gated(nightly).obj()));
    const holds = await heldFor(names, /Schedule/);
    const opensAt = (holds[0]!.inputs.find((i) => i.condition === 'Schedule')?.value ?? {}) as {
      opensAt?: string;
    };
    assert.equal(opensAt.opensAt, '2030-01-16T00:00:00.000Z', 'the window opens at 01:00 Berlin');
    await stack.loop.pass();
    stillGated(names);

    clock.set(halfPastOneNextNight);
    await stack.loop.pass();
    await released(names);
    const releases = (await records()).filter(
      (r) => r.kind === 'Release' && names.includes(r.target.name),
    );
    assert.equal(releases.length, names.length);
    for (const r of releases)
      assert.ok(r.at >= halfPastOneNextNight, `${r.target.name} at ${r.at}`);
    assert.deepEqual(watcher.violations, []);
  });

  test('suspend: nothing released while suspended; released once a commit resumes it', async () => {
    const names = ['paused-0', 'paused-1'];
    await world.createPods(names.map((n) => aPod(n, namespace).gated(paused).obj()));
    await heldFor(names, /GatePolicy paused is suspended \(spec\.suspend\)/);
    await stack.loop.pass();
    stillGated(names);

    await push(withSpec({}), 'resume paused');
    await released(names);
  });

  test('drain: what waits is cancelled with a record, what was released runs on', async () => {
    await world.createPods([aPod('drain-early', namespace).gated(drained).obj()]);
    // A name-only approval reaches a pod created in an earlier second than its merge.
    const early = await world.core.readNamespacedPod({ namespace, name: 'drain-early' });
    await pastTheSecondOf(new Date(early.metadata?.creationTimestamp ?? Date.now()).getTime());
    await push(withSpec({}, releaseEarly), 'approve drain-early');
    await released(['drain-early']);
    const waiting = ['drain-0', 'drain-1'];
    await world.createPods(waiting.map((n) => aPod(n, namespace).gated(drained).obj()));
    await heldFor(waiting, /Approved/);

    await push(withSpec({ drained: { drain: true } }, releaseEarly), 'drain drained');
    // A Cancel is a write (the pod's delete): an intent, then an outcome once the API
    // server answered. Both are waited for; reading the trail once the intents were in
    // could meet the outcomes too, or not yet (CI, under load: four records, two each).
    const cancels = await eventually('a Cancel intent and outcome per waiting pod', async () => {
      const found = (await records()).filter(
        (r) =>
          r.kind === 'Cancel' && /GatePolicy drained is drained \(spec\.drain\)/.test(r.reason),
      );
      return found.filter((r) => r.phase === 'outcome').length >= waiting.length
        ? found
        : undefined;
    });
    const names = (phase: string) =>
      cancels
        .filter((r) => r.phase === phase)
        .map((r) => r.target.name)
        .sort();
    assert.deepEqual(names('intent'), waiting, 'one Cancel intent per waiting pod');
    assert.deepEqual(names('outcome'), waiting, 'one Cancel outcome per waiting pod');
    assert.equal(cancels.length, 2 * waiting.length, JSON.stringify(cancels));
    for (const r of cancels.filter((c) => c.phase === 'outcome'))
      assert.equal(r.outcome.result, 'succeeded', JSON.stringify(r));
    await eventually('the waiting pods are deleted', async () => {
      const pods = await world.core.listNamespacedPod({ namespace });
      const left = new Set(pods.items.map((p) => p.metadata?.name));
      return waiting.every((n) => !left.has(n));
    });
    const stillThere = await world.core.readNamespacedPod({ namespace, name: 'drain-early' });
    assert.equal(stillThere.metadata?.deletionTimestamp, undefined, 'the released pod runs on');
    stillGated(waiting);
  });
});
