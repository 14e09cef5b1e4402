/**
 * Start-up recovery for the gate-release loop: a controller killed between a write and
 * its outcome record leaves intents without outcomes on the audit branch. Before the
 * first pass, each such gate-release intent gets the outcome the cluster now shows
 * (gate gone = succeeded, recovered; still gated = cancelled, re-decided by the loop;
 * pod gone = cancelled), so every release is accounted for in Git.
 *
 * Safety never depends on this step: the loop derives released pods from the cluster.
 * It only completes the record. A failure rejects; the caller (src/run/audit.ts) logs it,
 * starts the loop anyway and retries within the term. Intents the term's own loop
 * recorded meanwhile (`AuditSink.recordedThisTerm`) are left to it.
 */
import type { AuditSource } from '../audit/reader.ts';
import { openIntents, podStateLookup, recoveredOutcome } from '../audit/recover.ts';
import type { AuditSink } from '../audit/types.ts';
import type { ClusterView } from '../cluster/types.ts';
import type { Decision } from '../decide/decision.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../observe/log.ts';
import type { Policy } from '../policy/model.ts';

export interface GateReleaseRecoveryDeps {
  readonly source: AuditSource;
  readonly cluster: string;
  readonly view: ClusterView;
  readonly policy: Policy;
  readonly audit: AuditSink;
  readonly clock: Clock;
  readonly log: Logger;
}

export async function recoverGateReleaseIntents(
  deps: GateReleaseRecoveryDeps,
): Promise<Decision[]> {
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
  // Only this loop's intents (other loops complete their own records), and not those
  // this term's loop recorded itself.
  const open = (await openIntents(deps.source, deps.cluster)).filter(
    (i) => i.loop === 'gate-release' && deps.audit.recordedThisTerm?.(i.id) !== true,
  );
  const recovered: Decision[] = [];
  for (const intent of open)
    recovered.push(recoveredOutcome(intent, await lookup(intent), deps.clock.now()));
  if (recovered.length > 0) {
    deps.audit.record(recovered);
    await deps.audit.flush();
    deps.log.info(
      {
        outcomes: recovered.length,
        succeeded: recovered.filter((d) => d.outcome.result === 'succeeded').length,
      },
      'gate-release: recorded outcomes of intents left open by a previous run',
    );
  }
  return recovered;
}
