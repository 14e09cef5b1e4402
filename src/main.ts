/**
 * `tollgate run`, wiring only: every part is built elsewhere and tested there; this file
 * decides the order things start and stop in, and what /readyz reports.
 *
 * Start order, each step only after the previous one succeeded:
 *  1. the HTTP server (/healthz, /readyz, /metrics) -- first, not last, so /readyz can
 *     say WHY the replica is not ready yet while the steps below run;
 *  2. policy: the first valid snapshot (none valid -> exit 1, nothing else started);
 *  3. the cluster view, waiting for the initial sync;
 *  4. the audit writer (a remote that is down only queues commits);
 *  5. the dispatcher, fenced by the leader elector;
 *  6. leader election; the loops run only during a term (WhileLeader);
 *  7. cron sweeps, which only trigger passes, fetches and flushes.
 *
 * Shutdown (SIGTERM/SIGINT, or a fatal error): stop the sweeps and the loops (no new
 * work), close the dispatcher (queued writes cancelled, in-flight ones finish within the
 * shutdown timeout, then aborted), flush and close the audit, release the lease, stop
 * the view and the HTTP server. Exit 0 after a signal-initiated shutdown.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { CronJob } from 'cron';
import { openAuditSource } from './audit/reader.ts';
import { GitAuditWriter } from './audit/writer.ts';
import type { AuditSink } from './audit/types.ts';
import type { RunConfig } from './cli/run-config.ts';
import { loadKubeConfig, podReader } from './cluster/client.ts';
import { createEventRecorder, type EventRecorder } from './cluster/events.ts';
import { formatFencingToken, LeaderElector, leaseClientFromKubeConfig } from './cluster/leader.ts';
import type { ClusterView, ObjectReference } from './cluster/types.ts';
import { createClusterView, type LiveClusterView } from './cluster/view.ts';
import { createWriteExecutor } from './cluster/writer.ts';
import { measureCacheLag } from './cluster/cache-lag.ts';
import { createDispatcher } from './dispatch/queue.ts';
import type { Dispatcher } from './dispatch/types.ts';
import { startGateReleaseLoop, type GateReleaseLoop } from './loops/gate-release.ts';
import { recoverGateReleaseIntents } from './loops/gate-release-recovery.ts';
import { TermWrites, WhileLeader, type Generation } from './loops/leadership.ts';
import { quotasFromView, startResizeLoop, type ResizeLoop } from './loops/resize.ts';
import { StaleGuard } from './cluster/stale-guard.ts';
import { startObserveServer, type ObserveServer } from './observe/http.ts';
import { createLogger, redactUrl, type Logger } from './observe/log.ts';
import { collectProcessMetrics, registry } from './observe/metrics.ts';
import { systemClock } from './lib/clock.ts';
import type { Policy } from './policy/model.ts';
import { createPrometheusClient } from './signals/prometheus.ts';
import { PolicySource } from './policy/source.ts';
import { formatPolicyError } from './policy/errors.ts';

/**
 * Shutdown order: no new work first (sweeps, loops), then the writes in flight finish
 * or are cancelled while the term is still open (dispatcher), the audit records them,
 * and only then is the lease released, so a successor never overlaps a write of ours.
 */
const shutdownOrder = [
  'sweeps',
  'loops',
  'dispatcher',
  'events',
  'audit',
  'leader election',
  'cluster view',
  'policy',
  'http',
] as const;
type Part = (typeof shutdownOrder)[number];

export interface RunOptions {
  /** Resolves or aborts to request a shutdown (tests); SIGTERM/SIGINT always do. */
  readonly stop?: AbortSignal;
  readonly logger?: Logger;
}

/** Runs until a signal; resolves to the process exit code. */
export async function runTollgate(config: RunConfig, options: RunOptions = {}): Promise<number> {
  const log = options.logger ?? createLogger({ level: config.logLevel });
  const shutdown = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    log.info({ signal }, 'shutdown requested');
    shutdown.abort(new Error(`received ${signal}`));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  options.stop?.addEventListener('abort', () => shutdown.abort(options.stop?.reason), {
    once: true,
  });

  // Everything started so far; stopped in the shutdown order (see `shutdownOrder`).
  const stops: { name: Part; stop: () => Promise<unknown> }[] = [];
  const started = (name: Part, stop: () => Promise<unknown>): void => {
    stops.push({ name, stop });
  };
  let exitCode = 0;
  try {
    exitCode = await start(config, log, shutdown.signal, started);
  } catch (error) {
    if (!shutdown.signal.aborted) {
      log.fatal({ err: error }, 'tollgate could not start');
      exitCode = 1;
    }
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    stops.sort((a, b) => shutdownOrder.indexOf(a.name) - shutdownOrder.indexOf(b.name));
    for (const { name, stop } of stops) {
      const stopping = Date.now();
      try {
        await stop();
        log.info({ part: name, ms: Date.now() - stopping }, 'stopped');
      } catch (error) {
        log.error({ err: error, part: name }, 'did not stop cleanly');
        exitCode = exitCode || 1;
      }
    }
    log.info({ exitCode }, 'tollgate stopped');
  }
  return exitCode;
}

async function start(
  config: RunConfig,
  log: Logger,
  shutdown: AbortSignal,
  started: (name: Part, stop: () => Promise<unknown>) => void,
): Promise<number> {
  collectProcessMetrics();
  log.info(
    {
      identity: config.identity,
      policy:
        config.policy.source === 'git'
          ? { url: redactUrl(config.policy.url), ref: config.policy.ref }
          : config.policy,
      lease: `${config.lease.namespace}/${config.lease.name}`,
    },
    'tollgate starting',
  );

  // 1. Observability first, so /readyz can explain the steps below.
  // Filled in as the steps below complete; read by the readiness checks meanwhile.
  const parts: { policies?: PolicyFeed; view?: LiveClusterView } = {};
  const server: ObserveServer = await startObserveServer(config.metricsAddress, {
    registry,
    logger: log,
    readiness: {
      policy: () => (parts.policies?.current() ? undefined : 'no valid policy loaded yet'),
      'cluster-view': () =>
        parts.view === undefined
          ? 'cluster view not started'
          : parts.view.synced
            ? undefined
            : 'cluster view has not finished its initial list of pods, nodes and referenced objects',
    },
  });
  started('http', () => server.close());
  log.info({ url: server.url }, 'serving /metrics, /healthz, /readyz');

  const kubeConfig = loadKubeConfig(
    config.cluster.mode === 'kubeconfig'
      ? { kind: 'file', path: config.cluster.path }
      : { kind: 'in-cluster' },
  );
  if (config.cluster.mode === 'kubeconfig' && config.cluster.context) {
    if (!kubeConfig.getContextObject(config.cluster.context)) {
      throw new Error(
        `kubeconfig ${config.cluster.path}: no context named "${config.cluster.context}"`,
      );
    }
    kubeConfig.setCurrentContext(config.cluster.context);
  }
  const token = readToken(config);

  // 2. Policy: the first valid snapshot, or nothing starts.
  const policies = await openPolicySource(config, token, log);
  parts.policies = policies;
  started('policy', () => policies.stop());
  const first = policies.current();
  if (!first) {
    log.fatal(
      'no valid policy: see the errors above; the last good snapshot is kept only once there is one',
    );
    return 1;
  }
  log.info({ commit: first.commit }, 'policy loaded');

  // 3. The cluster view, scoped by the policy, synced before anyone decides on it.
  const liveView = createClusterView({
    kubeConfig,
    namespaces: managedNamespaces(first),
    logger: log,
  });
  parts.view = liveView;
  let scopedCommit = '';
  const scope = (policy: Policy): void => {
    if (policy.commit === scopedCommit) return;
    scopedCommit = policy.commit;
    liveView.setNamespaces(managedNamespaces(policy));
    liveView.watchObjects(referencedObjects(policy));
  };
  scope(first);
  policies.onPolicy((policy) => scope(policy));
  liveView.start();
  started('cluster view', () => liveView.stop());
  await liveView.whenSynced(shutdown);
  log.info('cluster view synced');
  // One stale-guard per loop, for the life of the process: a write made in one leader
  // term is still guarded in the next. Until the view has synced after a start, nothing
  // counts as fresh (restored = true), then versions are known again.
  const guards = {
    gate: new StaleGuard({ policy: first.staleness, loop: 'gate-release' }),
    resize: new StaleGuard({ policy: first.staleness, loop: 'resize' }),
  };
  for (const guard of Object.values(guards)) guard.markSynced();
  // The view's lag, measured on tollgate's own pod writes (see the executor below).
  liveView.cacheLag.onMeasured((ms) => {
    for (const guard of Object.values(guards)) guard.observeCacheLag(ms);
  });
  policies.onPolicy((policy) => {
    for (const guard of Object.values(guards)) guard.setPolicy(policy.staleness);
  });

  // 4. The audit trail.
  const auditUrl =
    config.audit.repo ??
    first.settings.audit.repo ??
    (config.policy.source === 'git' ? config.policy.url : undefined);
  if (auditUrl === undefined) {
    throw new Error(
      'no audit repository: set --audit-repo / TOLLGATE_AUDIT_REPO or settings.audit.repo in the policy (a policy folder has no remote to write to)',
    );
  }
  const { writer: audit } = await GitAuditWriter.open({
    url: auditUrl,
    branch: config.audit.branch ?? first.settings.audit.branch,
    ...(token === undefined ? {} : { token }),
    cacheDir: join(config.git.cacheDir, 'audit'),
    cluster: first.settings.cluster,
    controller: config.identity,
    mode: first.settings.audit.mode,
    batch: first.settings.audit.batch,
    logger: log,
  });
  started('audit', async () => {
    await audit
      .flush()
      .catch((error: unknown) =>
        log.error({ err: error }, 'final audit flush failed; commits stay queued locally'),
      );
    await audit.close();
  });

  // 5 + 6. Leader election; the dispatcher refuses every write outside an open term.
  const elector = new LeaderElector({
    leases: leaseClientFromKubeConfig(kubeConfig),
    namespace: config.lease.namespace,
    name: config.lease.name,
    identity: config.identity,
    timings: config.lease.timings,
    logger: log,
  });
  const termWrites = new TermWrites();
  const dispatcher: Dispatcher = createDispatcher({
    executor: termWrites.executor(
      measureCacheLag(createWriteExecutor(kubeConfig), liveView.cacheLag),
    ),
    fence: elector.fence,
    qps: config.api.qps,
    burst: config.api.qps * 2,
    concurrency: config.api.concurrency,
  });
  started('dispatcher', () => closeWithin(dispatcher, config.shutdownTimeoutMs, log));
  // Events are the dispatcher's lowest-priority writes (see cluster/events.ts).
  const events: EventRecorder = createEventRecorder(dispatcher, {
    reportingInstance: config.identity,
    logger: log,
  });
  // Events are rate-limited (a few per second): a long backlog is not worth holding a
  // shutdown for. Two seconds to write what it can; the rest is dropped and logged.
  started('events', async () => {
    if ((await within(events.close(), 2_000)) === 'timeout') {
      log.warn('Kubernetes Events still queued at shutdown were dropped');
    }
  });

  const readPod = podReader(kubeConfig);
  const toEvent = (
    pod: V1Pod,
    event: { type: 'Normal' | 'Warning'; reason: string; message: string },
  ): void => {
    const metadata = pod.metadata ?? {};
    events.record(
      { namespace: metadata.namespace ?? '', name: metadata.name ?? '', uid: metadata.uid ?? '' },
      { type: event.type, reason: event.reason, action: event.reason, note: event.message },
    );
  };

  let gateLoop: GateReleaseLoop | undefined;
  let resizeLoop: ResizeLoop | undefined;
  // A new policy is acted on at once. Without this pass it waited for the next pod change
  // or expiry sweep (up to --expiry-sweep later, 15 s by default): a raised budget
  // released nothing until then.
  policies.onPolicy(() => {
    void gateLoop
      ?.pass()
      .catch((error: unknown) => log.warn({ err: error }, 'pass on a new policy failed'));
  });
  const auditBranch = config.audit.branch ?? first.settings.audit.branch;
  const supervisor = new WhileLeader(
    elector,
    async (leaderTerm) => {
      const term = elector.term();
      // The loops' queued writes are cancelled when this term ends, even if another begins,
      // or when the loops stop (shutdown): stopping waits for the loops' writes, and
      // without this it waited for the whole queue to drain at --api-qps (10,000 queued
      // writes: minutes, far past a pod's termination grace period).
      const stopping = new AbortController();
      const termDispatcher = termWrites.bind(
        dispatcher,
        AbortSignal.any([leaderTerm.signal, stopping.signal]),
      );
      log.info(
        { fencingToken: term ? formatFencingToken(term.token) : undefined },
        'leading: recovering audit outcomes, then starting loops',
      );
      await recoverOutcomes({
        auditUrl,
        branch: auditBranch,
        token,
        cluster: first.settings.cluster,
        audit,
        view: liveView,
        policy: policies.current() ?? first,
        log,
      });
      gateLoop = startGateReleaseLoop({
        view: liveView,
        dispatcher: termDispatcher,
        audit,
        policy: () => policies.current(),
        staleGuard: guards.gate,
        cacheLagMs: () => liveView.cacheLag.lagMs(),
        events: toEvent,
        readPod,
        log,
      });
      const prometheusUrl =
        config.resize.prometheusUrl ?? policies.current()?.settings.prometheus?.url;
      if (prometheusUrl) {
        resizeLoop = startResizeLoop({
          view: liveView,
          policy: () => policies.current(),
          dispatcher: termDispatcher,
          audit,
          prometheus: createPrometheusClient({ url: prometheusUrl }),
          intervalMs: config.resize.intervalMs,
          staleGuard: guards.resize,
          events: toEvent,
          readPod,
          ...quotasFromView(liveView),
          cacheLagMs: () => liveView.cacheLag.lagMs(),
          logger: log,
        });
      } else if ((policies.current()?.resizePolicies.length ?? 0) > 0) {
        log.warn(
          'ResizePolicies exist but neither --prometheus-url nor settings.prometheus.url is set: the resize loop does not run',
        );
      }
      const generation: Generation = {
        stop: async () => {
          stopping.abort(new Error('loops stopping'));
          const loops = [gateLoop?.stop(), resizeLoop?.stop()];
          gateLoop = undefined;
          resizeLoop = undefined;
          await Promise.all(loops);
          log.info('loops stopped');
        },
      };
      return generation;
    },
    log,
  );
  elector.start();
  started('leader election', () => elector.stop());
  started('loops', () => supervisor.close());

  // 7. Sweeps: they only trigger work the loops and the audit do anyway.
  const sweeps = [
    CronJob.from({
      cronTime: config.schedules.expirySweep,
      onTick: () =>
        void gateLoop
          ?.pass()
          .catch((error: unknown) => log.warn({ err: error }, 'expiry sweep pass failed')),
      start: true,
      waitForCompletion: true,
    }),
    CronJob.from({
      cronTime: config.schedules.policyResync,
      onTick: () =>
        policies
          .refresh()
          .catch((error: unknown) => log.warn({ err: error }, 'policy resync failed')),
      start: true,
      waitForCompletion: true,
    }),
    CronJob.from({
      cronTime: config.schedules.auditFlush,
      onTick: () =>
        audit.flush().catch((error: unknown) => log.warn({ err: error }, 'audit flush failed')),
      start: true,
      waitForCompletion: true,
    }),
  ];
  started('sweeps', async () => {
    await Promise.all(sweeps.map((job) => job.stop()));
  });

  log.info('tollgate running');
  await new Promise<void>((resolve) => {
    if (shutdown.aborted) resolve();
    shutdown.addEventListener('abort', () => resolve(), { once: true });
  });
  return 0;
}

/**
 * A new term first records the outcomes a crashed predecessor (or this replica before a
 * restart) left open: gate-release intents whose write may or may not have happened,
 * decided from the pod's state (src/loops/gate-release-recovery.ts). A failure is logged
 * and does not block the loops: missing outcomes are a gap in the record, not a safety
 * problem (every write re-checks state). Resize intents are left to `tollgate audit verify`.
 */
async function recoverOutcomes(options: {
  auditUrl: string;
  branch: string;
  token: string | undefined;
  cluster: string;
  audit: AuditSink;
  view: ClusterView;
  policy: Policy;
  log: Logger;
}): Promise<void> {
  const started = Date.now();
  try {
    const source = await openAuditSource(
      options.auditUrl,
      options.branch,
      options.token === undefined ? {} : { token: options.token },
    );
    try {
      const recovered = await recoverGateReleaseIntents({
        source,
        cluster: options.cluster,
        view: options.view,
        policy: options.policy,
        audit: options.audit,
        clock: systemClock,
        log: options.log,
      });
      options.log.info(
        { recovered: recovered.length, ms: Date.now() - started },
        'audit: open intents checked at the start of the term',
      );
    } finally {
      source.close();
    }
  } catch (error) {
    options.log.warn(
      { err: error },
      'audit recovery failed; open intents stay without outcome until `tollgate audit verify`',
    );
  }
}

/** Queued writes are cancelled; in-flight ones get the shutdown timeout to finish. */
async function closeWithin(dispatcher: Dispatcher, timeoutMs: number, log: Logger): Promise<void> {
  if ((await within(dispatcher.close({ cancelQueued: true }), timeoutMs)) === 'timeout') {
    log.warn({ timeoutMs }, 'in-flight writes did not finish within the shutdown timeout');
  }
}

async function within(work: Promise<unknown>, timeoutMs: number): Promise<'done' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    return await Promise.race([work.then(() => 'done' as const), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function readToken(config: RunConfig): string | undefined {
  const source = config.git.token;
  if (!source) return undefined;
  const value =
    source.from === 'env' ? process.env[source.name] : readFileSync(source.path, 'utf8');
  const token = value?.trim();
  if (!token) {
    throw new Error(
      source.from === 'env'
        ? `the Git token variable ${source.name} is empty`
        : `the Git token file ${source.path} is empty`,
    );
  }
  return token;
}

/** Namespaces any tenant owns: the only pods tollgate needs to see. */
function managedNamespaces(policy: Policy): string[] {
  return [...new Set([...policy.tenants.values()].flatMap((tenant) => tenant.namespaces))].sort();
}

/** Objects ObjectCondition gates reference, per namespace of the tenant when not explicit. */
function referencedObjects(policy: Policy): ObjectReference[] {
  const refs = new Map<string, ObjectReference>();
  for (const gatePolicy of policy.gatePolicies) {
    const tenant = policy.tenants.get(gatePolicy.tenant);
    for (const condition of gatePolicy.conditions) {
      if (condition.type !== 'ObjectCondition') continue;
      const namespaces = condition.object.namespace
        ? [condition.object.namespace]
        : (tenant?.namespaces ?? []);
      for (const namespace of namespaces) {
        const ref = { ...condition.object, namespace };
        refs.set(`${ref.apiVersion}|${ref.kind}|${namespace}|${ref.name}`, ref);
      }
    }
  }
  return [...refs.values()];
}

/** What `tollgate run` needs from a policy source. */
interface PolicyFeed {
  /** The snapshot in force: the newest valid one, undefined before the first. */
  current(): Policy | undefined;
  /** Called with each new valid snapshot. */
  onPolicy(listener: (policy: Policy) => void): void;
  /** Fetch and compile now; an invalid result keeps the last good snapshot. */
  refresh(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The policy source (src/policy/source.ts) for a folder or a Git repository, polled by
 * the policy-resync sweep rather than its own timer. The first poll must yield a valid
 * policy: its errors are logged one per line and start-up stops.
 */
async function openPolicySource(
  config: RunConfig,
  token: string | undefined,
  log: Logger,
): Promise<PolicyFeed> {
  const source = new PolicySource({
    location: config.policy.source === 'git' ? config.policy.url : config.policy.dir,
    ...(config.policy.source === 'git' ? { ref: config.policy.ref } : {}),
    ...(config.policy.path ? { path: config.policy.path } : {}),
    ...(token === undefined ? {} : { token }),
    cacheDir: join(config.git.cacheDir, 'policy'),
    logger: log,
  });
  const first = await source.poll();
  if (first.kind === 'rejected') {
    for (const error of first.errors)
      log.error({ commit: first.commit, policyError: formatPolicyError(error) }, 'invalid policy');
  } else if (first.kind === 'fetch-failed') {
    log.error({ err: first.error.message, kind: first.error.kind }, 'policy could not be fetched');
  }
  return {
    current: () => source.current(),
    onPolicy: (listener) => void source.onPolicy(listener),
    refresh: async () => void (await source.poll()),
    stop: async () => source.stop(),
  };
}
