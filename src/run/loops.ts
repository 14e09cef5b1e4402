/**
 * Part 6 of `tollgate run`: the loops, run only while this replica leads (WhileLeader).
 * Each term recovers the outcomes a predecessor left open, then starts gate-release and,
 * when a Prometheus is configured, resize, over a view of the dispatcher whose queued
 * writes are cancelled when the term ends or the loops stop.
 */
import type { AuditSink } from '../audit/types.ts';
import type { RunConfig } from '../cli/run-config.ts';
import { boundedPodReader, podReader } from '../cluster/client.ts';
import type { KubeConfig } from '@kubernetes/client-node';
import { formatFencingToken, type LeaderElector } from '../cluster/leader.ts';
import type { LiveClusterView } from '../cluster/view.ts';
import type { Dispatcher } from '../dispatch/types.ts';
import { startGateReleaseLoop, type GateReleaseLoop } from '../loops/gate-release.ts';
import type { TermWrites } from '../loops/leadership.ts';
import { WhileLeader, type Generation, type LeaderTermLike } from '../loops/leadership.ts';
import { quotasFromView, startResizeLoop, type ResizeLoop } from '../loops/resize.ts';
import type { Logger } from '../observe/log.ts';
import type { Policy } from '../policy/model.ts';
import { createPrometheusClient } from '../signals/prometheus.ts';
import { recoverOutcomes, type AuditTarget } from './audit.ts';
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
  readonly token: string | undefined;
  readonly elector: LeaderElector;
  readonly dispatcher: Dispatcher;
  readonly termWrites: TermWrites;
  readonly events: PodEventSink;
  readonly log: Logger;
}

/** The loops of the current term, if any, as the sweeps and new policies see them. */
export interface LeaderLoops {
  /** A gate-release pass now, if a term's loop runs; its failure is logged with `what`. */
  passGateRelease(what: string): void;
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
  const readPod = boundedPodReader(podReader(parts.kubeConfig), () => liveReads);
  const supervisor = new WhileLeader(
    parts.elector,
    (term) => startTermLoops({ ...parts, readPod }, term, running),
    log,
  );
  return { passGateRelease, close: () => supervisor.close() };
}

type PodRead = ReturnType<typeof podReader>;

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
  await recoverOutcomes({
    auditUrl: parts.auditTarget.url,
    branch: parts.auditTarget.branch,
    token: parts.token,
    cluster: parts.first.settings.cluster,
    audit: parts.audit,
    view,
    policy: policies.current() ?? parts.first,
    log,
  });
  const { readPod } = parts;
  running.gate = startGateReleaseLoop({
    view,
    dispatcher: termDispatcher,
    audit: parts.audit,
    policy: () => policies.current(),
    staleGuard: parts.guards.gate,
    cacheLagMs: () => view.cacheLag.lagMs(),
    events: parts.events,
    readPod,
    writeDeadlineMs: parts.config.writes.writeDeadlineMs,
    log,
  });
  running.resize = startResizeLoopIfConfigured(parts, termDispatcher, readPod);
  return {
    stop: async () => {
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
  if (prometheusUrl) {
    return startResizeLoop({
      view,
      policy: () => policies.current(),
      dispatcher: termDispatcher,
      audit: parts.audit,
      prometheus: createPrometheusClient({ url: prometheusUrl }),
      intervalMs: config.resize.intervalMs,
      staleGuard: parts.guards.resize,
      events: parts.events,
      readPod,
      ...quotasFromView(view),
      cacheLagMs: () => view.cacheLag.lagMs(),
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
