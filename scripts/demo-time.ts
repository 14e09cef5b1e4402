/**
 * The demo's rules about time, pure and apart from scripts/demo.ts (which runs the demo
 * when imported) so unit tests can drive them with an injected clock:
 * - the demo's own Approval, valid for a few hours from the moment the demo runs, so
 *   the demo never depends on a date written in policy-examples/;
 * - that approval merged no earlier than the second after its load was created: a Git
 *   commit time and a creationTimestamp are whole seconds, and an approval merged in the
 *   second its pod was created does not reach that pod (src/decide/approvals.ts);
 * - when stdout is not a terminal (CI logs, a pipe), a progress line when what it shows
 *   changes, or every ~10 s while nothing does, not one per second.
 */
import { stringify } from 'yaml';
import type { Clock } from '../src/lib/clock.ts';
import { gateSetAt } from '../src/decide/expiry.ts';
import type { PodLike } from '../src/decide/objects.ts';

/** The one nightly load the demo approves, by a commit of its own (approvalFile). */
export const APPROVED = { namespace: 'etl', name: 'nightly-load-approved' } as const;
/** How long the demo's approval counts, from the moment the demo runs. */
export const APPROVAL_HOURS = 3;

/**
 * The demo's Approval of APPROVED as a policy file: like an operator merging one for
 * tonight's run, it expires APPROVAL_HOURS after `now`.
 */
export function approvalFile(now: number): { path: string; content: string } {
  const approval = {
    apiVersion: 'tollgate.io/v1alpha1',
    kind: 'Approval',
    metadata: { name: 'demo-nightly-load-approved' },
    spec: {
      action: 'Release',
      target: { kind: 'Pod', namespace: APPROVED.namespace, name: APPROVED.name },
      approvedBy: 'demo@example.com',
      reason: `tollgate demo run started ${new Date(now).toISOString()}`,
      expiresAt: new Date(now + APPROVAL_HOURS * 3_600_000).toISOString(),
    },
  };
  return {
    path: 'approvals/demo-nightly-load-approved.yaml',
    content: `# yaml-language-server: $schema=../../schemas/Approval.schema.json\n${stringify(approval)}`,
  };
}

/**
 * When the demo may merge its approval of `load` (as read back from the API server):
 * `now`, or the start of the second after the load's creation second when `now` is still
 * in it, so the commit's whole-second time is after the load's and the approval reaches it.
 */
export function approvalMergeAt(load: PodLike, now: number): number {
  const created = gateSetAt(load);
  if (created === undefined)
    throw new Error(
      `${load.metadata?.namespace}/${load.metadata?.name} has no creationTimestamp: read the pod back from the API server before approving it`,
    );
  const nextSecond = (Math.floor(created / 1_000) + 1) * 1_000;
  return Math.max(now, nextSecond);
}

/**
 * Decides when a plain progress line is worth printing: for the first state, when the
 * state differs from the last printed one, or when `everyMs` of clock time have passed
 * since the last line (a heartbeat, so a stalled run still shows it is alive).
 * `state` is what the line says without its clock parts (elapsed time, rates).
 */
export class ProgressLines {
  readonly #clock: Clock;
  readonly #everyMs: number;
  #last: { readonly state: string; readonly at: number } | undefined;

  constructor(clock: Clock, everyMs = 10_000) {
    this.#clock = clock;
    this.#everyMs = everyMs;
  }

  /** True when a line is due for `state`; the caller prints it. */
  due(state: string): boolean {
    const now = this.#clock.now();
    const last = this.#last;
    if (last && last.state === state && now - last.at < this.#everyMs) return false;
    this.#last = { state, at: now };
    return true;
  }
}
