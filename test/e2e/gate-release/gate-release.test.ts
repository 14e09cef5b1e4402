/**
 * The gate-release loop end to end: the real kube-apiserver, kube-scheduler and
 * controller-manager, the simulated kubelet, a real Git server for policy and audit,
 * and the controller in a child process (test/e2e/gate-release/controller.ts).
 *
 * Independent checks: `BudgetWatcher` keeps its own watch of every pod and checks the
 * budgets and max-in-flight after every event; the audit branch is read back from Git
 * to count one successful release per pod.
 *
 * Run: node --test --test-concurrency=1 test/e2e/gate-release/gate-release.test.ts
 * Figures (throughput, dwell percentiles) are printed as `# gate-release:` lines.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { creatable, eventually } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { gates, limitsInForce, ns, policyFiles, type RepoState } from './policy-repo.ts';
import {
  BudgetWatcher,
  Finisher,
  metricValue,
  percentile,
  startController,
  type ControllerProcess,
  type TenantLimits,
} from './harness.ts';

const foreignGate = 'other.example.com/hold';
const warmImage = 'registry.example/big-model:v3';
/** 1000 per tenant is the proof; a smaller TOLLGATE_E2E_GATE_PODS is for a quick local look. */
const PODS_PER_TENANT = Number(process.env.TOLLGATE_E2E_GATE_PODS ?? 1000);

describe('gate release on the real control plane', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;
  let git: GitServer;
  let policyUrl: string;
  let auditUrl: string;
  let controller: ControllerProcess | undefined;
  let watcher: BudgetWatcher;
  let finisher: Finisher;
  const work = mkdtempSync(join(tmpdir(), 'tollgate-gate-release-'));
  let budgets: RepoState = { alphaPods: 50, alphaCpu: '10' };
  const limits = (): Record<string, TenantLimits> => ({
    alpha: {
      namespaces: [ns.alpha],
      gatePrefix: 'alpha.tollgate.io/',
      pods: budgets.alphaPods,
      cpuMillis: Number(budgets.alphaCpu) * 1000,
      maxInFlight: limitsInForce.alpha.maxInFlight,
    },
    beta: {
      namespaces: [ns.beta],
      gatePrefix: 'beta.tollgate.io/',
      pods: limitsInForce.beta.pods,
      maxInFlight: limitsInForce.beta.maxInFlight,
    },
    gamma: { namespaces: [ns.gamma], gatePrefix: 'gamma.tollgate.io/', maxInFlight: 1000 },
  });
  const pushPolicy = async (b: RepoState, message: string) => {
    await pushTree(git, policyUrl, policyFiles(b), { message });
  };
  const controllerConfig = (id: string) => ({
    kubeconfig: cp.tollgateKubeconfig,
    policyUrl,
    auditUrl,
    token: git.token,
    cacheDir: join(work, id),
    controller: id,
    debounceMs: 50,
    budgetRampMs: 3000,
  });

  before(async () => {
    cp = await startControlPlane({ name: 'gate-release' });
    kc = cp.kubeConfig('admin');
    core = kc.makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(kc, { concurrency: 16 });
    for (let i = 1; i <= 4; i++)
      await kubelet.addNode(`gr-node-${i}`, { cpu: '160', memory: '512Gi', pods: 600 });
    await kubelet.start();
    for (const name of Object.values(ns))
      await core.createNamespace({ body: { metadata: { name } } });
    git = await startGitServer();
    policyUrl = git.createRepo('policy');
    auditUrl = git.createRepo('audit');
    await pushPolicy(budgets, 'policy v1');
    watcher = new BudgetWatcher(kc, limits, () => limitsInForce.globalMaxInFlight);
    await watcher.start();
    finisher = new Finisher(kc, [ns.alpha, ns.beta], 3000);
    await finisher.start();
    controller = await startController(controllerConfig('ctl-1'), join(work, 'ctl-1.log'));
  });

  after(async () => {
    await controller?.stop().catch(() => undefined);
    await finisher?.stop();
    await watcher?.stop();
    await kubelet?.stop();
    await git?.close();
    await cp?.stop();
  });

  const create = async (pods: V1Pod[], concurrency = 24) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < pods.length) {
          const pod = pods[next++] as V1Pod;
          for (let attempt = 0; ; attempt++) {
            try {
              await core.createNamespacedPod({
                namespace: pod.metadata!.namespace!,
                body: creatable(pod),
              });
              break;
            } catch (error) {
              if (attempt > 5) throw error;
              await sleep(200);
            }
          }
        }
      }),
    );
  };
  const live = (namespace: string, name: string) => core.readNamespacedPod({ namespace, name });

  test('an image-present condition releases pods once the kubelet reports the image', async () => {
    await create(
      [0, 1, 2].map((i) =>
        aPod(`warm-${i}`, ns.gamma)
          .gated(gates.warm)
          .image(warmImage)
          .requests({ cpu: '100m' })
          .obj(),
      ),
    );
    await sleep(3000);
    for (const i of [0, 1, 2]) {
      const pod = await live(ns.gamma, `warm-${i}`);
      assert.deepEqual(
        pod.spec?.schedulingGates?.map((g) => g.name),
        [gates.warm],
        'held while no node has the image',
      );
    }
    await kubelet.setImages('gr-node-2', [warmImage]);
    await eventually(
      'warm pods released after the image appears',
      async () => {
        const pods = await Promise.all([0, 1, 2].map((i) => live(ns.gamma, `warm-${i}`)));
        return pods.every((p) => (p.spec?.schedulingGates ?? []).length === 0);
      },
      { timeoutMs: 30_000 },
    );
  });

  test('an expired pod reaches Review, and an approval commit releases it', async () => {
    await create([aPod('stuck', ns.gamma).gated(gates.review).requests({ cpu: '100m' }).obj()]);
    const reviewed = await eventually(
      'the review annotation',
      async () => {
        const pod = await live(ns.gamma, 'stuck');
        return pod.metadata?.annotations?.['tollgate.io/review'] ? pod : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(
      reviewed.spec?.schedulingGates?.map((g) => g.name),
      [gates.review],
      'still gated while in review',
    );
    const events = await core.listNamespacedEvent({
      namespace: ns.gamma,
      fieldSelector: 'involvedObject.name=stuck',
    });
    assert.ok(
      events.items.some((e) => e.reason === 'GateExpired'),
      'a GateExpired event on the pod',
    );
    budgets = { ...budgets, approvals: [['Release', ns.gamma, 'stuck']] };
    await pushPolicy(budgets, 'approve release of gr-gamma/stuck');
    await eventually(
      'the approved pod released',
      async () => ((await live(ns.gamma, 'stuck')).spec?.schedulingGates ?? []).length === 0,
      {
        timeoutMs: 30_000,
      },
    );
  });

  test('an object condition releases a pod once the referenced ConfigMap says ready', async () => {
    await create([
      aPod('waits-for-data', ns.gamma).gated(gates.review).requests({ cpu: '100m' }).obj(),
    ]);
    await sleep(1500);
    const held = await live(ns.gamma, 'waits-for-data');
    assert.deepEqual(
      held.spec?.schedulingGates?.map((g) => g.name),
      [gates.review],
      'held while the ConfigMap is absent',
    );
    await core.createNamespacedConfigMap({
      namespace: ns.gamma,
      body: { metadata: { name: 'dataset-ready' }, data: { ready: 'true' } },
    });
    await eventually(
      'the pod released by the ConfigMap',
      async () =>
        ((await live(ns.gamma, 'waits-for-data')).spec?.schedulingGates ?? []).length === 0,
      { timeoutMs: 30_000 },
    );
    const pod = await live(ns.gamma, 'waits-for-data');
    assert.equal(
      pod.metadata?.annotations?.['tollgate.io/review'],
      undefined,
      'released before its expiry, never in review',
    );
  });

  test(`${2 * PODS_PER_TENANT} gated pods, two tenants, budgets below demand: limits hold, each pod released once, through a SIGKILL and a budget raise`, async () => {
    const alphaPods = Array.from({ length: PODS_PER_TENANT }, (_, i) => {
      const b = aPod(`a-${String(i).padStart(4, '0')}`, ns.alpha).requests({
        cpu: '250m',
        memory: '64Mi',
      });
      return (i < 5 ? b.gated(foreignGate, gates.alpha) : b.gated(gates.alpha)).obj();
    });
    const gang = (name: string, group: string, size: number) =>
      aPod(name, ns.beta)
        .gated(gates.gang)
        .label('gang', group)
        .annotate('tollgate.io/gang-size', String(size))
        .requests({ cpu: '250m' })
        .obj();
    const betaPods = [
      ...Array.from({ length: PODS_PER_TENANT - 4 }, (_, i) =>
        aPod(`b-${String(i).padStart(4, '0')}`, ns.beta)
          .gated(gates.beta)
          .requests({ cpu: '250m', memory: '64Mi' })
          .obj(),
      ),
      ...[0, 1, 2, 3].map((i) => gang(`gang-whole-${i}`, 'whole', 4)),
    ];
    const incomplete = [0, 1, 2].map((i) => gang(`gang-short-${i}`, 'short', 4));
    const ours = new Set(
      [...alphaPods, ...betaPods].map((p) => `${p.metadata!.namespace}/${p.metadata!.name}`),
    );
    const released = () =>
      [...watcher.seen.entries()].filter(([k, s]) => ours.has(k) && s.releases > 0).length;

    const started = Date.now();
    // Interleave the tenants so both have demand from the start.
    const all: V1Pod[] = [];
    for (let i = 0; i < PODS_PER_TENANT; i++) all.push(alphaPods[i] as V1Pod, betaPods[i] as V1Pod);
    const creating = create([...all, ...incomplete]);

    // Kill the controller in the middle of releasing, then start another.
    await eventually('40% released before the kill', async () => released() >= ours.size * 0.4, {
      timeoutMs: 300_000,
      intervalMs: 50,
    });
    await controller!.kill();
    const atKill = released();
    await sleep(3000);
    const whileDead = released() - atKill;
    controller = await startController(controllerConfig('ctl-2'), join(work, 'ctl-2.log'));

    // Raise alpha's budget by a policy commit; no restart. Alpha still has half its pods
    // gated then, so demand is far above the raised budget.
    const alphaReleased = () =>
      alphaPods.filter(
        (p) => (watcher.seen.get(`${ns.alpha}/${p.metadata!.name}`)?.releases ?? 0) > 0,
      ).length;
    await eventually(
      'half of alpha released before the raise',
      async () => alphaReleased() >= PODS_PER_TENANT * 0.5,
      { timeoutMs: 300_000, intervalMs: 50 },
    );
    const alphaGatedAtRaise = PODS_PER_TENANT - alphaReleased();
    const raised: RepoState = { ...budgets, alphaPods: 120, alphaCpu: '30' };
    await pushPolicy(raised, 'raise alpha budget to 120 pods / 30 cpu');
    budgets = raised;
    watcher.markPeak('alpha');

    await creating;
    await eventually(`all ${ours.size} pods released`, async () => released() >= ours.size, {
      timeoutMs: 600_000,
      intervalMs: 200,
      describe: () => `${released()} released`,
    });
    const finished = Date.now();

    // Stop the second controller cleanly: it flushes its last outcomes to Git.
    const last = controller!;
    assert.equal(await last.stop(), 0, 'the controller exits 0 on SIGTERM');
    controller = undefined;
    const metrics = String(last.messages.find((m) => m.stopped)?.metrics ?? '');

    // The audit trail in Git, read back independently.
    const source = await openAuditSource(auditUrl, 'tollgate/audit', { token: git.token });
    const history = await readAuditHistory(source);
    source.close();
    const records = history
      .flatMap((c) => c.records)
      .filter((r) => r.kind === 'Release' && r.loop === 'gate-release');
    const byPod = new Map<string, { intents: number; succeeded: number; at: number[] }>();
    for (const r of records) {
      const key = `${r.target.namespace}/${r.target.name}`;
      const entry = byPod.get(key) ?? { intents: 0, succeeded: 0, at: [] };
      if (r.phase === 'intent') entry.intents += 1;
      if (r.outcome.result === 'succeeded') {
        entry.succeeded += 1;
        entry.at.push(r.at);
      }
      byPod.set(key, entry);
    }
    const withoutOutcome = [...ours].filter((key) => (byPod.get(key)?.succeeded ?? 0) === 0).length;

    // Figures.
    const releaseTimes = [...ours]
      .map((k) => watcher.seen.get(k)?.releasedAt ?? NaN)
      .sort((a, b) => a - b);
    const dwell = [...ours]
      .map(
        (k) =>
          ((watcher.seen.get(k)?.releasedAt ?? NaN) - (watcher.seen.get(k)?.firstSeenAt ?? NaN)) /
          1000,
      )
      .sort((a, b) => a - b);
    const span = (releaseTimes.at(-1)! - releaseTimes[0]!) / 1000;
    const lines = [
      `pods ${ours.size} (+3 of an incomplete gang; 5 keep a foreign gate); wall ${((finished - started) / 1000).toFixed(1)}s`,
      `release throughput ${(ours.size / span).toFixed(1)} pods/s over ${span.toFixed(1)}s (first to last release, incl. the SIGKILL outage and restart)`,
      `dwell (watcher: first seen -> gate gone) p50 ${percentile(dwell, 50).toFixed(1)}s p90 ${percentile(dwell, 90).toFixed(1)}s p99 ${percentile(dwell, 99).toFixed(1)}s max ${dwell.at(-1)!.toFixed(1)}s`,
      `peaks alpha ${JSON.stringify(watcher.peak.get('alpha'))} beta ${JSON.stringify(watcher.peak.get('beta'))} global in flight ${watcher.peakGlobalInFlight}; alpha after raise ${watcher.peakSince('alpha')} pods (gated at raise ${alphaGatedAtRaise})`,
      `kill at ${atKill} released; ${whileDead} landed while dead; ${withoutOutcome} without a succeeded outcome record; audit commits ${history.length}; violations ${watcher.violations.length}; watch events ${watcher.events}; finished by test ${finisher.finished}`,
    ];
    for (const line of lines) console.log(`# gate-release: ${line}`);

    // Limits held all the while, as seen by an independent watch.
    assert.deepEqual(watcher.violations.slice(0, 5), [], `${watcher.violations.length} violations`);
    assert.ok(
      watcher.peakSince('alpha') > 50,
      `after the raise alpha ran ${watcher.peakSince('alpha')} pods at once (old budget: 50 pods, 40 by cpu)`,
    );
    assert.ok(
      whileDead <= limitsInForce.globalMaxInFlight,
      `${whileDead} releases landed while no controller ran (only writes already in flight, at most max in flight, may)`,
    );

    // Each pod released exactly once; foreign gates kept; gangs whole or not at all.
    for (const key of ours) {
      const seen = watcher.seen.get(key)!;
      assert.equal(seen.releases, 1, `${key} released ${seen.releases} times`);
      assert.equal(seen.gatedAgainAfterRelease, false);
    }
    for (const pod of alphaPods.slice(0, 5)) {
      const now = await live(ns.alpha, pod.metadata!.name!);
      assert.deepEqual(
        now.spec?.schedulingGates?.map((g) => g.name),
        [foreignGate],
        'the foreign gate stays',
      );
    }
    for (const pod of incomplete) {
      const now = await live(ns.beta, pod.metadata!.name!);
      assert.deepEqual(
        now.spec?.schedulingGates?.map((g) => g.name),
        [gates.gang],
        'an incomplete gang stays gated',
      );
    }
    const gangAt = new Set(
      betaPods
        .filter((p) => p.metadata!.labels?.gang)
        .map((p) => byPod.get(`${ns.beta}/${p.metadata!.name}`)?.at[0]),
    );
    assert.equal(gangAt.size, 1, 'the whole gang was decided in one pass');

    // The audit accounts for every release: an intent for each, never two successful
    // outcomes, and a successful outcome for all but writes cut off by the SIGKILL.
    for (const key of ours) {
      const entry = byPod.get(key);
      assert.ok(entry && entry.intents >= 1, `${key}: no Release intent in the audit trail`);
      assert.ok(entry.succeeded <= 1, `${key}: ${entry.succeeded} successful releases recorded`);
    }
    // The restarted controller's metrics agree with its audit records and the cluster.
    const loopSucceeded = records.filter(
      (r) =>
        r.file.includes('-ctl-2-') &&
        r.outcome.result === 'succeeded' &&
        !r.reason.startsWith('recovered:'),
    ).length;
    const metricSucceeded =
      (metricValue(metrics, 'tollgate_releases_total{tenant="alpha",result="succeeded"}') ?? NaN) +
      (metricValue(metrics, 'tollgate_releases_total{tenant="beta",result="succeeded"}') ?? NaN);
    assert.equal(
      metricSucceeded,
      loopSucceeded,
      'tollgate_releases_total{result="succeeded"} = successful releases in the audit',
    );
    assert.equal(
      metricValue(metrics, `tollgate_gated_pods{tenant="beta",gate="${gates.gang}"}`),
      3,
      'the incomplete gang is gated',
    );
    assert.equal(
      metricValue(metrics, 'tollgate_pods{tenant="alpha",state="waiting"}'),
      5,
      'pods left with a foreign gate are waiting',
    );
    assert.ok(
      (metricValue(metrics, 'tollgate_gate_dwell_seconds_count{tenant="alpha"}') ?? 0) > 0,
      'dwell observed',
    );

    // The restarted controller recorded the outcomes its killed predecessor could not.
    assert.equal(
      withoutOutcome,
      0,
      `${withoutOutcome} releases without a successful outcome record`,
    );
  });
});
