/**
 * `tollgate run`, wiring only: every part is built by its builder in src/run/ and tested
 * there; this file decides the order things start and stop in.
 *
 * Start order, each step only after the previous one succeeded:
 *  1. the HTTP server (/healthz, /readyz, /metrics) -- first, not last, so /readyz can
 *     say WHY the replica is not ready yet while the steps below run;
 *  2. policy: the first valid snapshot (from Git, an older valid commit, or the saved last
 *     good policy; with none, the replica stays up and not ready and polls again with
 *     backoff, nothing else started);
 *  3. the cluster view, waiting for the initial sync;
 *  4. the audit writer (a remote that is down only queues commits);
 *  5. the dispatcher, fenced by the leader elector;
 *  6. leader election; the loops run only during a term (WhileLeader);
 *  7. cron sweeps, which only trigger passes, fetches and flushes.
 *
 * Shutdown (SIGTERM/SIGINT, or a fatal error): stop the sweeps and the loops (no new
 * work), close the dispatcher (queued writes cancelled, in-flight ones finish within the
 * shutdown timeout, then aborted), flush the audit (bounded: a quarter of the shutdown
 * timeout, then the commits stay queued locally) and close it, release the lease, stop
 * the view and the HTTP server. Exit 0 after a signal-initiated shutdown. The steps
 * before the final flush share one budget, the shutdown timeout (run/shutdown.ts): one
 * still running then (a loop pass waiting on a Git push) is left behind, logged, so the
 * process exits within its grace period.
 */
import type { RunConfig } from './cli/run-config.ts';
import { TermWrites } from './loops/leadership.ts';
import { createLogger, redactUrl, type Logger } from './observe/log.ts';
import { collectProcessMetrics } from './observe/metrics.ts';
import {
  anchorAuditInLease,
  auditTarget,
  closeAudit,
  finalFlushBoundMs,
  ignoredAuditSettings,
  openAudit,
  type AuditTarget,
} from './run/audit.ts';
import type { Policy } from './policy/model.ts';
import type { TokenSource } from './policy/credentials.ts';
import type { SshAccess } from './policy/git-ssh.ts';
import { watchStartupSettings } from './policy/settings-watch.ts';
import { superviseLoops } from './run/loops.ts';
import { startObservability, type StartedParts } from './run/observe.ts';
import { PassWatchdog } from './observe/watchdog.ts';
import { systemClock } from './lib/clock.ts';
import {
  MemoryReducer,
  eventLoopBusyShare,
  memoryReducingCollection,
} from './lib/memory-reducer.ts';
import { systemTimers } from './lib/timers.ts';
import {
  announcePolicyState,
  openPolicySource,
  readToken,
  restartRequiredEvent,
  sshAccess,
  tokenSource,
  waitForPolicy,
} from './run/policy.ts';
import { stopInOrder } from './run/shutdown.ts';
import { startSweeps } from './run/sweeps.ts';
import { watchResizeStateKey } from './run/resize-key.ts';
import { connectCluster, createStaleGuards, startClusterView } from './run/view.ts';
import {
  closeEvents,
  closeWithin,
  createLeaderElector,
  createPodEvents,
  createRunDispatcher,
  createSelfEventRecorder,
  createWritePathHealth,
} from './run/writes.ts';

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
  'own events',
  'audit',
  'leader election',
  'cluster view',
  'policy',
  'http',
  'memory',
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
    // The parts before the final audit flush share the shutdown timeout (run/shutdown.ts),
    // the flush bounds itself: the process exits within its grace period whatever waits.
    const failed = await stopInOrder(stops, {
      budgetMs: config.shutdownTimeoutMs,
      unboundedFrom: 'audit',
      log,
    });
    exitCode = exitCode || failed;
    log.info({ exitCode }, 'tollgate stopped');
  }
  return exitCode;
}

/**
 * The audit trail of `tollgate run`: where it goes and with which credential are the
 * operator's decision (run configuration), never the policy's, so audit settings the
 * policy names are ignored, loudly; the write credential is the audit's own when
 * configured, else the Git token.
 */
async function openAuditTrail(
  config: RunConfig,
  first: Policy,
  token: TokenSource | undefined,
  log: Logger,
): Promise<{
  target: AuditTarget;
  auditToken: TokenSource | undefined;
  auditSsh: SshAccess | undefined;
  audit: Awaited<ReturnType<typeof openAudit>>;
}> {
  const target = auditTarget(config, first);
  const ignored = ignoredAuditSettings(first, target);
  if (ignored.length > 0)
    log.warn(
      { ignored, auditRepo: redactUrl(target.url), auditBranch: target.branch },
      'the policy sets the audit location, which only the operator decides (--audit-repo, --audit-branch); ignored',
    );
  const auditToken = tokenSource(config, 'auditToken') ?? token;
  const auditSsh = sshAccess(config, target.url, 'audit');
  const audit = await openAudit({
    config,
    first,
    target,
    token: auditToken,
    ...(auditSsh ? { ssh: auditSsh } : {}),
    log,
  });
  return { target, auditToken, auditSsh, audit };
}

/**
 * The parts in start order, each built by its own builder in src/run/ and tested there.
 * Waits for a valid policy (nothing after it starts meanwhile); returns 0 when shut
 * down while waiting.
 */
async function start(
  config: RunConfig,
  log: Logger,
  shutdown: AbortSignal,
  started: (name: Part, stop: () => Promise<unknown>) => void,
): Promise<number> {
  collectProcessMetrics();
  logStarting(config, log);

  // 1. Observability first, so /readyz can explain the steps below.
  const watchdog = new PassWatchdog({ clock: systemClock });
  const parts: StartedParts = { watchdog };
  const server = await startObservability(config, parts, log);
  started('http', () => server.close());
  const memory = giveMemoryBackAfterBursts(log);
  started('memory', async () => memory.stop());
  const kubeConfig = connectCluster(config);
  const token = readToken(config);
  // tollgate's own Events: recorded from here on, written once this replica leads.
  const { selfEvents, freshness } = createWritePathHealth(config, log);

  // 2. Policy: the first valid snapshot; nothing else starts before it.
  const policies = await openPolicySource(config, token, log);
  parts.policies = policies;
  started('policy', () => policies.stop());
  const announced = announcePolicyState(policies, selfEvents);
  const first = await waitForPolicy(policies, {
    signal: shutdown,
    log,
    onWaiting: announced.unavailable,
  });
  if (!first) return 0;
  announced.started();
  log.info({ commit: first.commit, from: policies.state().kind }, 'policy loaded');

  // 3. The cluster view, scoped by the policy, synced before anyone decides on it.
  const view = startClusterView({ kubeConfig, policies, first, log });
  parts.view = view;
  started('cluster view', () => view.stop());
  await view.whenSynced(shutdown);
  log.info('cluster view synced');
  const guards = createStaleGuards(first, view, policies, config.stale, freshness);

  // 4. The audit trail.
  const { target, auditToken, auditSsh, audit } = await openAuditTrail(
    config,
    first,
    tokenSource(config),
    log,
  );
  started('audit', () =>
    closeAudit(audit, log, { boundMs: finalFlushBoundMs(config.shutdownTimeoutMs) }),
  );

  // 5. Leader election; the dispatcher refuses every write outside an open term.
  const elector = createLeaderElector(config, kubeConfig, log);
  audit.setFence(elector.fence, elector.termToken);
  const termWrites = new TermWrites();
  parts.freshness = freshness;
  const dispatcher = createRunDispatcher({
    config,
    kubeConfig,
    cacheLag: view.cacheLag,
    elector,
    termWrites,
    view,
    log,
    selfEvents,
  });
  started('dispatcher', () => closeWithin(dispatcher, config.shutdownTimeoutMs, log));
  const events = createPodEvents(dispatcher, config, log);
  const selfRecorder = createSelfEventRecorder(dispatcher, config, log);
  selfEvents.attach(selfRecorder);
  started('own events', () => closeEvents(selfRecorder, log));
  started('events', () => closeEvents(events.recorder, log));
  anchorAuditInLease(audit, elector, config.lease, events.recorder);
  watchStartupSettings(policies, first, log, restartRequiredEvent(selfEvents));

  // 6. The loops, only during a leader term.
  const loops = superviseLoops({
    config,
    kubeConfig,
    policies,
    first,
    view,
    guards,
    audit,
    auditTarget: target,
    token: auditToken,
    ...(auditSsh ? { auditSsh } : {}),
    elector,
    dispatcher,
    termWrites,
    events: events.toEvent,
    freshness,
    watchdog,
    log,
  });
  const resizeStateKeyAtTerm = watchResizeStateKey(
    config.resize.stateKeyFile,
    () => policies.current()?.resizePolicies.length ?? 0,
    (event) => selfEvents.record(event),
    log,
  );
  elector.onStartedLeading(() => {
    announced.leading();
    resizeStateKeyAtTerm();
  });
  parts.resizeApi = () => loops.resizeApi();
  elector.start();
  started('leader election', () => elector.stop());
  started('loops', () => loops.close());

  // 7. Sweeps: they only trigger work the loops and the audit do anyway.
  const sweeps = startSweeps(
    config.schedules,
    {
      passGateRelease: (whatFailed) => loops.passGateRelease(whatFailed),
      refreshPolicy: () => policies.refresh(),
      flushAudit: () => audit.flush(),
    },
    log,
  );
  started('sweeps', () => sweeps.stop());

  log.info('tollgate running');
  await untilAborted(shutdown);
  return 0;
}

function logStarting(config: RunConfig, log: Logger): void {
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
}

function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** Memory-reducing collections after bursts (src/lib/memory-reducer.ts), logged. */
function giveMemoryBackAfterBursts(log: Logger): MemoryReducer {
  const mib = (bytes: number): number => Math.round(bytes / 1024 / 1024);
  const reducer = new MemoryReducer({
    timers: systemTimers,
    rss: () => process.memoryUsage.rss(),
    collect: memoryReducingCollection(),
    busyShare: eventLoopBusyShare(),
    onCollected: ({ before, after, ms }) =>
      log.info(
        { rssMiB: [mib(before), mib(after)], ms: Math.round(ms) },
        'memory given back after a burst (a memory-reducing collection)',
      ),
    onUnavailable: (error) =>
      log.warn(
        { err: error.message },
        'memory reducer off: the resident set size cannot be read (no /proc?)',
      ),
  });
  reducer.start();
  return reducer;
}
