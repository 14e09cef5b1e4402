/**
 * Leader election on a coordination.k8s.io/v1 Lease, so two replicas never act at once.
 *
 * client-go's acquire/renew loop is the model (see leader-timing.ts for the rules and the
 * two places tollgate departs from it). Every update is a replace conditioned on the
 * resourceVersion read, so two candidates racing for an expired lease cannot both win:
 * the loser gets a 409 and waits again.
 *
 * Fencing: `fence()` is true only while the current term is open, judged against the
 * clock at the moment of the call, so a leader whose renewals hang or fail stops writing
 * a renew deadline after the last renewal it started, strictly before the lease can expire
 * for anyone else. The dispatcher calls it before every write. Each term also has a
 * fencing token (holder + leaseTransitions, unique per term) and an AbortSignal that
 * fires when the term ends, for writes that are already in flight.
 *
 * Failure modes: API errors and timeouts during a term are retried every retry period
 * until the renew deadline; a lost term returns the elector to candidacy (it does not
 * exit the process); stop() releases the lease (holder cleared) so a successor need not
 * wait out the lease duration.
 */
import {
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { Counter, Gauge } from 'prom-client';
import { systemClock, type Clock } from '../lib/clock.ts';
import { registry } from '../observe/metrics.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import {
  DEFAULT_LEADER_TIMINGS,
  decideLeaseAction,
  fenceOpen,
  formatFencingToken,
  nextAcquireDelay,
  validateLeaderTimings,
  type FencingToken,
  type LeaderTimings,
  type LeaseAction,
  type LeaseRecord,
} from './leader-timing.ts';

export type { FencingToken, LeaderTimings };
export { DEFAULT_LEADER_TIMINGS, formatFencingToken };

const leaderGauge =
  (registry.getSingleMetric('tollgate_leader') as Gauge | undefined) ??
  new Gauge({
    name: 'tollgate_leader',
    help: '1 while this replica holds the leader lease and its term is open, else 0.',
    registers: [registry],
  });
leaderGauge.set(0);

const transitionsCounter =
  (registry.getSingleMetric('tollgate_leader_transitions_total') as
    Counter<'change'> | undefined) ??
  new Counter({
    name: 'tollgate_leader_transitions_total',
    help: 'Leadership changes of this replica: acquired a term, or lost/released one.',
    labelNames: ['change'] as const,
    registers: [registry],
  });
for (const change of ['acquired', 'lost', 'released']) transitionsCounter.inc({ change }, 0);

/** The three Lease calls election needs; errors carry `code` (HTTP status) like ApiException. */
export interface LeaseClient {
  get(namespace: string, name: string): Promise<V1Lease | undefined>;
  create(namespace: string, lease: V1Lease): Promise<V1Lease>;
  replace(namespace: string, name: string, lease: V1Lease): Promise<V1Lease>;
}

export function leaseClientFromKubeConfig(kubeConfig: KubeConfig): LeaseClient {
  const api = kubeConfig.makeApiClient(CoordinationV1Api);
  return {
    async get(namespace, name) {
      try {
        return await api.readNamespacedLease({ namespace, name });
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    },
    create: (namespace, body) => api.createNamespacedLease({ namespace, body }),
    replace: (namespace, name, body) => api.replaceNamespacedLease({ namespace, name, body }),
  };
}

export interface LeaderElectorOptions {
  readonly leases: LeaseClient;
  readonly namespace: string;
  readonly name: string;
  /** Unique per replica (the pod name by default). */
  readonly identity: string;
  readonly timings?: LeaderTimings;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

export interface LeaderTerm {
  readonly token: FencingToken;
  /** Aborted when this term ends (lost or released). */
  readonly signal: AbortSignal;
}

type Listener = (term: LeaderTerm) => void;

export class LeaderElector {
  readonly identity: string;
  readonly timings: LeaderTimings;
  readonly #leases: LeaseClient;
  readonly #namespace: string;
  readonly #name: string;
  readonly #clock: Clock;
  readonly #log: Logger;

  #record: V1Lease | undefined;
  #observedResourceVersion: string | undefined;
  #observedAt = 0;
  #term: { token: FencingToken; controller: AbortController } | undefined;
  #lastRenewStartedAt = Number.NEGATIVE_INFINITY;
  #stop = new AbortController();
  #running: Promise<void> | undefined;
  #started: Listener[] = [];
  #stopped: Listener[] = [];
  /** Annotations this replica sets on the Lease from its next write on (setAnnotation). */
  readonly #annotations: Record<string, string> = {};

  constructor(options: LeaderElectorOptions) {
    this.timings = validateLeaderTimings(options.timings ?? DEFAULT_LEADER_TIMINGS);
    if (!options.identity) throw new Error('leader election: identity must not be empty');
    this.identity = options.identity;
    this.#leases = options.leases;
    this.#namespace = options.namespace;
    this.#name = options.name;
    this.#clock = options.clock ?? systemClock;
    this.#log = (options.logger ?? silentLogger).child({
      component: 'leader',
      lease: `${options.namespace}/${options.name}`,
    });
  }

  /** True only while this replica's term is open (see fence()). */
  isLeader(): boolean {
    return (
      this.#term !== undefined &&
      fenceOpen({
        leading: true,
        lastRenewStartedAt: this.#lastRenewStartedAt,
        now: this.#clock.now(),
        renewDeadlineMs: this.timings.renewDeadlineMs,
      })
    );
  }

  /**
   * Carried on the Lease from this replica's next write (a renewal: within a retry
   * period) on; a successor's writes keep it until it sets its own. The audit trail
   * keeps its tamper anchor here (src/run/audit.ts).
   */
  setAnnotation(key: string, value: string): void {
    this.#annotations[key] = value;
  }

  /** An annotation of the Lease as last read or written by this replica. */
  annotation(key: string): string | undefined {
    return this.#record?.metadata?.annotations?.[key];
  }

  /** Called before every API write: false means do not write. */
  readonly fence = (): boolean => this.isLeader();

  /** The open term's fencing token as text (`holder/transitions`), undefined between terms. */
  readonly termToken = (): string | undefined => {
    const term = this.term();
    return term === undefined ? undefined : formatFencingToken(term.token);
  };

  /** The open term, if any. */
  term(): LeaderTerm | undefined {
    if (!this.isLeader() || this.#term === undefined) return undefined;
    return { token: this.#term.token, signal: this.#term.controller.signal };
  }

  onStartedLeading(listener: Listener): void {
    this.#started.push(listener);
  }

  onStoppedLeading(listener: Listener): void {
    this.#stopped.push(listener);
  }

  /** Starts campaigning in the background. */
  start(): void {
    if (this.#running) return;
    this.#running = this.#loop().catch((error: unknown) => {
      this.#log.error({ err: error }, 'leader election loop crashed');
      this.#endTerm('lost');
    });
  }

  /** Stops campaigning and releases the lease if this replica holds it. */
  async stop(): Promise<void> {
    this.#stop.abort();
    // An attempt hung on an unreachable API server must not hold the shutdown: after the
    // renew deadline the term is over anyway, and the lease then simply expires.
    await settleWithin(this.#running, this.timings.renewDeadlineMs);
    const wasLeading = this.#term !== undefined;
    this.#endTerm('released');
    if (wasLeading) await settleWithin(this.#release(), this.timings.renewDeadlineMs);
  }

  async #loop(): Promise<void> {
    const stopSignal = this.#stop.signal;
    while (!stopSignal.aborted) {
      let action: LeaseAction | undefined;
      const startedAt = this.#clock.now();
      try {
        action = await this.#withTermDeadline(this.#attempt(startedAt));
      } catch (error) {
        this.#log.warn(
          { err: errorSummary(error) },
          this.#term ? 'lease renewal failed' : 'lease acquisition failed',
        );
      }
      if (this.#term !== undefined && !this.isLeader()) {
        this.#log.error(
          { renewDeadlineMs: this.timings.renewDeadlineMs },
          'lease not renewed within the renew deadline; leadership lost',
        );
        this.#endTerm('lost');
      }
      const delay = this.#term
        ? this.timings.retryPeriodMs
        : nextAcquireDelay(action, this.#clock.now(), this.timings.retryPeriodMs);
      await sleep(delay, stopSignal);
    }
  }

  /** While leading, an attempt may not outlive the term: a hung renewal must not delay the loss. */
  async #withTermDeadline<T>(attempt: Promise<T>): Promise<T | undefined> {
    if (this.#term === undefined) return attempt;
    const remaining = this.#lastRenewStartedAt + this.timings.renewDeadlineMs - this.#clock.now();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), Math.max(0, remaining));
    });
    attempt.catch(() => undefined); // a late rejection after the deadline is already moot
    try {
      return await Promise.race([attempt, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #attempt(startedAt: number): Promise<LeaseAction> {
    // A leader renews from its cached record first (one request); a 409 means someone
    // else wrote the lease, so it reads and decides again like a candidate.
    if (this.#term !== undefined && this.#record !== undefined) {
      try {
        await this.#write('renew', this.#record, startedAt);
        return { action: 'renew' };
      } catch (error) {
        if (statusOf(error) !== 409) throw error;
      }
    }
    const current = await this.#leases.get(this.#namespace, this.#name);
    this.#observe(current);
    const action = decideLeaseAction({
      record: current ? toRecord(current) : undefined,
      identity: this.identity,
      now: this.#clock.now(),
      observedAt: this.#observedAt,
      leading: this.isLeader(),
      leaseDurationMs: this.timings.leaseDurationMs,
    });
    if (action.action === 'wait') {
      if (this.#term !== undefined) this.#endTerm('lost');
      return action;
    }
    await this.#write(action.action, current, startedAt);
    return action;
  }

  async #write(
    action: 'create' | 'renew' | 'takeover',
    current: V1Lease | undefined,
    startedAt: number,
  ): Promise<void> {
    const now = new V1MicroTime(this.#clock.now());
    const spec = current?.spec ?? {};
    const newTerm = action !== 'renew';
    const transitions = action === 'create' ? 0 : (spec.leaseTransitions ?? 0) + (newTerm ? 1 : 0);
    const annotations = { ...current?.metadata?.annotations, ...this.#annotations };
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        ...(current?.metadata ?? {}),
        ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
        name: this.#name,
        namespace: this.#namespace,
      },
      spec: {
        holderIdentity: this.identity,
        leaseDurationSeconds: this.timings.leaseDurationMs / 1000,
        acquireTime: newTerm ? now : spec.acquireTime,
        renewTime: now,
        leaseTransitions: transitions,
      },
    };
    const written =
      action === 'create'
        ? await this.#leases.create(this.#namespace, body)
        : await this.#leases.replace(this.#namespace, this.#name, body);
    this.#observe(written);
    if (newTerm)
      this.#beginTerm({ holder: this.identity, leaseTransitions: transitions }, startedAt);
    else this.#lastRenewStartedAt = startedAt;
  }

  #observe(lease: V1Lease | undefined): void {
    this.#record = lease;
    const resourceVersion = lease?.metadata?.resourceVersion;
    if (resourceVersion !== this.#observedResourceVersion) {
      this.#observedResourceVersion = resourceVersion;
      this.#observedAt = this.#clock.now();
    }
  }

  #beginTerm(token: FencingToken, startedAt: number): void {
    if (this.#term !== undefined) this.#endTerm('lost');
    this.#lastRenewStartedAt = startedAt;
    this.#term = { token, controller: new AbortController() };
    leaderGauge.set(1);
    transitionsCounter.inc({ change: 'acquired' });
    this.#log.info({ fencingToken: formatFencingToken(token) }, 'became leader');
    const term = { token, signal: this.#term.controller.signal };
    for (const listener of this.#started) listener(term);
  }

  #endTerm(change: 'lost' | 'released'): void {
    const ending = this.#term;
    if (ending === undefined) return;
    this.#term = undefined;
    this.#lastRenewStartedAt = Number.NEGATIVE_INFINITY;
    ending.controller.abort(new Error(`leadership ${change}`));
    leaderGauge.set(0);
    transitionsCounter.inc({ change });
    this.#log.info({ fencingToken: formatFencingToken(ending.token), change }, 'leadership ended');
    const term = { token: ending.token, signal: ending.controller.signal };
    for (const listener of this.#stopped) listener(term);
  }

  /** Clears the holder (conditioned on the resourceVersion we hold) so a successor starts at once. */
  async #release(): Promise<void> {
    const current = this.#record;
    if (current?.spec?.holderIdentity !== this.identity) return;
    const now = new V1MicroTime(this.#clock.now());
    try {
      const released = await this.#leases.replace(this.#namespace, this.#name, {
        ...current,
        spec: {
          leaseTransitions: current.spec.leaseTransitions,
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
        },
      });
      this.#observe(released);
      this.#log.info('lease released');
    } catch (error) {
      // Not fatal: the lease then expires after its duration and a successor takes over.
      this.#log.warn({ err: errorSummary(error) }, 'could not release the lease; it will expire');
    }
  }
}

function toRecord(lease: V1Lease): LeaseRecord {
  return {
    holderIdentity: lease.spec?.holderIdentity,
    leaseDurationSeconds: lease.spec?.leaseDurationSeconds,
    leaseTransitions: lease.spec?.leaseTransitions,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}

function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown; statusCode?: unknown } | null)?.code;
  if (typeof code === 'number') return code;
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof statusCode === 'number' ? statusCode : undefined;
}

function errorSummary(error: unknown): { message: string; code?: number } {
  const message = error instanceof Error ? error.message.split('\n')[0]! : String(error);
  return { message: message.slice(0, 300), code: statusOf(error) };
}

async function settleWithin(work: Promise<unknown> | undefined, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work?.catch(() => undefined),
    new Promise((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
