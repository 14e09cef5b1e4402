/**
 * Term-start recovery after a crash between an intent and its outcome: a controller
 * killed (or fenced off by a lost lease) between a write and its outcome record leaves
 * intents without outcomes on the audit branch, pushed before the crash or later by its
 * leftover replay (the term's reconcile runs first, so recovery reads those too). Before
 * the first pass, every such intent of this cluster, whatever loop decided it, gets the
 * outcome the pod now shows (`podStateLookup`): a Release whose gate is gone succeeded,
 * a pod still at the decided resourceVersion was not written (cancelled, re-decided),
 * a pod gone is `unknown`; resize intents are judged by `resizeIntentState`.
 *
 * The outcomes are recorded, not awaited on the remote: they are pushed behind whatever
 * the term start found unpushed (the writer's own push path), like the loops' records.
 *
 * Safety never depends on this step: the loops derive their state from the cluster.
 * It only completes the record. A failure rejects; the caller (src/run/audit.ts) logs it,
 * starts the loops anyway and retries within the term. Intents the term's own loops
 * recorded meanwhile (`AuditSink.recordedThisTerm`) are left to them.
 */
import type { AuditSource } from '../audit/reader.ts';
import { recordSchemaVersion, type AuditRecord } from '../audit/record.ts';
import { openIntents, podStateLookup, recoveredOutcomes } from '../audit/recover.ts';
import type { AuditSink } from '../audit/types.ts';
import type { ClusterView } from '../cluster/types.ts';
import type { Decision } from '../decide/decision.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../observe/log.ts';
import type { Policy } from '../policy/model.ts';

export interface OpenIntentRecoveryDeps {
  readonly source: AuditSource;
  readonly cluster: string;
  readonly view: ClusterView;
  readonly policy: Policy;
  readonly audit: AuditSink;
  readonly clock: Clock;
  readonly log: Logger;
  /**
   * The term's: an attempt still running when its term ends records nothing (the next
   * term, maybe of this same process, recovers the same intents itself).
   */
  readonly signal?: AbortSignal;
  /**
   * The open intents as the writer keeps them since the term start's reconcile read them
   * (AuditSink.termState): given, the trail is not read again.
   */
  readonly open?: readonly Decision[];
}

export async function recoverOpenIntents(deps: OpenIntentRecoveryDeps): Promise<Decision[]> {
  const { view, policy } = deps;
  const lookup = podStateLookup(
    (namespace, name) => view.pod(namespace, name),
    // A gate is ours when a gate policy names it or it lies under a tenant's gate prefix
    // (a gate renamed since the intent is still ours: its removal is not assumed).
    (gate) =>
      policy.gatePolicies.some((gp) => gp.gate === gate) ||
      [...policy.tenants.values()].some((tenant) =>
        tenant.gatePrefixes.some((prefix) => gate.startsWith(prefix)),
      ),
  );
  // Every loop's intents (no loop closes what a previous process or term left open),
  // but not those this term's loops recorded themselves.
  const known = deps.open?.map((d): AuditRecord => ({
    ...d,
    v: recordSchemaVersion,
    phase: 'intent',
  }));
  const open = (known ?? (await openIntents(deps.source, deps.cluster))).filter(
    (i) => deps.audit.recordedThisTerm?.(i.id) !== true,
  );
  const recovered = await recoveredOutcomes(open, lookup, deps.clock.now());
  if (deps.signal?.aborted) return [];
  if (recovered.length > 0) {
    // Not flushed here: the push goes on behind the term's backlog (a term start does not
    // wait for it); a retry of recovery knows them (recordedThisTerm).
    deps.audit.record(recovered);
    deps.log.info(
      {
        outcomes: recovered.length,
        succeeded: recovered.filter((d) => d.outcome.result === 'succeeded').length,
        resize: recovered.filter((d) => d.loop === 'resize').length,
      },
      'recorded outcomes of intents left open by a previous run or term',
    );
  }
  return recovered;
}
