/**
 * The soak's steady stream of work: every tick one unit, in turn a Job (data-pipeline,
 * gated in its pod template), a gang of three trainers (ml-training, created one by one
 * so the gang is incomplete for a while), a held load that a person approves by a policy
 * commit a few ticks later (data-pipeline), and an eval pod (ml-training). Released pods
 * run on the simulated kubelet and finish (Finisher); finished pods are deleted, so the
 * cluster stays the same size however long the soak runs. Four api pods run under the
 * ResizePolicy while the soak moves their queue-length signal. A few pods carry only
 * another controller's gate: tollgate must never touch them.
 */
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { aPod } from '../builders/pod.ts';
import { creatable, pastTheSecondOf } from '../support/eventually.ts';
import type { Exporter } from '../support/prometheus.ts';
import { Finisher } from '../e2e/gate-release/harness.ts';
import { foreignGate, gates, namespaces, queueMetric, type PolicyRepo } from './policy.ts';

const unitKinds = ['job', 'gang', 'load', 'eval'] as const;
export const gangSize = 3;
const apiPods = 4;
const signalLevels = [150, 60, 5] as const;
/** Approvals expire long after any soak ends (derived from now, never a fixed date). */
const approvalLifetimeMs = 24 * 3600_000;
/**
 * Finished pods are deleted this long after they finish (a Job's ttlSecondsAfterFinished):
 * longer than a leader takeover (lease 15 s + recovery), so a successor finds the pods
 * the killed leader released. Deleted sooner, recovery can only record their releases as
 * "cancelled: pod gone before recovery" (see docs/soak.md).
 */
const finishedKeptSeconds = 60;
/** A released pod runs this long once Running, then succeeds (the Finisher). */
export const podRunMs = 4000;

export interface LoadCounts {
  units: Record<(typeof unitKinds)[number], number>;
  pods: number;
  recreated: number;
  reaped: number;
}

export class Load {
  readonly counts: LoadCounts = {
    units: { job: 0, gang: 0, load: 0, eval: 0 },
    pods: 0,
    recreated: 0,
    reaped: 0,
  };
  readonly #core: CoreV1Api;
  readonly #batch: BatchV1Api;
  readonly #policy: PolicyRepo;
  readonly #exporter: Exporter;
  readonly #finisher: Finisher;
  readonly #unapproved: string[] = [];
  /** When the newest unapproved load was created (its create answered). */
  #newestLoadAt = 0;
  #approving: Promise<void> = Promise.resolve();
  readonly #timers: NodeJS.Timeout[] = [];
  /** Finished pods by uid: when the reaper first saw them finished. */
  readonly #succeededSeen = new Map<string, number>();
  #tick = 0;
  #producing = false;
  #errors: string[] = [];

  constructor(kc: KubeConfig, policy: PolicyRepo, exporter: Exporter) {
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#batch = kc.makeApiClient(BatchV1Api);
    this.#policy = policy;
    this.#exporter = exporter;
    this.#finisher = new Finisher(kc, [namespaces.ml, namespaces.etl], podRunMs);
  }

  /** The last errors the load met (creating, approving, reaping): reported, never thrown. */
  get errors(): readonly string[] {
    return this.#errors.slice(-20);
  }

  async setUp(): Promise<void> {
    for (const name of Object.values(namespaces))
      await this.#core.createNamespace({ body: { metadata: { name } } });
    await this.#finisher.start();
    for (let i = 0; i < apiPods; i++)
      await this.#create(
        aPod(`api-${i}`, namespaces.api)
          .label('app', 'api-frontend')
          .requests({ cpu: '500m', memory: '256Mi' })
          .obj(),
      );
    for (let i = 0; i < 3; i++)
      await this.#create(aPod(`foreign-${i}`, namespaces.etl).gated(foreignGate).obj());
    this.moveSignals(0);
  }

  /** Starts the stream (one unit per tickMs), the approver, the reaper and the signal mover. */
  start(tickMs: number, seed: number): void {
    this.#producing = true;
    this.#every(tickMs, () => this.#produce());
    this.#every(tickMs * 3, () => this.#approvePending());
    this.#every(10_000, () => this.#reap());
    let step = seed;
    this.#every(15_000, () => this.moveSignals(++step));
  }

  /** Ends the stream; finishing, reaping and signal moves go on until stop(). */
  async stopProducing(): Promise<void> {
    this.#producing = false;
    await this.#approvePending();
  }

  async stop(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    await this.#finisher.stop();
  }

  /** The queue-length signal of every api pod moves to the next level (seeded start). */
  moveSignals(step: number): void {
    for (let i = 0; i < apiPods; i++)
      this.#exporter.set(
        queueMetric,
        { namespace: namespaces.api, pod: `api-${i}` },
        signalLevels[(step + i) % signalLevels.length]!,
      );
  }

  /** Deletes up to `count` held eval pods and re-creates each at once under the same name. */
  async recreateHeld(pick: number, count = 3): Promise<string[]> {
    const held = (await this.#core.listNamespacedPod({ namespace: namespaces.ml })).items.filter(
      (p) => p.metadata?.name?.startsWith('eval-') && (p.spec?.schedulingGates ?? []).length > 0,
    );
    const chosen = held.slice(pick % Math.max(1, held.length)).slice(0, count);
    for (const pod of chosen) {
      const name = pod.metadata!.name!;
      await this.#core.deleteNamespacedPod({
        namespace: namespaces.ml,
        name,
        gracePeriodSeconds: 0,
      });
      await this.#create(this.#evalPod(name));
      this.counts.recreated += 1;
    }
    return chosen.map((p) => p.metadata!.name!);
  }

  #every(ms: number, work: () => Promise<void> | void): void {
    this.#timers.push(
      setInterval(() => {
        Promise.resolve(work()).catch((error: unknown) => this.#error(error));
      }, ms),
    );
  }

  #error(error: unknown): void {
    this.#errors.push(`${new Date().toISOString()} ${(error as Error).message}`);
  }

  async #produce(): Promise<void> {
    if (!this.#producing) return;
    const kind = unitKinds[this.#tick++ % unitKinds.length]!;
    this.counts.units[kind] += 1;
    const n = this.counts.units[kind];
    if (kind === 'job') await this.#createJob(`batch-${n}`);
    if (kind === 'eval') await this.#create(this.#evalPod(`eval-${n}`));
    if (kind === 'load') {
      await this.#create(
        aPod(`load-${n}`, namespaces.etl)
          .label('app', 'nightly-load')
          .gated(gates.load)
          .requests({ cpu: '100m', memory: '32Mi' })
          .obj(),
      );
      this.#unapproved.push(`load-${n}`);
      this.#newestLoadAt = Date.now();
    }
    if (kind === 'gang')
      for (let member = 0; member < gangSize; member++) {
        await this.#create(
          aPod(`gang-${n}-${member}`, namespaces.ml)
            .label('app.kubernetes.io/component', 'trainer')
            .label('ml.tollgate.io/gang', `gang-${n}`)
            .annotate('ml.tollgate.io/gang-size', String(gangSize))
            .gated(gates.gang)
            .requests({ cpu: '100m', memory: '32Mi' })
            .obj(),
        );
        await sleep(300);
      }
  }

  #evalPod(name: string): V1Pod {
    return aPod(name, namespaces.ml)
      .label('app.kubernetes.io/component', 'evaluator')
      .gated(gates.eval)
      .requests({ cpu: '100m', memory: '32Mi' })
      .obj();
  }

  async #createJob(name: string): Promise<void> {
    await this.#batch.createNamespacedJob({
      namespace: namespaces.etl,
      body: {
        metadata: { name },
        spec: {
          backoffLimit: 0,
          ttlSecondsAfterFinished: finishedKeptSeconds,
          template: {
            metadata: { labels: { app: 'batch' } },
            spec: {
              restartPolicy: 'Never',
              schedulingGates: [{ name: gates.job }],
              containers: [
                {
                  name: 'app',
                  image: 'registry.example/app:1',
                  resources: { requests: { cpu: '100m', memory: '32Mi' } },
                },
              ],
            },
          },
        },
      },
    });
    this.counts.pods += 1;
  }

  async #create(pod: V1Pod): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#core.createNamespacedPod({
          namespace: pod.metadata!.namespace!,
          body: creatable(pod),
        });
        this.counts.pods += 1;
        return;
      } catch (error) {
        // An API server restart or throttling lasts seconds: a person's script retries for a
        // minute (a gang member never created would hold its gang forever).
        if (attempt >= 60) throw error;
        await sleep(1000);
      }
    }
  }

  /**
   * One at a time: a turn's list of existing pods must not prune an approval another turn
   * committed for a pod created after that list was taken (the soak's last held load
   * stayed unapproved so, seed 1, 3 min, under load 14).
   */
  #approvePending(): Promise<void> {
    const turn = this.#approving.then(() => this.#approveOnce());
    this.#approving = turn.catch(() => undefined);
    return turn;
  }

  /** One commit approving every held load created since the last, pruning reaped ones. */
  async #approveOnce(): Promise<void> {
    // Taken off the list only once the commit is pushed: a failed attempt (API server or
    // Git away) is retried on the next turn, as a person would.
    const names = [...this.#unapproved];
    // A name-only approval reaches only pods created in a second before its commit's
    // (both times are whole seconds), as a reviewer's merge always is.
    await pastTheSecondOf(this.#newestLoadAt);
    const existing = new Set(
      (await this.#core.listNamespacedPod({ namespace: namespaces.etl })).items.map(
        (p) => p.metadata?.name,
      ),
    );
    const expiresAt = new Date(Date.now() + approvalLifetimeMs).toISOString();
    await this.#policy.change(`approve ${names.length} loads`, (state) => {
      const approvals = new Map([...state.approvals].filter(([name]) => existing.has(name)));
      for (const name of names) approvals.set(name, expiresAt);
      return { ...state, approvals };
    });
    this.#unapproved.splice(0, names.length);
  }

  async #reap(): Promise<void> {
    for (const namespace of [namespaces.ml, namespaces.etl]) {
      const pods = (await this.#core.listNamespacedPod({ namespace })).items;
      const keptSince = Date.now() - finishedKeptSeconds * 1000;
      const finished = pods.filter((p) => {
        if (p.status?.phase !== 'Succeeded') return false;
        const uid = p.metadata?.uid ?? '';
        if (!this.#succeededSeen.has(uid)) this.#succeededSeen.set(uid, Date.now());
        return this.#succeededSeen.get(uid)! < keptSince;
      });
      for (const pod of finished) {
        this.#succeededSeen.delete(pod.metadata?.uid ?? '');
        await this.#core
          .deleteNamespacedPod({ namespace, name: pod.metadata!.name!, gracePeriodSeconds: 0 })
          .catch(() => undefined);
        this.counts.reaped += 1;
      }
    }
  }
}
