/**
 * Carries out the seeded fault schedule (schedule.ts) on the real parts, and writes each
 * step to the timeline: which replica was killed or paused and when it came back, when
 * Git or Prometheus went away and returned, which policy commits were bad and fixed.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ControlPlane } from '../support/control-plane.ts';
import type { GitServer } from '../support/git-server.ts';
import type { SimulatedKubelet } from '../support/kubelet.ts';
import { GitAuditWriter } from '../../src/audit/writer.ts';
import { aDecision } from '../builders/decision.ts';
import type { Fault, FaultKind } from './schedule.ts';
import type { FaultyProxy, ProxyMode } from './proxy.ts';
import type { Outage } from './judge.ts';
import type { ThrottlingProxy } from './api-proxy.ts';
import type { PolicyRepo } from './policy.ts';
import type { Load } from './load.ts';
import { leaseHolder, type Replica } from './replicas.ts';
import type { Timeline } from './timeline.ts';

export interface ChaosParts {
  readonly cp: ControlPlane;
  readonly admin: KubeConfig;
  readonly replicas: readonly Replica[];
  readonly git: GitServer;
  readonly gitProxy: FaultyProxy;
  readonly promProxy: FaultyProxy;
  readonly apiProxy: ThrottlingProxy;
  readonly auditUrl: string;
  readonly policy: PolicyRepo;
  readonly load: Load;
  readonly kubelet: SimulatedKubelet;
  /** The node the node-failure fault takes down. */
  readonly failingNode: string;
}

const gitSlowMs = 2_000;

export class Chaos {
  readonly injected: Fault[] = [];
  /**
   * Each time a server was taken away or slowed, as it happened (ms since the chaos
   * began): the release checks leave out the time Git was down (judge.ts gitDownWindows).
   */
  readonly outages: Outage[] = [];
  readonly #parts: ChaosParts;
  readonly #timeline: Timeline;
  readonly #running: Promise<void>[] = [];

  constructor(parts: ChaosParts, timeline: Timeline) {
    this.#parts = parts;
    this.#timeline = timeline;
  }

  note(what: string): void {
    this.#timeline.note(what);
  }

  /** Runs the schedule: each fault at its time, overlapping ones concurrently. */
  async run(schedule: readonly Fault[]): Promise<void> {
    for (const fault of schedule) {
      const wait = this.#timeline.startedAt + fault.atMs - Date.now();
      if (wait > 0) await sleep(wait);
      this.injected.push(fault);
      this.#running.push(
        this.#inject(fault).catch((error: unknown) =>
          this.note(`${fault.kind}: the harness failed to inject it: ${(error as Error).message}`),
        ),
      );
    }
    await Promise.all(this.#running);
  }

  async #inject(fault: Fault): Promise<void> {
    const actions: Record<FaultKind, (f: Fault) => Promise<void>> = {
      'leader-sigkill': (f) => this.#killLeader(f, 'SIGKILL'),
      'leader-sigterm': (f) => this.#killLeader(f, 'SIGTERM'),
      'replica-sigstop': (f) => this.#pauseLeader(f),
      'apiserver-restart': () => this.#restartApiServer(),
      'api-throttled': (f) => this.#throttleApiServer(f),
      'etcd-compaction': (f) => this.#compactEtcd(f),
      'git-down': (f) => this.#proxyFault('Git server', this.#parts.gitProxy, { kind: 'down' }, f),
      'git-slow': (f) =>
        this.#proxyFault(
          'Git server',
          this.#parts.gitProxy,
          { kind: 'slow', delayMs: gitSlowMs },
          f,
        ),
      'audit-push-race': (f) => this.#secondWriter(f),
      'prometheus-down': (f) =>
        this.#proxyFault('Prometheus', this.#parts.promProxy, { kind: 'down' }, f),
      'bad-policy': (f) => this.#policyFault(f, 'bad'),
      'unserved-kind': (f) => this.#policyFault(f, 'unserved'),
      'pod-recreate': (f) => this.#recreate(f),
      'node-failure': () => this.#failNode(),
    };
    await actions[fault.kind](fault);
  }

  /**
   * A process fault waits for a SIGTERM's shutdown still under way (it may take the
   * Deployment's 30 s grace; the schedule spaces process faults by their 5 s hold): a
   * replica paused or killed inside its shutdown would be counted as outliving its grace,
   * or never judged on it. The wait is on the timeline.
   */
  async #afterShutdowns(fault: Fault): Promise<void> {
    for (const replica of this.#parts.replicas) {
      const shutdown = replica.shuttingDown();
      if (!shutdown) continue;
      const began = Date.now();
      await shutdown;
      this.note(
        `${fault.kind} waited ${((Date.now() - began) / 1000).toFixed(1)} s for ${replica.identity}'s shutdown (SIGTERM under way)`,
      );
    }
  }

  async #target(fault: Fault): Promise<Replica> {
    await this.#afterShutdowns(fault);
    const holder = await leaseHolder(this.#parts.admin);
    const replicas = this.#parts.replicas;
    return replicas.find((r) => r.identity === holder) ?? replicas[fault.pick % replicas.length]!;
  }

  async #killLeader(fault: Fault, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    const replica = await this.#target(fault);
    const began = Date.now();
    this.note(`${signal} ${replica.identity} (incarnation ${replica.incarnation})`);
    if (signal === 'SIGTERM') await replica.terminate();
    else {
      replica.signal(signal);
      await replica.exited();
    }
    this.note(`${replica.identity} exited (${replica.exits.at(-1)})`);
    await sleep(Math.max(0, began + fault.holdMs - Date.now()));
    await replica.start();
    this.note(`${replica.identity} restarted (incarnation ${replica.incarnation})`);
    void replica
      .ready()
      .then(() => this.note(`${replica.identity} ready again`))
      .catch((error: unknown) => this.note(`${replica.identity}: ${(error as Error).message}`));
  }

  async #pauseLeader(fault: Fault): Promise<void> {
    const replica = await this.#target(fault);
    this.note(`SIGSTOP ${replica.identity} for ${fault.holdMs} ms (past its lease)`);
    replica.signal('SIGSTOP');
    await sleep(fault.holdMs);
    replica.signal('SIGCONT');
    this.note(`SIGCONT ${replica.identity}`);
  }

  async #restartApiServer(): Promise<void> {
    this.note('kube-apiserver restarting');
    await this.#parts.cp.restartApiServer();
    this.note('kube-apiserver ready again');
  }

  /**
   * A watch expired by compaction, for real: the standby is paused (its watches fall
   * behind while the load goes on), etcd is compacted at its current revision and
   * kube-apiserver restarted (its watch cache starts after the compaction), then the
   * standby resumes and watches from a revision that no longer exists: 410 Gone, relist.
   * Whether its informers did relist after a 410 is read from its own metrics.
   */
  async #compactEtcd(fault: Fault): Promise<void> {
    await this.#afterShutdowns(fault);
    const holder = await leaseHolder(this.#parts.admin);
    const replicas = this.#parts.replicas;
    const replica =
      replicas.find((r) => r.identity !== holder) ?? replicas[fault.pick % replicas.length]!;
    const began = Date.now();
    const goneBefore = await replica.goneRelists();
    this.note(`SIGSTOP ${replica.identity} (its watches fall behind) for ${fault.holdMs} ms`);
    replica.signal('SIGSTOP');
    await sleep(fault.holdMs / 4);
    const revision = await this.#parts.cp.compactEtcd();
    this.note(`etcd compacted at revision ${revision}; kube-apiserver restarting`);
    await this.#parts.cp.restartApiServer();
    this.note('kube-apiserver ready again (its watch cache begins after the compaction)');
    await sleep(Math.max(0, began + fault.holdMs - Date.now()));
    replica.signal('SIGCONT');
    this.note(`SIGCONT ${replica.identity}`);
    const gone = await this.#goneSince(replica, goneBefore);
    this.note(`${replica.identity}: ${gone} informer relists after 410 Gone since the pause`);
  }

  /** Relists after 410 a replica reports above `before`, once it shows any (30 s at most). */
  async #goneSince(replica: Replica, before: number | undefined): Promise<number | string> {
    if (before === undefined) return 'unknown (no metrics before the pause)';
    for (let waited = 0; waited < 30_000; waited += 1000) {
      const now = await replica.goneRelists();
      if (now !== undefined && now > before) return now - before;
      await sleep(1000);
    }
    return 0;
  }

  async #throttleApiServer(fault: Fault): Promise<void> {
    const proxy = this.#parts.apiProxy;
    const before = proxy.rejected;
    proxy.throttled = true;
    this.note(`API server throttled for tollgate: every second request 429 for ${fault.holdMs} ms`);
    await sleep(fault.holdMs);
    proxy.throttled = false;
    this.note(`API server no longer throttled (${proxy.rejected - before} requests refused)`);
  }

  async #proxyFault(
    what: string,
    proxy: FaultyProxy,
    mode: Exclude<ProxyMode, { kind: 'up' }>,
    fault: Fault,
  ): Promise<void> {
    const fromMs = this.#sinceStart();
    proxy.mode = mode;
    this.note(
      `${what} ${mode.kind === 'slow' ? `slow (${mode.delayMs} ms per chunk)` : mode.kind} for ${fault.holdMs} ms`,
    );
    await sleep(fault.holdMs);
    proxy.mode = { kind: 'up' };
    this.outages.push({ server: what, kind: mode.kind, fromMs, toMs: this.#sinceStart() });
    this.note(`${what} back`);
  }

  #sinceStart(): number {
    return Date.now() - this.#timeline.startedAt;
  }

  /** Another cluster's writer pushes to the same audit branch while the leader does. */
  async #secondWriter(fault: Fault): Promise<void> {
    const { writer } = await GitAuditWriter.open({
      url: this.#parts.auditUrl,
      token: this.#parts.git.token,
      branch: 'tollgate/audit',
      cacheDir: mkdtempSync(join(tmpdir(), 'tollgate-soak-writer-')),
      cluster: 'soak-other',
      controller: 'soak-second-writer',
      mode: 'strict',
      batch: { maxDecisions: 100, maxDelayMs: 10 },
    });
    for (let i = 0; i < 5; i++) {
      writer.record([
        aDecision('Hold', `race-${fault.atMs}-${i}`, 'soak-other').at(Date.now()).obj(),
      ]);
      await writer.flush();
    }
    await writer.close();
    this.note('a second writer pushed 5 commits to the audit branch');
  }

  async #policyFault(fault: Fault, which: 'bad' | 'unserved'): Promise<void> {
    const describe =
      which === 'bad'
        ? 'a bad policy commit (a GatePolicy of an unknown tenant)'
        : "ml-training's eval policy references an unserved kind";
    await this.#parts.policy.change(describe, (state) => ({ ...state, [which]: true }));
    this.note(describe);
    await sleep(fault.holdMs);
    await this.#parts.policy.change(`revert: ${describe}`, (state) => ({
      ...state,
      [which]: false,
    }));
    this.note(`fixed: ${describe}`);
  }

  async #recreate(fault: Fault): Promise<void> {
    const names = await this.#parts.load.recreateHeld(fault.pick);
    this.note(
      `deleted and re-created held pods under the same names: ${names.join(', ') || 'none held'}`,
    );
  }

  async #failNode(): Promise<void> {
    await this.#parts.kubelet.failNode(this.#parts.failingNode);
    this.note(`node ${this.#parts.failingNode} failed (NotReady, tainted, its pods not ready)`);
  }
}
