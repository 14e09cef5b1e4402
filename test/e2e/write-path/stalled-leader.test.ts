/**
 * The stalled leader: two real `tollgate run` replicas (src/cli/main.ts) against a real
 * control plane whose API server is made slow (API Priority and Fairness off, one
 * mutating request in flight at most, and a burst of other writes as the `tollgate`
 * identity), a real Git server (policy + audit) and the simulated kubelet. The leader is
 * stopped with SIGSTOP while it releases (writes in flight), past its lease; the standby
 * takes over and releases; the old leader is resumed with SIGCONT. With one mutating
 * request at a time the lease itself meets 429s, so leadership may pass between the
 * replicas before the stop: the replica stopped is whichever holds the lease when a write
 * of its own is caught waiting, the other is the standby.
 *
 * What must hold, seen by an independent watcher (its own informer) and the audit:
 * - no budget overshoot (maxInFlight of released-but-unscheduled pods) at any time;
 * - no gate removed twice;
 * - `tollgate audit verify` finds no intent with two outcomes (exit 0);
 * - no write of the old leader's stopped term is accepted after the new leader's first
 *   write: the overlap window, from the API server's view (the order in which the watcher
 *   sees the removals, each attributed by the audit to the replica that recorded the
 *   intent whose outcome succeeded, and to the stopped term when decided before that replica's next "became
 *   leader"), is measured and printed as `[stalled-leader e2e]`. A write of the stopped
 *   term still waiting for a connection at the stop is kept off the wire by the fence
 *   asked again there (src/cluster/writer.ts); a later term of the same replica may
 *   release after the standby, as any new leader does.
 *
 * Sizes: TOLLGATE_E2E_STALL_PODS pods (default 160).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoordinationV1Api,
  CoreV1Api,
  EventsV1Api,
  V1MicroTime,
  type V1Pod,
} from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { creatable, eventually } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { BudgetWatcher } from '../gate-release/harness.ts';
import { cleanEnv, spawnTollgate, type Replica } from '../../../bench/tollgate-process.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { releaseIntents } from '../../support/release-attribution.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const cli = join(repoRoot, 'src/cli/main.ts');
const namespace = 'stall';
const gate = 'stall.tollgate.io/ready';
const PODS = Number(process.env.TOLLGATE_E2E_STALL_PODS ?? 160);
const maxInFlight = 20;
const timings = { name: 'e2e', lease: '3000ms', renew: '2000ms', retry: '500ms' };
const leaseMs = 3_000;
const leaseName = 'tollgate-stall-e2e';

const log = (line: string): void => void process.stderr.write(`[stalled-leader e2e] ${line}\n`);

let cp: ControlPlane;
let core: CoreV1Api;
let kubelet: SimulatedKubelet;
let git: GitServer;
let policyUrl: string;
let auditUrl: string;
let watcher: BudgetWatcher;
const stopBurst = new AbortController();
const children: ChildProcess[] = [];
const work = mkdtempSync(join(tmpdir(), 'tollgate-stall-e2e-'));

const policyFiles = (): Record<string, string> => ({
  'tollgate.yaml': [
    'apiVersion: tollgate.io/v1alpha1',
    'kind: Settings',
    'metadata: { name: settings }',
    'spec:',
    '  cluster: stall-e2e',
    '  audit: { mode: strict, batch: { maxDecisions: 200, maxDelay: 200ms } }',
    `  pacing: { maxInFlight: ${maxInFlight}, releasesPerSecond: 40, batchSize: 20 }`,
    '',
  ].join('\n'),
  'tenants/stall.yaml': [
    'apiVersion: tollgate.io/v1alpha1',
    'kind: Tenant',
    'metadata: { name: stall }',
    'spec:',
    `  namespaces: [${namespace}]`,
    '  gatePrefixes: [stall.tollgate.io/]',
    `  pacing: { maxInFlight: ${maxInFlight}, releasesPerSecond: 40, batchSize: 20 }`,
    '',
  ].join('\n'),
  'gates/ready.yaml': [
    'apiVersion: tollgate.io/v1alpha1',
    'kind: GatePolicy',
    'metadata: { name: ready }',
    'spec:',
    '  tenant: stall',
    `  gate: ${gate}`,
    '  conditions: [{ type: Budget }]',
    '',
  ].join('\n'),
});

/** A replica of `tollgate run` (bench/tollgate-process.ts spawns it), ready to serve. */
async function startReplica(identity: string): Promise<Replica> {
  const replica = await spawnTollgate({
    identity,
    cp,
    git,
    policyUrl,
    auditUrl,
    leaseName,
    timings,
    work,
  });
  children.push(replica.child);
  await eventually(
    `${identity} ready`,
    async () => {
      if (replica.child.exitCode !== null)
        throw new Error(`${identity} exited ${replica.child.exitCode} before it was ready`);
      return (await fetch(`${replica.url}/readyz`).catch(() => undefined))?.status === 200;
    },
    { timeoutMs: 90_000, intervalMs: 100 },
  );
  return replica;
}

const holder = async (): Promise<string | undefined> =>
  (
    await cp
      .kubeConfig('admin')
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: 'tollgate-system', name: leaseName })
  ).spec?.holderIdentity;

/**
 * Other writes as the `tollgate` identity (not exempt from the inflight limit, unlike
 * the set-up's system:masters): with one mutating request at a time, tollgate's writes
 * meet 429s and wait. Runs until `stop` aborts.
 */
async function burst(stop: AbortSignal): Promise<{ sent: number; refused: number }> {
  const events = cp.kubeConfig('tollgate').makeApiClient(EventsV1Api);
  const counts = { sent: 0, refused: 0 };
  let n = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (!stop.aborted) {
        const name = `burst-${n++}`;
        counts.sent += 1;
        await events
          .createNamespacedEvent({
            namespace,
            body: {
              metadata: { name, namespace },
              eventTime: new V1MicroTime(Date.now()),
              reportingController: 'tollgate.io/stall-e2e',
              reportingInstance: 'burst',
              action: 'Burst',
              reason: 'Burst',
              type: 'Normal',
              regarding: { kind: 'Pod', namespace, name: 'burst-target', apiVersion: 'v1' },
            },
          })
          .catch(() => (counts.refused += 1));
      }
    }),
  );
  return counts;
}

/**
 * SIGSTOPs the replica that holds the lease as soon as its /metrics shows a write in
 * flight (else, after `lookMs`, with whatever waits); returns it and what it showed last.
 * The holder is read again every 200 ms: under the 429s the lease may pass to the other
 * replica while this looks.
 */
async function stopLeaderWithWrites(
  replicas: readonly Replica[],
  lookMs: number,
): Promise<{ leader: Replica; inFlight: number; queued: number }> {
  const until = Date.now() + lookMs;
  let leader: Replica | undefined;
  let heldAt = 0;
  let seen = { inFlight: 0, queued: 0 };
  for (;;) {
    if (Date.now() - heldAt > 200) {
      const identity = await holder();
      leader = replicas.find((r) => r.identity === identity);
      heldAt = Date.now();
    }
    if (leader) {
      const text = await (await fetch(`${leader.url}/metrics`)).text();
      const gauge = (name: string): number =>
        Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
      seen = {
        inFlight: gauge('tollgate_dispatch_in_flight'),
        queued: gauge('tollgate_dispatch_queue_depth'),
      };
      if (seen.inFlight > 0 || (Date.now() > until && seen.queued > 0)) {
        leader.child.kill('SIGSTOP');
        return { leader, ...seen };
      }
    }
    if (Date.now() > until + 60_000)
      throw new Error(
        `no write waiting at the lease holder (${leader?.identity ?? 'none'}; last seen ${JSON.stringify(seen)})`,
      );
    await sleep(2);
  }
}

function runVerify(): Promise<{ code: number | null; out: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [cli, 'audit', 'verify', '--repo', auditUrl, '--git-token-env', 'E2E_GIT_TOKEN'],
      { env: cleanEnv({ E2E_GIT_TOKEN: git.token }) },
      (error, stdout, stderr) =>
        done({
          code: error ? ((error as { code?: number }).code ?? 1) : 0,
          out: `${stdout}${stderr}`,
        }),
    );
  });
}

before(async () => {
  cp = await startControlPlane({
    name: 'stalled-leader',
    apiServerArgs: [
      '--enable-priority-and-fairness=false',
      '--max-requests-inflight=20',
      '--max-mutating-requests-inflight=1',
    ],
  });
  core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), { concurrency: 8 });
  for (let i = 1; i <= 2; i++)
    await kubelet.addNode(`stall-node-${i}`, { cpu: '200', memory: '512Gi', pods: 500 });
  await kubelet.start();
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  git = await startGitServer();
  policyUrl = git.createRepo('policy');
  auditUrl = git.createRepo('audit');
  await pushTree(git, policyUrl, policyFiles(), { message: 'policy v1' });
  watcher = new BudgetWatcher(
    cp.kubeConfig('admin'),
    () => ({ stall: { namespaces: [namespace], gatePrefix: 'stall.tollgate.io/', maxInFlight } }),
    () => maxInFlight,
  );
  await watcher.start();
});

after(async () => {
  stopBurst.abort();
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
  await watcher?.stop();
  await kubelet?.stop();
  await git?.close();
  await cp?.stop();
});

test('a leader stopped past its lease with writes in flight: the standby takes over, the resumed leader writes nothing more, no overshoot, no double release, one outcome per intent', async () => {
  const a = await startReplica('replica-a');
  await eventually('replica-a leads', async () => (await holder()) === 'replica-a', {
    timeoutMs: 20_000,
  });
  const b = await startReplica('replica-b');

  const pods: V1Pod[] = Array.from({ length: PODS }, (_, i) =>
    aPod(`p-${String(i).padStart(4, '0')}`, namespace)
      .gated(gate)
      .requests({ cpu: '100m', memory: '32Mi' })
      .obj(),
  );
  const ours = new Set(pods.map((p) => `${namespace}/${p.metadata!.name}`));
  const released = () =>
    [...watcher.seen.entries()].filter(([k, s]) => ours.has(k) && s.releases > 0).length;
  const bursting = burst(stopBurst.signal);
  for (const pod of pods) await core.createNamespacedPod({ namespace, body: creatable(pod) });

  await eventually('a quarter released', async () => released() >= PODS / 4, {
    timeoutMs: 180_000,
    intervalMs: 20,
  });
  // Stopped the moment its dispatcher reports a write in flight (sent, not answered) or
  // waiting (queued or backing off after a 429): on resume the fence must abort or refuse
  // them, not let them land while replica-b leads. With one mutating request at a time a
  // write is refused at once, so an in-flight one is only caught now and then: looked
  // for during 20 s, else the stop comes with writes waiting; both counts are printed.
  const atStopWrites = await stopLeaderWithWrites([a, b], 20_000);
  const stoppedAt = Date.now();
  const atStop = released();
  const stopped = atStopWrites.leader;
  const standby = stopped === a ? b : a;
  await eventually(
    `${standby.identity} takes the lease`,
    async () => (await holder()) === standby.identity,
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  const takeoverMs = Date.now() - stoppedAt;
  await eventually(`${standby.identity} releases`, async () => released() >= atStop + 5, {
    timeoutMs: 120_000,
    intervalMs: 20,
  });
  stopped.child.kill('SIGCONT');
  const resumedAt = Date.now();
  await sleep(leaseMs); // the resumed replica's timers, fence and writer run now
  stopBurst.abort();
  const burstCounts = await bursting;

  await eventually(`all ${PODS} released`, async () => released() >= PODS, {
    timeoutMs: 300_000,
    intervalMs: 100,
    describe: () => `${released()} released`,
  });
  for (const replica of [standby, stopped]) replica.child.kill('SIGTERM');
  const codes = await Promise.all([stopped.exited, standby.exited]);
  // The leader's clean shutdown (a term ending with writes waiting used to crash it
  // before the term's last outcomes were recorded).
  assert.equal(codes[1], 0, `${standby.identity} (leading at the end) exits 0 on SIGTERM`);

  // The independent watcher: no overshoot, no gate removed twice.
  assert.deepEqual(
    watcher.violations.slice(0, 5),
    [],
    `${watcher.violations.length} budget violations`,
  );
  for (const key of ours) {
    const seen = watcher.seen.get(key)!;
    assert.equal(seen.releases, 1, `${key} released ${seen.releases} times`);
  }

  // The audit: one outcome per intent; who recorded each release's intent.
  const verify = await runVerify();
  assert.equal(verify.code, 0, `tollgate audit verify:\n${verify.out}`);
  const source = await openAuditSource(auditUrl, 'tollgate/audit', { token: git.token });
  const history = await readAuditHistory(source);
  source.close();
  // Each removal's intent: the one whose outcome succeeded (test/support/release-attribution.ts).
  const intentBy = releaseIntents(history);

  // The overlap window, from the API server's view: the order in which the watcher saw
  // the removals (watch order is the API server's commit order). Before the stop either
  // replica may have led; what matters is the stopped leader against the standby's term
  // that began after the stop (its intents decided after the stop, same machine clock).
  const removals = [...ours]
    .map((key) => ({
      key,
      at: watcher.seen.get(key)!.releasedAt!,
      by: intentBy.get(key)?.controller,
      decidedAt: intentBy.get(key)?.at ?? 0,
    }))
    .sort((x, y) => x.at - y.at);
  // The stopped term: the one the stopped replica held at the stop. With one mutating
  // request at a time, leadership may pass back to it later (a new term, fenced by the
  // Lease like any other): its removals decided from its next "became leader" on belong
  // to that term and may follow the standby's, so they are not the stopped term's.
  const nextTermAt =
    stopped.lines.find((l) => l.msg === 'became leader' && l.time > stoppedAt)?.time ??
    Number.POSITIVE_INFINITY;
  const byStopped = removals.filter((r) => r.by === stopped.identity && r.decidedAt < nextTermAt);
  const byStoppedLaterTerms = removals.filter(
    (r) => r.by === stopped.identity && r.decidedAt >= nextTermAt,
  ).length;
  const byStandbyAfterStop = removals.filter(
    (r) => r.by === standby.identity && r.decidedAt > stoppedAt,
  );
  const lastStopped = byStopped.at(-1);
  const firstStandby = byStandbyAfterStop[0];
  assert.ok(lastStopped && firstStandby, 'both replicas released pods');
  const stoppedAfterStandby = byStopped.filter((r) => r.at > firstStandby.at).length;
  const abortedInFlight = stopped.lines.filter((l) =>
    JSON.stringify(l).includes('aborted in flight'),
  ).length;
  const neverSent = stopped.lines.filter((l) => JSON.stringify(l).includes('never sent')).length;
  const terms = (r: Replica): number =>
    r.lines.filter((l) => l.msg === 'leading: recovering audit outcomes, then starting loops')
      .length;
  log(
    `${PODS} pods, maxInFlight ${maxInFlight}; SIGSTOP of ${stopped.identity} (terms before the end: ${terms(stopped)}, ${standby.identity}: ${terms(standby)}) at ${atStop} released with ${atStopWrites.inFlight} write(s) in flight and ${atStopWrites.queued} waiting (${abortedInFlight} aborted in flight after SIGCONT, ${neverSent} log lines of writes kept off the wire); ${standby.identity} led ${takeoverMs} ms after the stop (lease ${leaseMs} ms); SIGCONT ${resumedAt - stoppedAt} ms after the stop; ` +
      `burst ${burstCounts.sent} writes (${burstCounts.refused} refused); releases by ${stopped.identity}'s stopped term and before ${byStopped.length}, by its later terms ${byStoppedLaterTerms} (next term ${Number.isFinite(nextTermAt) ? `${nextTermAt - resumedAt} ms after SIGCONT` : 'none'}), by ${standby.identity} ${removals.length - byStopped.length - byStoppedLaterTerms} (${byStandbyAfterStop.length} after the stop); ` +
      `overlap window (the stopped leader's last accepted removal minus the standby's first after the stop, watch order): ${lastStopped.at - firstStandby.at} ms, removals of the stopped leader after it: ${stoppedAfterStandby}; exit codes ${JSON.stringify(codes)}`,
  );
  assert.equal(
    stoppedAfterStandby,
    0,
    `no removal of ${stopped.identity}'s stopped term was accepted after ${standby.identity}'s first after the stop`,
  );
  assert.ok(lastStopped.at <= firstStandby.at, 'the overlap window is empty');
});
