/**
 * The gate-release stack wired from its real parts, as the e2e controller process and
 * the benchmarks run it: the policy source (Git), the live ClusterView (whatever identity
 * the KubeConfig carries; the `tollgate` one makes deploy/'s RBAC apply), the write
 * executor, the priority dispatcher (src/dispatch/queue.ts), the stale-guard, the event
 * recorder, the Git audit writer, optional start-up recovery of open intents, and the
 * gate-release loop.
 *
 * `prepareGateReleaseStack` builds and syncs everything but the loop, so a caller can start
 * its clock (or its own watcher) right before `startLoop()`; `startGateReleaseStack` does
 * both. The dispatcher handed to the loop counts what passes through it (`counters`):
 * every send at the executor (retries included), every success, every accepted
 * non-coalesced request, and each request's result. The counting adds no behaviour.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { createClusterView } from '../../src/cluster/view.ts';
import {
  createResourceSource,
  type ResourceSource,
  type ResourceTarget,
} from '../../src/cluster/source.ts';
import { managedNamespaces } from '../../src/run/view.ts';
import { podReader } from '../../src/cluster/client.ts';
import { createWriteExecutor } from '../../src/cluster/writer.ts';
import type { ClusterView, ObjectReference } from '../../src/cluster/types.ts';
import { StaleGuard } from '../../src/cluster/stale-guard.ts';
import { createEventRecorder } from '../../src/cluster/events.ts';
import { eventDispatcher } from './event-writes.ts';
import { GitAuditWriter, type AuditMode } from '../../src/audit/writer.ts';
import { openAuditSource } from '../../src/audit/reader.ts';
import type { AuditSink } from '../../src/audit/types.ts';
import {
  startGateReleaseLoop,
  type GateReleaseDeps,
  type GateReleaseLoop,
} from '../../src/loops/gate-release.ts';
import { recoverOpenIntents } from '../../src/loops/gate-release-recovery.ts';
import { recoverBlockedWrites } from '../../src/loops/gate-release-blocked.ts';
import { createReleasedConditions } from '../../src/loops/released-condition.ts';
import { recordBreakGlass } from '../../src/loops/break-glass.ts';
import { PolicySource } from '../../src/policy/source.ts';
import type { Policy } from '../../src/policy/model.ts';
import { createDispatcher } from '../../src/dispatch/queue.ts';
import type { Dispatcher, WriteExecutor, WriteResult } from '../../src/dispatch/types.ts';
import { systemClock, type Clock } from '../../src/lib/clock.ts';
import type { Decision } from '../../src/decide/decision.ts';
import type { Logger } from '../../src/observe/log.ts';

export interface GateReleaseStackOptions {
  readonly kubeConfig: KubeConfig;
  readonly policyUrl: string;
  readonly auditUrl: string;
  /** Token of the Git server serving both repositories. */
  readonly token: string;
  /** Working folder: the policy clone goes to `<cacheDir>/policy`, the audit clone beside it. */
  readonly cacheDir: string;
  /** Names the controller in audit commits and as the events' reporting instance. */
  readonly controller: string;
  readonly cluster: string;
  readonly auditMode: AuditMode;
  /**
   * The audit commit limits; default 1,000 decisions or 200 ms, so a test's records land
   * quickly (the shipped default, `defaultAuditBatch`, is 500 or 2 s).
   */
  readonly auditBatch?: { readonly maxDecisions: number; readonly maxDelayMs: number };
  /** Events handed to their dispatcher; default 50 a second, bursts of 100 (tests read them soon). */
  readonly eventRate?: { readonly ratePerSecond: number; readonly burst: number };
  readonly log: Logger;
  /** How often the policy source polls Git. */
  readonly policyIntervalMs: number;
  readonly dispatcher: {
    readonly capacity: number;
    readonly concurrency: number;
    readonly qps: number;
    readonly burst: number;
  };
  /**
   * Give intents a killed predecessor left open the outcome the cluster shows, and carry
   * over the writes the trail shows Blocked, before the loop starts (as a new term does).
   */
  readonly recoverIntents?: boolean;
  readonly debounceMs?: number;
  /** The share of the event loop passes may take; absent, the loop's default. */
  readonly passShare?: number;
  readonly budgetRampMs?: number;
  /** Timestamps (performance.now()) of each stage, for benchmarks that break latency down. */
  readonly trace?: StackTrace;
  /**
   * Keep the pods' tollgate.io/Released condition (loops/released-condition.ts), through a
   * small dispatcher of its own beside the loop's (as Events here), so its writes are
   * counted apart (`counters.conditionWrites`) and other tests' write counts stay exact.
   */
  readonly releasedConditions?: boolean;
  /**
   * The clock the loop decides by (Schedule windows, expiry) and the dispatcher's
   * deadlines follow, so a test can set the time of day. Default: the system clock.
   */
  readonly clock?: Clock;
  /** Record break-glass releases before the loop starts, as a term start does (src/loops/break-glass.ts). */
  readonly breakGlass?: boolean;
  /**
   * Keep only the pods of the namespaces the policy's tenants own, re-scoped when a new
   * commit is in force before the pass that uses it, as `tollgate run` does (run/view.ts).
   * Default: pods of every namespace.
   */
  readonly scopeNamespaces?: boolean;
  /** How long a pass waits for the view to sync before it is tried again (default 30 s). */
  readonly syncWaitMs?: number;
  /** Wraps each real source of the view (a test holds a list or a watch back). */
  readonly wrapSource?: (target: ResourceTarget, source: ResourceSource) => ResourceSource;
}

export interface StackTrace {
  /** The loop handed these pods' intents to the audit (after planning) and the call returned (strict: pushed). */
  intents?(keys: readonly string[], calledAt: number, returnedAt: number): void;
  /** The executor sent this pod's write and the API server answered. */
  write?(key: string, sentAt: number, answeredAt: number): void;
  /** A pass began (before it waits for the view, if it must). */
  passBegan?(at: number): void;
}

export interface StackCounters {
  /** Requests handed to the executor, retries included. */
  sends: number;
  /** Requests the executor completed without error. */
  succeeded: number;
  /** Requests the dispatcher accepted as new (not coalesced into a queued one). */
  accepted: number;
  /** Final result of each accepted request. */
  readonly results: Record<WriteResult['result'], number>;
  /** pods/status patches of the tollgate.io/Released condition sent to the API server. */
  conditionWrites: number;
}

export interface PreparedGateReleaseStack {
  readonly policies: PolicySource;
  readonly view: ClusterView;
  readonly dispatcher: Dispatcher;
  readonly audit: GitAuditWriter;
  readonly counters: StackCounters;
  /** Intents recovered at start (0 unless `recoverIntents`). */
  readonly recovered: number;
  /** Break-glass releases recorded at start (none unless `breakGlass`). */
  readonly breakGlass: readonly Decision[];
  /** Starts the loop; call once. */
  startLoop(): GateReleaseLoop;
  /** Stops the loop (if started), drains the dispatcher, flushes and closes the audit, stops the rest. */
  stop(): Promise<void>;
}

export interface GateReleaseStack extends PreparedGateReleaseStack {
  readonly loop: GateReleaseLoop;
}

/** ObjectCondition targets the policy names, per namespace of the tenant when the policy names none. */
function objectRefs(policy: Policy): ObjectReference[] {
  const refs: ObjectReference[] = [];
  for (const gp of policy.gatePolicies) {
    const tenant = policy.tenants.get(gp.tenant);
    for (const c of gp.conditions) {
      if (c.type !== 'ObjectCondition') continue;
      const namespaces = c.object.namespace ? [c.object.namespace] : (tenant?.namespaces ?? []);
      for (const namespace of namespaces) refs.push({ ...c.object, namespace });
    }
  }
  return refs;
}

export async function prepareGateReleaseStack(
  options: GateReleaseStackOptions,
): Promise<PreparedGateReleaseStack> {
  const { kubeConfig: kc, log } = options;
  mkdirSync(options.cacheDir, { recursive: true });
  const policies = new PolicySource({
    location: options.policyUrl,
    token: options.token,
    cacheDir: join(options.cacheDir, 'policy'),
    intervalMs: options.policyIntervalMs,
    logger: log,
  });
  const first = await policies.start();
  if (first.kind !== 'applied')
    throw new Error(`policy at ${options.policyUrl}: ${JSON.stringify(first)}`);

  const wrapSource = options.wrapSource;
  const view = createClusterView({
    kubeConfig: kc,
    logger: log,
    ...(options.scopeNamespaces ? { namespaces: managedNamespaces(policies.current()!) } : {}),
    ...(wrapSource
      ? { sourceFactory: (target) => wrapSource(target, createResourceSource(kc, target)) }
      : {}),
  });
  // A new policy commit may name other objects; the view watches them before the pass that needs them.
  let watchedCommit = '';
  const currentPolicy = (): Policy | undefined => {
    const policy = policies.current();
    if (policy && policy.commit !== watchedCommit) {
      watchedCommit = policy.commit;
      if (options.scopeNamespaces) view.setNamespaces(managedNamespaces(policy));
      view.watchObjects(objectRefs(policy));
    }
    return policy;
  };
  currentPolicy();
  view.start();
  await view.whenSynced();

  const counters: StackCounters = {
    sends: 0,
    succeeded: 0,
    accepted: 0,
    results: { succeeded: 0, conflict: 0, failed: 0, expired: 0, cancelled: 0 },
    conditionWrites: 0,
  };
  const executor = createWriteExecutor(kc);
  const trace = options.trace;
  const counting: WriteExecutor = async (request, signal) => {
    counters.sends += 1;
    const sentAt = performance.now();
    const out = await executor(request, signal);
    trace?.write?.(request.key, sentAt, performance.now());
    counters.succeeded += 1;
    return out;
  };
  const clock = options.clock ? { clock: options.clock } : {};
  const real = createDispatcher({ executor: counting, ...options.dispatcher, ...clock });
  const dispatcher: Dispatcher = {
    enqueue(request) {
      const out = real.enqueue(request);
      if (out.accepted && !out.coalesced) {
        counters.accepted += 1;
        void out.done.then((r) => {
          counters.results[r.result] += 1;
        });
      }
      return out;
    },
    whenNotFull: (signal, band) => real.whenNotFull(signal, band),
    cancel: (key, reason) => real.cancel(key, reason),
    get depth() {
      return real.depth;
    },
    close: (closeOptions) => real.close(closeOptions),
  };

  const { writer: audit } = await GitAuditWriter.open({
    url: options.auditUrl,
    token: options.token,
    cacheDir: options.cacheDir,
    cluster: options.cluster,
    controller: options.controller,
    mode: options.auditMode,
    batch: options.auditBatch ?? { maxDecisions: 1000, maxDelayMs: 200 },
    logger: log,
  });
  const recorder = createEventRecorder(eventDispatcher(kc), {
    ...(options.eventRate ?? { ratePerSecond: 50, burst: 100 }),
    logger: log,
    reportingInstance: options.controller,
  });

  let recovered = 0;
  let blocked: Awaited<ReturnType<typeof recoverBlockedWrites>> = {};
  if (options.recoverIntents) {
    const auditSource = await openAuditSource(options.auditUrl, 'tollgate/audit', {
      token: options.token,
    });
    try {
      const done = await recoverOpenIntents({
        source: auditSource,
        cluster: options.cluster,
        view,
        policy: policies.current()!,
        audit,
        clock: systemClock,
        log,
      });
      recovered = done.length;
      blocked = await recoverBlockedWrites(auditSource, options.cluster, log);
    } finally {
      auditSource.close();
    }
  }

  const staleGuard = new StaleGuard({
    policy: policies.current()!.staleness,
    loop: 'gate-release',
  });
  staleGuard.markSynced();
  const readPod = podReader(kc);

  const tracedAudit: AuditSink = trace?.intents
    ? {
        async recordIntents(decisions) {
          const calledAt = performance.now();
          await audit.recordIntents(decisions);
          trace.intents?.(
            decisions.map((d) => `${d.target.namespace}/${d.target.name}`),
            calledAt,
            performance.now(),
          );
        },
        record: (decisions) => audit.record(decisions),
        flush: () => audit.flush(),
        get backlog() {
          return audit.backlog;
        },
        close: () => audit.close(),
      }
    : audit;

  const conditionDispatcher = createDispatcher({
    executor: async (request, signal) => {
      counters.conditionWrites += 1;
      return executor(request, signal);
    },
    concurrency: 1,
    capacity: 16,
  });
  let loop: GateReleaseLoop | undefined;
  let stopPassOnPolicy = (): void => undefined;
  const deps: GateReleaseDeps = {
    view,
    dispatcher,
    audit: tracedAudit,
    policy: currentPolicy,
    staleGuard,
    readPod,
    events: (pod, e) =>
      recorder.record(
        {
          namespace: pod.metadata?.namespace ?? '',
          name: pod.metadata?.name ?? '',
          uid: pod.metadata?.uid ?? '',
        },
        { type: e.type, reason: e.reason, action: e.action, note: e.message },
      ),
    log,
    ...clock,
    ...(options.releasedConditions
      ? {
          releasedCondition: createReleasedConditions({
            dispatcher: conditionDispatcher,
            clock: systemClock,
            log,
          }),
        }
      : {}),
    ...(options.debounceMs !== undefined ? { debounceMs: options.debounceMs } : {}),
    ...(options.passShare !== undefined ? { passShare: options.passShare } : {}),
    ...(options.budgetRampMs !== undefined ? { budgetRampMs: options.budgetRampMs } : {}),
    ...(options.syncWaitMs !== undefined ? { syncWaitMs: options.syncWaitMs } : {}),
    ...(trace?.passBegan
      ? {
          watchdog: {
            begin: () => {
              trace.passBegan?.(performance.now());
              return () => undefined;
            },
          },
        }
      : {}),
    blocked,
  };
  // Like a term start: break-glass releases recorded before the loop decides anything.
  const breakGlass = options.breakGlass
    ? await recordBreakGlass({
        view,
        readPod,
        policy: policies.current()!,
        audit,
        dispatcher: conditionDispatcher,
        ...(deps.events ? { events: deps.events } : {}),
        clock: options.clock ?? systemClock,
        log,
      })
    : [];
  return {
    policies,
    view,
    dispatcher,
    audit,
    counters,
    recovered,
    breakGlass,
    startLoop() {
      if (loop) throw new Error('gate-release stack: the loop is already started');
      const started = startGateReleaseLoop(deps);
      loop = started;
      // As `tollgate run` does (run/loops.ts, superviseLoops): a new policy is acted on at
      // once, not at the next pod change or re-check of a held pod.
      stopPassOnPolicy = policies.onPolicy(() => {
        void started
          .pass()
          .catch((error: unknown) => log.warn({ err: error }, 'pass on a new policy failed'));
      });
      return started;
    },
    async stop() {
      stopPassOnPolicy();
      await loop?.stop();
      await dispatcher.close({ cancelQueued: false });
      await conditionDispatcher.close({ cancelQueued: true });
      await audit.flush();
      await audit.close();
      await recorder.close();
      policies.stop();
      await view.stop();
    },
  };
}

export async function startGateReleaseStack(
  options: GateReleaseStackOptions,
): Promise<GateReleaseStack> {
  const prepared = await prepareGateReleaseStack(options);
  const loop = prepared.startLoop();
  return { ...prepared, loop };
}
