/**
 * At term start, before the gate-release loop runs: record every break-glass release the
 * view shows (decide/break-glass.ts says which pods count and what the record keeps).
 * Each gets a `BreakGlass` audit record, a Warning Event `GateRemovedOutsideTollgate`
 * and a count in `tollgate_break_glass_releases_total{tenant}`; then its
 * `tollgate.io/Released` condition is set True (reason RemovedOutsideTollgate) through
 * the dispatcher's background band, which is what keeps the next term from recording it
 * again. The record comes first: a term that ends between the two records it once more
 * next time (at least once, never lost).
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { AuditSink } from '../audit/types.ts';
import type { ClusterView } from '../cluster/types.ts';
import {
  breakGlassCondition,
  breakGlassDecision,
  breakGlassOf,
  findBreakGlass,
  type BreakGlassFinding,
} from '../decide/break-glass.ts';
import type { Decision } from '../decide/decision.ts';
import type { Dispatcher } from '../dispatch/types.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../observe/log.ts';
import { registeredCounter } from '../observe/metrics.ts';
import type { Policy } from '../policy/model.ts';
import type { GateReleaseEventSink } from './gate-release.ts';
import { conditionWriteRequest } from './released-condition.ts';

export const breakGlassReleasesTotal = registeredCounter({
  name: 'tollgate_break_glass_releases_total',
  help: 'Governed gates found removed outside tollgate (break-glass) at a term start, recorded in the audit trail',
  labelNames: ['tenant'],
});

export interface BreakGlassDeps {
  readonly view: Pick<ClusterView, 'pods'>;
  readonly policy: Policy;
  readonly audit: Pick<AuditSink, 'record'>;
  readonly dispatcher: Pick<Dispatcher, 'enqueue'>;
  readonly events?: GateReleaseEventSink;
  readonly clock: Clock;
  readonly log: Logger;
  /** How long the condition write stays useful in the queue. Default 60 s. */
  readonly deadlineMs?: number;
  /**
   * A live GET: the view trims managedFields, and a pod found in the cache is confirmed
   * on the API server before it is recorded (at most `maxLiveReads`; the others are
   * recorded from the view, without their field managers).
   */
  readonly readPod?: (namespace: string, name: string) => Promise<V1Pod | undefined>;
  readonly maxLiveReads?: number;
}

/** Records the break-glass releases the view shows now; returns their decisions. */
export async function recordBreakGlass(deps: BreakGlassDeps): Promise<Decision[]> {
  const found = await confirmLive(findBreakGlass(deps.view.pods(), deps.policy), deps);
  if (found.length === 0) return [];
  const now = deps.clock.now();
  const decisions = found.map((finding) => breakGlassDecision(finding, deps.policy, now));
  deps.audit.record(decisions);
  found.forEach((finding, i) => {
    const decision = decisions[i] as Decision;
    const pod = finding.pod as V1Pod;
    breakGlassReleasesTotal.inc({ tenant: finding.tenant.name });
    void Promise.resolve(
      deps.events?.(pod, {
        type: 'Warning',
        reason: 'GateRemovedOutsideTollgate',
        action: 'BreakGlass',
        message: decision.reason.slice(0, 1000),
      }),
    ).catch((error: unknown) => deps.log.warn({ err: error }, 'break-glass Event not written'));
    setCondition(deps, decision, now);
  });
  deps.log.warn(
    { pods: decisions.map((d) => `${d.target.namespace}/${d.target.name}`) },
    'governed gates were removed outside tollgate (break-glass); recorded in the audit trail',
  );
  return decisions;
}

/** Each finding as the API server shows the pod now: dropped when it is gone or no longer one. */
async function confirmLive(
  found: readonly BreakGlassFinding[],
  deps: BreakGlassDeps,
): Promise<BreakGlassFinding[]> {
  const { readPod } = deps;
  if (!readPod) return [...found];
  const budget = deps.maxLiveReads ?? 50;
  const confirmed: BreakGlassFinding[] = [];
  for (const [i, finding] of found.entries()) {
    const { namespace = '', name = '', uid } = finding.pod.metadata ?? {};
    if (i >= budget) {
      confirmed.push(finding);
      continue;
    }
    let live: V1Pod | undefined;
    try {
      live = await readPod(namespace, name);
    } catch (error) {
      deps.log.info({ err: error, pod: `${namespace}/${name}` }, 'break-glass: live read failed');
      confirmed.push(finding);
      continue;
    }
    if (!live || live.metadata?.uid !== uid) continue;
    const again = breakGlassOf(live, deps.policy);
    if (again) confirmed.push(again);
  }
  return confirmed;
}

function setCondition(deps: BreakGlassDeps, decision: Decision, now: number): void {
  const { target } = decision;
  const enqueued = deps.dispatcher.enqueue(
    conditionWriteRequest(target, breakGlassCondition(decision, now), {
      tenant: decision.tenant ?? target.namespace,
      deadline: now + (deps.deadlineMs ?? 60_000),
      decisionId: decision.id,
    }),
  );
  if (!enqueued.accepted) {
    deps.log.warn(
      { pod: `${target.namespace}/${target.name}`, reason: enqueued.reason },
      'break-glass condition not queued; the next term records the pod again',
    );
    return;
  }
  void enqueued.done.then((result) => {
    if (result.result !== 'succeeded')
      deps.log.warn(
        { pod: `${target.namespace}/${target.name}`, result },
        'break-glass condition not written; the next term records the pod again',
      );
  });
}
