/**
 * Part 1 of `tollgate run`: the HTTP server (/healthz, /readyz, /metrics), started
 * first so /readyz can say WHY the replica is not ready yet while the other parts start.
 */
import type { LiveClusterView } from '../cluster/view.ts';
import type { FreshnessHealth } from '../cluster/stale-guard.ts';
import { startObserveServer, type HealthChecks, type ObserveServer } from '../observe/http.ts';
import type { Logger } from '../observe/log.ts';
import type { PassWatchdog } from '../observe/watchdog.ts';
import { registry } from '../observe/metrics.ts';
import type { RunConfig } from '../cli/run-config.ts';
import type { PolicyFeed } from './policy.ts';
import { policyResizeSupport, type ApiResizeSupport } from '../decide/resize-features.ts';

/** Filled in as the parts start; read by the readiness checks meanwhile. */
export interface StartedParts {
  policies?: Pick<PolicyFeed, 'current'> & Partial<Pick<PolicyFeed, 'state'>>;
  view?: Pick<LiveClusterView, 'synced'> & Partial<Pick<LiveClusterView, 'nodes'>>;
  /** Which loop pass, if any, runs past its limit. */
  watchdog?: Pick<PassWatchdog, 'wedged'>;
  /** Whether the stale-guard can establish freshness (live reads answer). */
  freshness?: Pick<FreshnessHealth, 'degraded'>;
  /** What the API server answered the leader's resize loop about resize (discovery, dry-run). */
  resizeApi?: () => ApiResizeSupport | undefined;
}

/** Why there is no policy yet: the source's reason (fetch failed, commit invalid, ...). */
function noPolicyReason(parts: StartedParts): string {
  const state = parts.policies?.state?.();
  return state && 'why' in state ? `no valid policy: ${state.why}` : 'no valid policy loaded yet';
}

/** A wedged loop pass, with the reason; not listed while no pass is over its limit. */
function loopsCheck(parts: StartedParts): string | null {
  return parts.watchdog?.wedged() ?? null;
}

/** /healthz: fails when a loop pass is wedged, so the kubelet restarts the replica and the standby leads. */
export function livenessChecks(parts: StartedParts): HealthChecks {
  return { loops: () => loopsCheck(parts) };
}

/**
 * /readyz: a policy loaded, the cluster view synced and no loop wedged, each with the
 * reason it is not; a degraded stale-guard is a detail line that keeps the replica ready.
 */
export function readinessChecks(parts: StartedParts): HealthChecks {
  return {
    policy: () => (parts.policies?.current() ? undefined : noPolicyReason(parts)),
    'cluster-view': () =>
      parts.view === undefined
        ? 'cluster view not started'
        : parts.view.synced
          ? undefined
          : 'cluster view has not listed pods, nodes and quotas of the managed namespaces yet (referenced objects are judged per reference)',
    loops: () => loopsCheck(parts),
    'stale-guard': () => {
      const degraded = parts.freshness?.degraded;
      return degraded === undefined ? undefined : { degraded };
    },
    'resize-features': () => resizeFeatures(parts),
  };
}

/**
 * What each ResizePolicy's resizes can do on the cluster's nodes (in-place resize by
 * kubelet version, pod-level resize by declared feature) and, on the leader, what the API
 * server answered (pods/resize served, a pod-level dry-run): a detail, never a failure (one
 * policy's needs must not make the replica unready); not listed without ResizePolicies.
 */
function resizeFeatures(parts: StartedParts): { detail: string } | null {
  const policies = parts.policies?.current()?.resizePolicies ?? [];
  const view = parts.view;
  if (policies.length === 0 || !view?.synced || !view.nodes) return null;
  const nodes = [...view.nodes()];
  const lines = policies.flatMap((rp) =>
    policyResizeSupport(rp, nodes, parts.resizeApi?.()).lines.map((line) => `${rp.name}: ${line}`),
  );
  return { detail: lines.join('; ') };
}

export async function startObservability(
  config: Pick<RunConfig, 'metricsAddress'>,
  parts: StartedParts,
  log: Logger,
): Promise<ObserveServer> {
  const server = await startObserveServer(config.metricsAddress, {
    registry,
    logger: log,
    readiness: readinessChecks(parts),
    liveness: livenessChecks(parts),
  });
  log.info({ url: server.url }, 'serving /metrics, /healthz, /readyz');
  return server;
}
