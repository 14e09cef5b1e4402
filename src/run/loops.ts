/**
 * Part 6 of `tollgate run`: the loops, run only while this replica leads (WhileLeader).
 * Each term recovers the outcomes a predecessor left open, then starts gate-release and,
 * when a Prometheus is configured, resize, over a view of the dispatcher whose queued
 * writes are cancelled when the term ends or the loops stop.
 */
import { readFileSync } from 'node:fs';
import type { AuditSink } from '../audit/types.ts';
import type { RunConfig } from '../cli/run-config.ts';
import { boundedPodReader, freshPodRevision, podReader } from '../cluster/client.ts';
import type { KubeConfig } from '@kubernetes/client-node';
import { formatFencingToken, type LeaderElector } from '../cluster/leader.ts';
import type { LiveClusterView } from '../cluster/view.ts';
import type { FreshnessHealth } from '../cluster/stale-guard.ts';
import type { Dispatcher } from '../dispatch/types.ts';
import { startGateReleaseLoop, type GateReleaseLoop } from '../loops/gate-release.ts';
import { recordBreakGlass } from '../loops/break-glass.ts';
import { createReleasedConditions } from '../loops/released-condition.ts';
import type { TermWrites } from '../loops/leadership.ts';
import { WhileLeader, type Generation, type LeaderTermLike } from '../loops/leadership.ts';
import { quotasFromView, startResizeLoop, type ResizeLoop } from '../loops/resize.ts';
import { createResizeApiProbe } from '../cluster/resize-api.ts';
import type { ApiResizeSupport } from '../decide/resize-features.ts';
import { systemClock } from '../lib/clock.ts';
import type { Logger } from '../observe/log.ts';
import type { PassWatchdog } from '../observe/watchdog.ts';
import type { Policy } from '../policy/model.ts';
import { createPrometheusClient } from '../signals/prometheus.ts';
import { parseStateKeys, type StateKeyRing } from '../decide/resize-seal.ts';
import { recoverOutcomes, type AuditTarget } from './audit.ts';
import { carriedOver, recoverFromTrail } from '../loops/gate-release-blocked.ts';
import { carriedInForce } from '../decide/release-carried.ts';
import type { TokenSource } from '../policy/credentials.ts';
import type { SshAccess } from '../policy/git-ssh.ts';
import type { PolicyFeed } from './policy.ts';
import type { LoopGuards } from './view.ts';
import type { PodEventSink } from './writes.ts';

export interface LoopParts {
  readonly config: RunConfig;
  readonly kubeConfig: KubeConfig;
  readonly policies: PolicyFeed;
  readonly first: Policy;
  readonly view: LiveClusterView;
  readonly guards: LoopGuards;
  readonly audit: AuditSink;
  readonly auditTarget: AuditTarget;
  readonly token: TokenSource | undefined;
  /** The deploy key of an SSH audit repository. */
  readonly auditSsh?: SshAccess;
  readonly elector: LeaderElector;
  readonly dispatcher: Dispatcher;
  readonly termWrites: TermWrites;
  readonly events: PodEventSink;
  /** Marks each loop pass, so /healthz fails when one is wedged. */
  readonly watchdog?: PassWatchdog;
  /** Told by the live reader when freshness cannot be established (its breaker opened). */
  readonly freshness?: FreshnessHealth;
  readonly log: Logger;
}

/** The loops of the current term, if any, as the sweeps and new policies see them. */
export interface LeaderLoops {
  /** A gate-release pass now, if a term's loop runs; its failure is logged with `what`. */
  passGateRelease(what: string): void;
  /** What the API server answered the resize loop of the current term (undefined: no term, not asked). */
  resizeApi(): ApiResizeSupport | undefined;
  close(): Promise<void>;
}

/**
 * Starts the loops at each term's start and stops them at its end. A new policy is acted
 * on at once: without that pass it waited for the next pod change or expiry sweep (up to
 * --expiry-sweep later, 15 s by default), and a raised budget released nothing until then.
 */
export function superviseLoops(parts: LoopParts): LeaderLoops {
  const { log } = parts;
  const running: { gate?: GateReleaseLoop; resize?: ResizeLoop } = {};
  const passGateRelease = (what: string): void => {
    void running.gate?.pass().catch((error: unknown) => log.warn({ err: error }, what));
  };
  parts.policies.onPolicy(() => passGateRelease('pass on a new policy failed'));
  // Live reads are bounded by the policy's budget and breaker (StalenessPolicy liveReads).
  let liveReads = parts.first.staleness.liveReads;
  parts.policies.onPolicy((policy) => (liveReads = policy.staleness.liveReads));
  const readPod = boundedPodReader(
    podReader(parts.kubeConfig),
    () => liveReads,
    undefined,
    parts.freshness,
  );
  const supervisor = new WhileLeader(
    parts.elector,
    (term) => startTermLoops({ ...parts, readPod }, term, running),
    log,
  );
  return {
    passGateRelease,
    resizeApi: () => running.resize?.apiSupport(),
    close: () => supervisor.close(),
  };
}

type PodRead = ReturnType<typeof podReader>;

/**
 * A leader term's start for the view: pods, nodes and quotas are listed afresh, and no
 * pass plans before those lists are in (the loops wait for `view.whenSynced`, bounded and
 * retried). A standby's watch may not have delivered the previous leader's last releases
 * yet: planned on it, a tenant whose budget they fill would be released into again. Then
 * the stale-guards' catch-up for destructive acts (beginTermCatchUp).
 */
export function beginLeaderTerm(
  parts: Pick<LoopParts, 'guards' | 'view' | 'kubeConfig'>,
  log: Logger,
): { stop(): void } {
  parts.view.relist();
  return beginTermCatchUp(parts, log);
}

/**
 * The failover catch-up barrier: this replica's written-version map is empty at the start
 * of a term and its cache may not hold the previous leader's last writes. Destructive
 * acts take live reads until the view has shown the revision of a fresh read taken now
 * (StaleGuard.beginCatchUp); the view's revision is fed from pod events and, for a quiet
 * cluster, from the informer's last resourceVersion (bookmarks) every few seconds.
 */
export function beginTermCatchUp(
  parts: Pick<LoopParts, 'guards' | 'view' | 'kubeConfig'>,
  log: Logger,
): { stop(): void } {
  const guards = Object.values(parts.guards);
  for (const guard of guards) guard.beginCatchUp(undefined);
  const observe = (resourceVersion: string | undefined): void => {
    for (const guard of guards) guard.observeViewRevision(resourceVersion);
  };
  const unsubscribe = parts.view.onChange((change) => {
    if (change.resource === 'pods') observe(change.object.metadata?.resourceVersion);
  });
  const poll = setInterval(() => observe(parts.view.lastResourceVersion('pods')), 2_000);
  poll.unref();
  freshPodRevision(parts.kubeConfig).then(
    (revision) => {
      for (const guard of guards) guard.beginCatchUp(revision);
      observe(parts.view.lastResourceVersion('pods'));
      log.info(
        { revision },
        'new term: destructive acts take live reads until the view reaches this revision',
      );
    },
    (error: unknown) =>
      log.warn(
        { err: error },
        'new term: no fresh revision read; destructive acts keep taking live reads this term',
      ),
  );
  return {
    stop: () => {
      clearInterval(poll);
      unsubscribe();
    },
  };
}

/**
 * The audit checkpoints carry only the Blocked writes and gang memory still in force
 * (decide/release-carried.ts), judged against the view and the policy in force when each
 * checkpoint is written. While the view is not synced or no policy is in force nothing is
 * dropped: a pod missing from a partial list is not gone.
 */
function keepCarriedInForce(parts: Pick<LoopParts, 'audit' | 'view' | 'policies'>): void {
  parts.audit.keepCarriedWhile?.((carried) => {
    const policy = parts.policies.current();
    if (!parts.view.synced || policy === undefined) return carried;
    return carriedInForce(carried, parts.view.pods(), policy);
  });
}

async function startTermLoops(
  parts: LoopParts & { readonly readPod: PodRead },
  leaderTerm: LeaderTermLike,
  running: { gate?: GateReleaseLoop; resize?: ResizeLoop },
): Promise<Generation> {
  const { log, policies, view } = parts;
  const term = parts.elector.term();
  // The loops' queued writes are cancelled when this term ends, even if another begins,
  // or when the loops stop (shutdown): stopping waits for the loops' writes, and
  // without this it waited for the whole queue to drain at --api-qps (10,000 queued
  // writes: minutes, far past a pod's termination grace period).
  const stopping = new AbortController();
  const termDispatcher = parts.termWrites.bind(
    parts.dispatcher,
    AbortSignal.any([leaderTerm.signal, stopping.signal]),
  );
  log.info(
    { fencingToken: term ? formatFencingToken(term.token) : undefined },
    'leading: recovering audit outcomes, then starting loops',
  );
  keepCarriedInForce(parts);
  const catchUp = beginLeaderTerm(parts, log);
  let fromTrail: Awaited<ReturnType<typeof recoverFromTrail>> = { blocked: {}, gangReleases: {} };
  // Retried within the term while it fails (the audit remote down); see recoverOutcomes.
  await recoverOutcomes({
    signal: AbortSignal.any([leaderTerm.signal, stopping.signal]),
    auditUrl: parts.auditTarget.url,
    branch: parts.auditTarget.branch,
    token: parts.token,
    ...(parts.auditSsh ? { ssh: parts.auditSsh } : {}),
    cluster: parts.first.settings.cluster,
    audit: parts.audit,
    view,
    policy: policies.current() ?? parts.first,
    log,
    // A new term does not send again the writes the trail shows Blocked, and completes
    // the gangs an earlier term released in part.
    alsoRead: async (source, carried) => {
      fromTrail =
        carried === undefined
          ? await recoverFromTrail(source, parts.first.settings.cluster, log)
          : carriedOver(carried, log);
    },
  });
  // Gates removed outside tollgate while it did not lead: recorded before any new decision.
  const { readPod } = parts;
  await recordBreakGlass({
    view,
    readPod,
    policy: policies.current() ?? parts.first,
    audit: parts.audit,
    dispatcher: termDispatcher,
    events: parts.events,
    clock: systemClock,
    log,
    deadlineMs: parts.config.writes.writeDeadlineMs,
  }).catch((error: unknown) => log.warn({ err: error }, 'recording break-glass releases failed'));
  running.gate = startGateReleaseLoop({
    blocked: fromTrail.blocked,
    gangReleases: fromTrail.gangReleases,
    view,
    dispatcher: termDispatcher,
    audit: parts.audit,
    policy: () => policies.current(),
    staleGuard: parts.guards.gate,
    cacheLagMs: () => view.cacheLag.lagMs(),
    events: parts.events,
    releasedCondition: createReleasedConditions({
      dispatcher: termDispatcher,
      clock: systemClock,
      log,
      deadlineMs: parts.config.writes.writeDeadlineMs,
      recordWrite: (key, resourceVersion) => parts.guards.gate.recordWrite(key, resourceVersion),
    }),
    readPod,
    writeDeadlineMs: parts.config.writes.writeDeadlineMs,
    ...(parts.watchdog ? { watchdog: parts.watchdog } : {}),
    log,
  });
  running.resize = startResizeLoopIfConfigured(parts, termDispatcher, readPod);
  return {
    stop: async () => {
      catchUp.stop();
      stopping.abort(new Error('loops stopping'));
      const loops = [running.gate?.stop(), running.resize?.stop()];
      running.gate = undefined;
      running.resize = undefined;
      await Promise.all(loops);
      // The term's last outcomes, while the lease is still held (a lost term records nothing).
      await parts.audit
        .flush()
        .catch((error: unknown) =>
          log.warn({ err: error }, 'audit flush at the end of the term failed'),
        );
      log.info('loops stopped');
    },
  };
}

/** The resize loop needs Prometheus; without one, ResizePolicies are reported unserved. */
function startResizeLoopIfConfigured(
  parts: LoopParts,
  termDispatcher: Dispatcher,
  readPod: PodRead,
): ResizeLoop | undefined {
  const { config, policies, view, log } = parts;
  const prometheusUrl = config.resize.prometheusUrl ?? policies.current()?.settings.prometheus?.url;
  const stateKeys = readStateKeys(config.resize.stateKeyFile, log);
  if (prometheusUrl && stateKeys !== 'invalid') {
    return startResizeLoop({
      view,
      policy: () => policies.current(),
      dispatcher: termDispatcher,
      audit: parts.audit,
      prometheus: createPrometheusClient({ url: prometheusUrl }),
      intervalMs: config.resize.intervalMs,
      staleGuard: parts.guards.resize,
      staleSkipRollback: config.stale.skipRollback,
      events: parts.events,
      readPod,
      probeApi: createResizeApiProbe(parts.kubeConfig),
      ...quotasFromView(view),
      cacheLagMs: () => view.cacheLag.lagMs(),
      ...(parts.watchdog ? { watchdog: parts.watchdog } : {}),
      ...(stateKeys ? { stateKeys } : {}),
      logger: log,
    });
  }
  if ((policies.current()?.resizePolicies.length ?? 0) > 0) {
    log.warn(
      'ResizePolicies exist but neither --prometheus-url nor settings.prometheus.url is set: the resize loop does not run',
    );
  }
  return undefined;
}

/**
 * The resize state keys, read at each term's start (a rotated Secret takes effect at the
 * next term). A file that cannot be read or holds no valid key stops the resize loop
 * (an error naming the file): sealing with a key other than the operator's would reject
 * every stored state after a restart.
 */
function readStateKeys(
  path: string | undefined,
  log: Logger,
): StateKeyRing | undefined | 'invalid' {
  if (path === undefined) return undefined;
  let ring: ReturnType<typeof parseStateKeys>;
  try {
    ring = parseStateKeys(readFileSync(path, 'utf8'));
  } catch (error) {
    ring = { error: error instanceof Error ? error.message : String(error) };
  }
  if (!('error' in ring)) return ring;
  log.error(
    { file: path, problem: ring.error },
    'resize state key file unusable: the resize loop does not run',
  );
  return 'invalid';
}
