/**
 * Defect 2 of the fault-isolation issue, at a new leader term: a new leader must not plan
 * a tenant before its view has listed everything the tenant's budget depends on.
 *
 * The previous leader (the in-process gate-release stack, real parts) released a full
 * budget of pods, which run. The standby's view (the real informer, as `tollgate`) saw the
 * tenant's other pods, still held, but its pod watch lags (a wrapper holds its events
 * back), so it has not seen the running pods at all. The lifted condition (a ConfigMap,
 * watched apart) reaches it. Then the old leader's term ends and the standby's term starts
 * as `tollgate run` starts one (run/loops.ts beginLeaderTerm, then the gate-release loop
 * on the term's view). Its passes must not release into the budget the running pods fill:
 * the independent watcher (its own informer, admin identity) sees every overshoot. Once
 * the watch is let go and one running pod finishes, exactly one held pod is released.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/new-term-budget.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { holdable, type HoldableSource } from '../../support/holdable-source.ts';
import { recordingAudit } from '../../support/recording-audit.ts';
import { createClusterView, type LiveClusterView } from '../../../src/cluster/view.ts';
import { createResourceSource } from '../../../src/cluster/source.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import { boundedPodReader, podReader } from '../../../src/cluster/client.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { PriorityDispatcher } from '../../../src/dispatch/queue.ts';
import { startGateReleaseLoop, type GateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { beginLeaderTerm } from '../../../src/run/loops.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const namespace = 'iso-term';
const prefix = 'nt.tollgate.io/';
const gates = { now: `${prefix}now`, later: `${prefix}later` };
const budget = 3;

const policy: PolicyState = {
  tenants: [
    { name: 'nt', namespaces: [namespace], gatePrefixes: [prefix], budget: { pods: budget } },
  ],
  gatePolicies: [
    { name: 'nt-now', tenant: 'nt', gate: gates.now, conditions: [{ type: 'Budget' }] },
    {
      name: 'nt-later',
      tenant: 'nt',
      gate: gates.later,
      conditions: [
        { type: 'Budget' },
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'go' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
      recheck: { initial: '300ms', max: '1s', maxAttempts: 1000 },
    },
  ],
};

describe('a new leader term with a full budget its view has not seen yet', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;
  let standby: LiveClusterView | undefined;
  let loop: GateReleaseLoop | undefined;
  let term: { stop(): void } | undefined;
  let dispatcher: PriorityDispatcher | undefined;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-term', policy, {
      namespaces: [namespace],
      budgets: () => ({ nt: { namespaces: [namespace], ourPrefix: prefix, pods: budget } }),
      finish: [],
      startTollgate: false,
    }));
  });

  after(async () => {
    await loop?.stop();
    await dispatcher?.close();
    term?.stop();
    await standby?.stop();
    await stopWatchedWorld({ world, watcher, finisher });
  });

  test('the new term releases nothing into the full budget, then exactly one pod per freed slot', async () => {
    const leader = await world.startTollgate('tollgate-1');
    const compiled = leader.policies.current();
    assert.ok(compiled, 'the policy is in force');

    // The standby's view, as `tollgate`, scoped to the tenant's namespace; its pod watch can lag.
    const kubeConfig = world.cp.kubeConfig('tollgate');
    const podSources: HoldableSource[] = [];
    standby = createClusterView({
      kubeConfig,
      namespaces: [namespace],
      sourceFactory: (target) => {
        const source = createResourceSource(kubeConfig, target);
        if (target.kind !== 'Pod') return source;
        const wrapped = holdable(source);
        podSources.push(wrapped);
        return wrapped;
      },
    });
    standby.watchObjects([{ apiVersion: 'v1', kind: 'ConfigMap', namespace, name: 'go' }]);
    standby.start();
    await standby.whenSynced(AbortSignal.timeout(60_000));

    // Held pods both replicas see: their condition is not met yet.
    const held = Array.from({ length: 2 * budget }, (_, i) => `held-${i}`);
    await world.createPods(held.map((n) => aPod(n, namespace).gated(gates.later).obj()));
    await eventually('the standby sees the held pods', async () =>
      held.every((n) => standby?.pod(namespace, n) !== undefined),
    );
    await eventually('the leader holds them', async () =>
      held.every((n) => watcher.gates(namespace, n)?.join() === gates.later),
    );

    // From here the standby's pod watch lags: it never sees the next pods.
    for (const source of podSources) source.hold();
    const running = Array.from({ length: budget }, (_, i) => `running-${i}`);
    await world.createPods(running.map((n) => aPod(n, namespace).gated(gates.now).obj()));
    await eventually(
      'the leader releases a full budget, which runs',
      async () => {
        const pods = await world.core.listNamespacedPod({ namespace });
        const up = pods.items.filter(
          (p) => running.includes(p.metadata?.name ?? '') && p.status?.phase === 'Running',
        );
        return up.length === budget;
      },
      { timeoutMs: 60_000 },
    );
    // The condition of the held pods is met now; the budget is full, so they stay held.
    await world.core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: 'go' }, data: { ready: 'true' } },
    });
    await eventually('the standby sees the condition met', async () =>
      standby?.object({ apiVersion: 'v1', kind: 'ConfigMap', namespace, name: 'go' }),
    );
    await leader.stop();
    assert.ok(
      held.every((n) => watcher.releases(namespace, n) === 0),
      'the old leader released none of the held pods',
    );
    assert.ok(
      running.every((n) => standby?.pod(namespace, n) === undefined),
      'the standby has not seen the running pods',
    );

    // The standby's term starts as `tollgate run` starts one.
    const guards = {
      gate: new StaleGuard({ policy: compiled.staleness, loop: 'gate-release', restored: false }),
      resize: new StaleGuard({ policy: compiled.staleness, loop: 'resize', restored: false }),
    };
    term = beginLeaderTerm({ guards, view: standby, kubeConfig }, silentLogger);
    const execute = createWriteExecutor(kubeConfig);
    dispatcher = new PriorityDispatcher({
      executor: (request, signal) => execute(request, signal),
    });
    loop = startGateReleaseLoop({
      view: standby,
      dispatcher,
      audit: recordingAudit().audit,
      policy: () => compiled,
      staleGuard: guards.gate,
      cacheLagMs: () => 0,
      readPod: boundedPodReader(podReader(kubeConfig), () => compiled.staleness.liveReads),
      syncWaitMs: 300,
      debounceMs: 50,
    });
    // Passes run and run again while the watch lags. How long it lags only bounds how soon
    // a term that does not wait for its view would show its overshoot; nothing is asserted on time.
    const passes = async (count: number) => {
      for (let i = 0; i < count; i++) await (await loop!.pass()).settled;
    };
    await passes(5);
    await eventually(
      'a pass that did not wait for the view released (or the lag ends)',
      async () => held.some((n) => watcher.releases(namespace, n) > 0),
      { timeoutMs: 5_000 },
    ).catch(() => undefined);
    assert.deepEqual(watcher.violations, [], 'nothing released into the full budget');
    assert.ok(
      held.every((n) => watcher.releases(namespace, n) === 0),
      'no held pod released while the view lags',
    );

    for (const source of podSources) source.release();
    await eventually('the standby sees the running pods', async () =>
      running.every((n) => standby?.pod(namespace, n) !== undefined),
    );
    // One slot frees: exactly one held pod may go, and only after that.
    await world.core.patchNamespacedPodStatus(
      { namespace, name: 'running-0', body: { status: { phase: 'Succeeded' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const released = () => held.filter((n) => watcher.releases(namespace, n) === 1);
    await eventually(
      'one held pod released into the freed slot',
      async () => released().length >= 1,
      {
        timeoutMs: 60_000,
      },
    );
    await passes(3);
    assert.deepEqual(watcher.violations, []);
    assert.equal(released().length, 1);
    assert.ok((watcher.peak.get('nt') ?? 0) <= budget);
  });
});
