/**
 * Lifecycle timings of the real `tollgate run` process (src/cli/main.ts as a child
 * process, the unprivileged `tollgate` identity, policy and audit on a real Git server):
 *
 *   node bench/lifecycle.ts [--pods 10000] [--repeat 3] [--only restart,failover,propagation]
 *                           [--failover-pods 3000] [--propagation-pods 2000] [--profile]
 *
 * - restart: N gated pods whose conditions hold (tenant without budget, pacing far above
 *   N). One replica is spawned with an empty Git cache; timed from spawn to the first
 *   gate removal seen by an independent watcher (admin identity, its own informer,
 *   started and synced before the spawn). Each step is taken from the child's own log
 *   lines (pino `time`, same host clock): node start-up and module loading, policy clone
 *   and compile, cluster view list and sync, audit open + lease acquisition, recovery of
 *   open intents, first pass + strict intent push, first patch. The replica is then
 *   stopped with SIGTERM (lease released); released pods are replaced by fresh gated ones
 *   so every repeat starts with N gated pods. --profile adds one extra, untimed run
 *   with `--cpu-prof` and prints the top self-time functions up to the first release.
 * - failover: two replicas on one Lease; the leader releases a steady stream (tenant
 *   pacing RATE pods/s). SIGKILL the leader: kill -> first release seen by the watcher
 *   after the other replica's "became leader" line. Then SIGTERM (graceful: the lease is
 *   released on stop): signal -> first release by the other replica. Both with the
 *   shipped lease timings and with short ones.
 * - propagation: the tenant's pod budget is 0, so every pod is held. A commit raising it
 *   is pushed to the Git server: push completed -> first release seen by the watcher,
 *   with the shipped policy-resync schedule and with a one-second one.
 *
 * Results: a table (median [min-max]) on stdout, the raw figures in bench/results/.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, makeInformer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../test/support/control-plane.ts';
import { pushTree, startGitServer, type GitServer } from '../test/support/git-server.ts';
import {
  benchPolicyFiles,
  createGatedPods,
  ensureNamespace,
  inPool,
  listAllPods,
  median,
} from './lib.ts';
import {
  SHIPPED_LEASE,
  SHIPPED_RESYNC,
  spawnTollgate,
  stopReplica,
  waitLine,
  lineAt,
  type LeaseTimings,
  type Replica,
} from './tollgate-process.ts';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '10000' },
    repeat: { type: 'string', default: '3' },
    only: { type: 'string' },
    'failover-pods': { type: 'string', default: '3000' },
    'propagation-pods': { type: 'string', default: '2000' },
    rate: { type: 'string', default: '10' },
    profile: { type: 'boolean', default: false },
  },
});
const positiveInt = (name: string, value: string | undefined): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: not a positive integer: ${value}`);
  return n;
};
const restartPods = positiveInt('pods', values.pods);
const repeats = positiveInt('repeat', values.repeat);
const failoverPods = positiveInt('failover-pods', values['failover-pods']);
const propagationPods = positiveInt('propagation-pods', values['propagation-pods']);
const RATE = positiveInt('rate', values.rate);
const scenarios = ['restart', 'failover', 'propagation'] as const;
type Scenario = (typeof scenarios)[number];
const only = values.only?.split(',');
for (const name of only ?? [])
  if (!scenarios.includes(name as Scenario))
    throw new Error(
      `--only: must be one of ${scenarios.join(', ')} (comma-separated), got ${name}`,
    );
const wanted = (s: Scenario): boolean => only === undefined || only.includes(s);

const gate = 'bench.tollgate.io/ready';
const runId = Date.now().toString(36);
const say = (line: string): void => void process.stderr.write(`# lifecycle: ${line}\n`);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/**
 * Short but safe on a loaded machine. The shortest valid timings (1s / 800ms / 500ms:
 * whole-second lease > renew deadline > 1.2 x retry period) lose the lease without any
 * kill when a renewal takes longer than 800 ms, which a busy API server does: the
 * figures would measure flapping, not failover.
 */
const SHORT_LEASE: LeaseTimings = { name: 'short', lease: '3s', renew: '2s', retry: '500ms' };
const SHORT_RESYNC = '* * * * * *';

// ---- policy

interface PolicyShape {
  namespaces: string[];
  /** Tenant pacing, pods/s; absent = far above anything measured. */
  rate?: number;
  /** Tenant pod budget; absent = none. */
  budgetPods?: number;
}

function policyFiles(shape: PolicyShape): Record<string, string> {
  const unlimited = { maxInFlight: 1_000_000, releasesPerSecond: 1_000_000, batchSize: 1_000_000 };
  return benchPolicyFiles({
    namespaces: shape.namespaces,
    pods: 0,
    gate,
    gatePolicy: 'bench-ready',
    conditions: [{ type: 'Budget' }],
    pacing: {
      settings: unlimited,
      tenant:
        shape.rate === undefined
          ? unlimited
          : { maxInFlight: 1_000_000, releasesPerSecond: shape.rate, batchSize: shape.rate },
    },
    ...(shape.budgetPods === undefined ? {} : { budgetPods: shape.budgetPods }),
  });
}

// ---- the independent watcher

const hasGate = (pod: V1Pod): boolean =>
  (pod.spec?.schedulingGates ?? []).some((g) => g.name === gate);

/** Admin informer on one namespace: every transition gated -> not gated, at Date.now(). */
class ReleaseWatcher {
  readonly releases: { name: string; at: number }[] = [];
  readonly #gated = new Set<string>();
  #informer: ReturnType<typeof makeInformer<V1Pod>>;
  #stopped = false;

  constructor(kc: KubeConfig, namespace: string) {
    const core = kc.makeApiClient(CoreV1Api);
    this.#informer = makeInformer<V1Pod>(kc, `/api/v1/namespaces/${namespace}/pods`, () =>
      core.listNamespacedPod({ namespace }),
    );
    const seen = (pod: V1Pod): void => {
      const name = pod.metadata?.name ?? '';
      if (hasGate(pod)) this.#gated.add(name);
      else if (this.#gated.delete(name)) this.releases.push({ name, at: Date.now() });
    };
    this.#informer.on('add', seen);
    this.#informer.on('update', seen);
    this.#informer.on('delete', (pod) => this.#gated.delete(pod.metadata?.name ?? ''));
    this.#informer.on('error', (error: unknown) => {
      if (this.#stopped) return;
      say(`watcher error ${String(error)}; restarting`);
      setTimeout(() => void this.#informer.start(), 200);
    });
  }

  start(): Promise<void> {
    return this.#informer.start();
  }

  get gated(): number {
    return this.#gated.size;
  }

  firstAfter(at: number): number | undefined {
    return this.releases.find((r) => r.at >= at)?.at;
  }

  countBetween(from: number, to: number): number {
    return this.releases.filter((r) => r.at >= from && r.at < to).length;
  }

  async waitFirstAfter(at: number, timeoutMs: number, what: string): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.firstAfter(at);
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`no release within ${timeoutMs} ms: ${what}`);
      await sleep(2);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#informer.stop();
  }
}

/** Deletes released pods and creates fresh gated ones until `count` gated pods exist. */
async function topUp(kc: KubeConfig, namespace: string, count: number): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const pods = await listAllPods(kc, namespace);
  const released = pods.filter((p) => !hasGate(p) && !p.metadata?.deletionTimestamp);
  await inPool(released, 32, async (pod) => {
    await core
      .deleteNamespacedPod({ namespace, name: pod.metadata!.name!, gracePeriodSeconds: 0 })
      .catch((error: { code?: number }) => {
        if (error.code !== 404) throw error;
      });
  });
  const missing = count - pods.filter(hasGate).length;
  if (missing > 0) {
    const millis = await createGatedPods(kc, namespace, missing, gate, {
      prefix: `p${Date.now().toString(36)}`,
      concurrency: 32,
    });
    say(`${namespace}: created ${missing} gated pods in ${(millis / 1000).toFixed(1)} s`);
  }
}

// ---- CPU profile summary

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function over the first `windowMs` of the profile (spawn -> first release). */
function topSelfTime(
  file: string,
  windowMs: number,
  top = 15,
): { fn: string; ms: number; share: number }[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let elapsedUs = 0;
  let totalUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    elapsedUs += delta;
    if (elapsedUs > windowMs * 1000) break;
    const node = byId.get(profile.samples[i] as number);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url
      ? `${url.replace(/^.*\/(node_modules|src|bench)\//, '$1/')}:${lineNumber + 1}`
      : '';
    const fn = `${functionName || '(anonymous)'} ${where}`.trim();
    self.set(fn, (self.get(fn) ?? 0) + delta);
    totalUs += delta;
  }
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([fn, us]) => ({ fn, ms: us / 1000, share: us / totalUs }));
}

// ---- scenarios

interface Env {
  cp: ControlPlane;
  adminKc: KubeConfig;
  git: GitServer;
  work: string;
}

interface RestartRun {
  pods: number;
  load: string;
  totalMs: number;
  /** Step -> ms, from the child's log lines. */
  steps: Record<string, number>;
  planMs?: number;
  intentsMs?: number;
  writesInFirstPass?: number;
  /** Terms lost before the first release (a blocked event loop missing the renew deadline). */
  leadershipLost: number;
  profiled: boolean;
}

const restartSteps = [
  ['boot', 'tollgate starting'],
  ['policy clone + compile', 'policy loaded'],
  ['view list + sync', 'cluster view synced'],
  ['audit open + lease', 'became leader'],
  ['recover open intents', 'audit: open intents checked at the start of the term'],
  ['first pass + intent push', 'gate-release pass'],
] as const;

async function restartScenario(env: Env): Promise<RestartRun[]> {
  const namespace = `life-${runId}-restart`;
  await ensureNamespace(env.adminKc, namespace);
  const policyUrl = env.git.createRepo('policy-restart');
  await pushTree(env.git, policyUrl, policyFiles({ namespaces: [namespace] }), {
    message: 'restart policy',
  });
  const runs: RestartRun[] = [];
  const total = repeats + (values.profile ? 1 : 0);
  for (let r = 1; r <= total; r++) {
    const profiled = values.profile && r === total;
    await topUp(env.adminKc, namespace, restartPods);
    const watcher = new ReleaseWatcher(env.adminKc, namespace);
    await watcher.start();
    while (watcher.gated < restartPods) await sleep(50);
    await sleep(2000); // let the API server and etcd settle after the creations
    const profDir = profiled ? mkdtempSync(join(env.work, 'prof-')) : undefined;
    const loadAtStart = load();
    // A lease and an audit branch of its own per repeat: a clean start, not one that
    // waits out the lease of, or recovers the open intents of, a previous repeat that
    // had to be killed.
    const replica = await spawnTollgate({
      identity: `restart-${r}`,
      cp: env.cp,
      git: env.git,
      policyUrl,
      auditUrl: env.git.createRepo(`audit-restart-${r}`),
      leaseName: `lifecycle-restart-${r}`,
      // The shipped timings: the first pass over N pods keeps the event loop busy for
      // seconds, and a short renew deadline would lose the lease in the middle of it.
      timings: SHIPPED_LEASE,
      ...(profDir ? { cpuProfDir: profDir } : {}),
      work: env.work,
    });
    try {
      const first = await watcher.waitFirstAfter(replica.spawnedAt, 180_000, 'restart');
      const totalMs = first - replica.spawnedAt;
      // The pass line is logged after the intents push and before the writes are sent.
      await waitLine(replica, 'gate-release pass', 10_000).catch(() => undefined);
      const steps: Record<string, number> = {};
      let previous = replica.spawnedAt;
      for (const [step, msg] of restartSteps) {
        const line = lineAt(replica, msg);
        if (!line) continue;
        steps[step] = line.time - previous;
        previous = line.time;
      }
      steps['first patch seen'] = first - previous;
      const pass = lineAt(replica, 'gate-release pass');
      const run: RestartRun = {
        pods: restartPods,
        load: loadAtStart,
        totalMs,
        steps,
        ...(typeof pass?.planMs === 'number' ? { planMs: pass.planMs } : {}),
        ...(typeof pass?.intentsMs === 'number' ? { intentsMs: pass.intentsMs } : {}),
        ...(typeof pass?.writes === 'number' ? { writesInFirstPass: pass.writes } : {}),
        leadershipLost: replica.lines.filter((l) => l.msg === 'leadership ended' && l.time <= first)
          .length,
        profiled,
      };
      runs.push(run);
      say(
        `restart ${r}${profiled ? ' (profiled)' : ''}: ${totalMs} ms to first release; ` +
          Object.entries(steps)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ') +
          `; planMs ${run.planMs}, intentsMs ${run.intentsMs}, writes ${run.writesInFirstPass}, ` +
          `terms lost ${run.leadershipLost}; load ${loadAtStart}`,
      );
    } finally {
      // A profile is written only on a normal exit: give the profiled run time to drain.
      await stopReplica(replica, 'SIGTERM', profiled ? 300_000 : 30_000);
      await watcher.stop();
    }
    if (profDir) {
      const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
      if (file) {
        const last = runs[runs.length - 1]!;
        const top = topSelfTime(join(profDir, file), last.totalMs);
        say(
          `CPU profile (self time, spawn -> first release ${last.totalMs} ms): ${profDir}/${file}`,
        );
        for (const t of top)
          say(
            `  ${t.ms.toFixed(0).padStart(6)} ms ${(t.share * 100).toFixed(1).padStart(5)}%  ${t.fn}`,
          );
        (last as RestartRun & { profile?: unknown }).profile = { file: join(profDir, file), top };
      } else say(`no CPU profile written in ${profDir}`);
    }
  }
  return runs;
}

interface FailoverRun {
  timings: string;
  kind: 'SIGKILL' | 'SIGTERM';
  pods: number;
  load: string;
  /** Signal -> the other replica's "became leader" line. */
  toLeaderMs: number;
  /** Signal -> first release seen by the watcher after that line. */
  toFirstReleaseMs: number;
  /** Releases seen between the signal and the new term (the old leader's last writes). */
  releasesBetween: number;
}

async function failoverScenario(env: Env): Promise<FailoverRun[]> {
  const namespace = `life-${runId}-failover`;
  await ensureNamespace(env.adminKc, namespace);
  const policyUrl = env.git.createRepo('policy-failover');
  const auditUrl = env.git.createRepo('audit-failover');
  await pushTree(env.git, policyUrl, policyFiles({ namespaces: [namespace], rate: RATE }), {
    message: 'failover policy',
  });
  await topUp(env.adminKc, namespace, failoverPods);
  const watcher = new ReleaseWatcher(env.adminKc, namespace);
  await watcher.start();
  const runs: FailoverRun[] = [];
  let n = 0;
  const replicas: Replica[] = [];
  try {
    for (const timings of [SHIPPED_LEASE, SHORT_LEASE]) {
      const leaseName = `lifecycle-failover-${timings.name}`;
      const start = async (): Promise<Replica> => {
        n += 1;
        const replica = await spawnTollgate({
          identity: `failover-${n}`,
          cp: env.cp,
          git: env.git,
          policyUrl,
          auditUrl,
          leaseName,
          timings,
          work: env.work,
        });
        replicas.push(replica);
        await waitLine(replica, 'tollgate running', 120_000);
        return replica;
      };
      let leader = await start();
      await waitLine(leader, 'became leader', 60_000);
      let standby = await start();
      for (let r = 1; r <= repeats; r++) {
        for (const kind of ['SIGKILL', 'SIGTERM'] as const) {
          if (watcher.gated < RATE * 60) await topUp(env.adminKc, namespace, failoverPods);
          // Releases must be flowing from the leader before it is stopped.
          const since = Date.now();
          await watcher.waitFirstAfter(since, 60_000, `${leader.identity} releasing`);
          await sleep(1000);
          const loadAt = load();
          const signalledAt = Date.now();
          leader.child.kill(kind);
          const became = await waitLine(standby, 'became leader', 120_000, signalledAt);
          const first = await watcher.waitFirstAfter(became.time, 180_000, 'failover release');
          const run: FailoverRun = {
            timings: `${timings.lease}/${timings.renew}/${timings.retry}`,
            kind,
            pods: failoverPods,
            load: loadAt,
            toLeaderMs: became.time - signalledAt,
            toFirstReleaseMs: first - signalledAt,
            releasesBetween: watcher.countBetween(signalledAt, became.time),
          };
          runs.push(run);
          say(
            `failover ${timings.name} ${kind} ${r}: leader after ${run.toLeaderMs} ms, first release after ${run.toFirstReleaseMs} ms ` +
              `(${run.releasesBetween} releases by the old leader after the signal); load ${loadAt}`,
          );
          await leader.exited;
          // The stopped replica comes back as the standby.
          const next = standby;
          standby = await start();
          leader = next;
        }
      }
      await stopReplica(standby, 'SIGTERM');
      await stopReplica(leader, 'SIGTERM');
    }
  } finally {
    for (const replica of replicas)
      if (replica.child.exitCode === null) replica.child.kill('SIGKILL');
    await watcher.stop();
  }
  return runs;
}

interface PropagationRun {
  resync: string;
  pods: number;
  load: string;
  /** Push completed -> the first release seen by the watcher. */
  toFirstReleaseMs: number;
  /** Push completed -> the child's "gate-release: policy in force" line for that commit. */
  toPolicyInForceMs?: number;
}

async function propagationScenario(env: Env): Promise<PropagationRun[]> {
  const runs: PropagationRun[] = [];
  for (const resync of [SHIPPED_RESYNC, SHORT_RESYNC]) {
    const tag = resync === SHIPPED_RESYNC ? 'shipped' : 'short';
    const namespace = `life-${runId}-prop-${tag}`;
    await ensureNamespace(env.adminKc, namespace);
    const policyUrl = env.git.createRepo(`policy-prop-${tag}`);
    const auditUrl = env.git.createRepo(`audit-prop-${tag}`);
    const shape = { namespaces: [namespace], budgetPods: 0 };
    await pushTree(env.git, policyUrl, policyFiles(shape), { message: 'budget 0' });
    await topUp(env.adminKc, namespace, propagationPods);
    const watcher = new ReleaseWatcher(env.adminKc, namespace);
    await watcher.start();
    const replica = await spawnTollgate({
      identity: `prop-${tag}`,
      cp: env.cp,
      git: env.git,
      policyUrl,
      auditUrl,
      leaseName: `lifecycle-prop-${tag}`,
      timings: SHORT_LEASE,
      policyResync: resync,
      work: env.work,
    });
    try {
      await waitLine(replica, 'gate-release: policy in force', 120_000);
      for (let r = 1; r <= repeats; r++) {
        // Held: budget 0 in force, no released pod charged to it.
        if (r > 1) {
          const commit = await pushTree(env.git, policyUrl, policyFiles(shape), {
            message: 'budget 0',
          });
          const deadline = Date.now() + 120_000;
          while (
            !replica.lines.some(
              (l) => l.msg === 'gate-release: policy in force' && l.commit === commit,
            )
          ) {
            if (Date.now() > deadline) throw new Error('budget 0 never came into force');
            await sleep(50);
          }
          await topUp(env.adminKc, namespace, propagationPods);
        }
        await sleep(1000 + Math.random() * 2000);
        if (watcher.firstAfter(Date.now() - 1000) !== undefined)
          throw new Error('pods were released while the budget was 0');
        const loadAt = load();
        const commit = await pushTree(
          env.git,
          policyUrl,
          policyFiles({ ...shape, budgetPods: 5 }),
          { message: 'budget 5' },
        );
        const pushed = Date.now();
        const first = await watcher.waitFirstAfter(pushed, 120_000, 'policy propagation');
        const inForce = replica.lines.find(
          (l) => l.msg === 'gate-release: policy in force' && l.commit === commit,
        );
        const run: PropagationRun = {
          resync,
          pods: propagationPods,
          load: loadAt,
          toFirstReleaseMs: first - pushed,
          ...(inForce ? { toPolicyInForceMs: inForce.time - pushed } : {}),
        };
        runs.push(run);
        say(
          `propagation (${resync}) ${r}: first release ${run.toFirstReleaseMs} ms after the push` +
            ` (policy in force after ${run.toPolicyInForceMs} ms); load ${loadAt}`,
        );
      }
    } finally {
      await stopReplica(replica, 'SIGTERM');
      await watcher.stop();
    }
  }
  return runs;
}

// ---- the run

const machine = { cores: cpus().length, cpu: cpus()[0]?.model, memGiB: totalmem() / 2 ** 30 };
say(
  `restart pods ${restartPods}, failover pods ${failoverPods} at ${RATE}/s, propagation pods ${propagationPods}, ` +
    `repeats ${repeats}, ${machine.cores} cores, load ${load()}`,
);
const work = mkdtempSync(join(tmpdir(), 'tollgate-lifecycle-'));
const cp = await startControlPlane({ name: 'lifecycle' });
const git = await startGitServer();
const env: Env = { cp, adminKc: cp.kubeConfig('admin'), git, work };
await ensureNamespace(env.adminKc, 'tollgate-system');
const results: {
  restart?: RestartRun[];
  failover?: FailoverRun[];
  propagation?: PropagationRun[];
} = {};
let failed: unknown;
try {
  if (wanted('restart')) results.restart = await restartScenario(env);
  if (wanted('failover')) results.failover = await failoverScenario(env);
  if (wanted('propagation')) results.propagation = await propagationScenario(env);
} catch (error) {
  failed = error;
  say(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  await git.close();
  await cp.stop();
}

// ---- report

const range = (xs: number[]): string =>
  xs.length === 0
    ? '-'
    : `${median(xs).toFixed(0)} [${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}]`;
const rows: string[][] = [['figure', 'ms, median [min–max]', 'n', 'load (1/5/15 min) at start']];
const loads = (xs: { load: string }[]): string => xs.map((x) => x.load.split(' ')[0]).join(', ');
const timed = (results.restart ?? []).filter((r) => !r.profiled);
if (timed.length > 0) {
  rows.push([
    `restart, ${restartPods} pods: spawn -> first release`,
    range(timed.map((r) => r.totalMs)),
    String(timed.length),
    loads(timed),
  ]);
  const stepNames = [...restartSteps.map(([s]) => s), 'first patch seen'];
  for (const step of stepNames)
    rows.push([
      `  ${step}`,
      range(timed.map((r) => r.steps[step]).filter((v): v is number => v !== undefined)),
      '',
      '',
    ]);
  rows.push([
    '  (pass plan)',
    range(timed.flatMap((r) => (r.planMs === undefined ? [] : [r.planMs]))),
    '',
    '',
  ]);
  rows.push([
    '  (strict intent push)',
    range(timed.flatMap((r) => (r.intentsMs === undefined ? [] : [r.intentsMs]))),
    '',
    '',
  ]);
}
for (const timings of [SHIPPED_LEASE, SHORT_LEASE]) {
  const label = `${timings.lease}/${timings.renew}/${timings.retry}`;
  for (const kind of ['SIGKILL', 'SIGTERM'] as const) {
    const xs = (results.failover ?? []).filter((f) => f.timings === label && f.kind === kind);
    if (xs.length === 0) continue;
    rows.push([
      `failover ${kind}, lease ${label}: signal -> first release`,
      range(xs.map((x) => x.toFirstReleaseMs)),
      String(xs.length),
      loads(xs),
    ]);
    rows.push(['  signal -> new leader', range(xs.map((x) => x.toLeaderMs)), '', '']);
  }
}
for (const resync of [SHIPPED_RESYNC, SHORT_RESYNC]) {
  const xs = (results.propagation ?? []).filter((p) => p.resync === resync);
  if (xs.length === 0) continue;
  rows.push([
    `propagation, resync '${resync}': push -> first release`,
    range(xs.map((x) => x.toFirstReleaseMs)),
    String(xs.length),
    loads(xs),
  ]);
  rows.push([
    '  push -> policy in force (first pass on it)',
    range(xs.flatMap((x) => (x.toPolicyInForceMs === undefined ? [] : [x.toPolicyInForceMs]))),
    '',
    '',
  ]);
}
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
for (const row of rows) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  '));

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = join(here, 'results');
mkdirSync(outDir, { recursive: true });
const outFile = join(outDir, `lifecycle-${stamp}.json`);
writeFileSync(
  outFile,
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      machine,
      repeats,
      restartPods,
      failoverPods,
      failoverRate: RATE,
      propagationPods,
      leases: { shipped: SHIPPED_LEASE, short: SHORT_LEASE },
      resync: { shipped: SHIPPED_RESYNC, short: SHORT_RESYNC },
      results,
      logs: work,
    },
    null,
    2,
  )}\n`,
);
console.log(`results: ${outFile}; child logs: ${work}`);
process.exit(failed ? 1 : 0);
