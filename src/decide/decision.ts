/**
 * A decision is data. Every loop turns (policy, cluster view, now) into decisions;
 * the audit trail records them; the dispatcher carries out the ones that write.
 *
 * `kind` is a closed union: adding one forces every `switch` over it to be updated
 * (see `assertNever`).
 */

export const decisionKinds = [
  'Release', // remove tollgate's gate from a pod
  'Hold', // a condition is not met; the pod stays gated
  'Expire', // the gate outlived its policy's expiry; the action follows
  'Review', // an expired pod kept gated and marked for a human decision
  'Cancel', // delete a gated pod (expiry action or an approval)
  'Resize', // in-place resize through pods/resize
  'Rollback', // restore a pod's last good resources
  'Pause', // stop automating a workload until an approval resumes it
  'Resume', // an approval resumed a paused workload
  'Defer', // a resize is Deferred by the kubelet; retried later
  'Infeasible', // a resize cannot fit the node
  'SkipStale', // the cache has not seen tollgate's own last write to this object
  'Blocked', // a write kept failing finally (403/404/422): not retried until the pod or the policy changes
  'BreakGlass', // a governed gate removed outside tollgate (break-glass), recorded at the next term start
  'Uncharge', // a released pod stops taking from its tenant's budget (node not Ready past the grace, or being deleted)
  'Recharge', // a pod freed from the budget takes from it again (its node Ready again); says whether the tenant is over its limit
] as const;

export type DecisionKind = (typeof decisionKinds)[number];

export const loops = ['gate-release', 'resize', 'stale-guard', 'approval'] as const;
export type Loop = (typeof loops)[number];

/** What happened to a decision once carried out. `pending` is an intent not yet acted on. */
export type Outcome =
  | { readonly result: 'pending' }
  | { readonly result: 'succeeded'; readonly resourceVersion?: string }
  | { readonly result: 'conflict'; readonly message: string } // 409: re-decided from fresh state
  | { readonly result: 'failed'; readonly code?: number; readonly message: string } // final (403/404/422, retries exhausted)
  | { readonly result: 'expired'; readonly message: string } // deadline passed before it was sent
  | { readonly result: 'cancelled'; readonly message: string } // superseded, pod deleted, leadership lost
  | { readonly result: 'unknown'; readonly message: string } // recovery cannot tell whether it was applied (the pod is gone)
  | { readonly result: 'recorded' }; // a decision with no write (Hold, SkipStale, ...)

export interface Target {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
}

export interface PolicyRef {
  readonly commit: string;
  readonly file: string;
  readonly name: string;
}

/** One condition's evaluation, with the value it was judged on. */
export interface ConditionInput {
  readonly condition: string; // e.g. "Budget", "ImagePresent"
  readonly met: boolean;
  readonly value: unknown; // JSON-serialisable, e.g. { cpuUsed: 3000, cpuLimit: 4000 }
}

export interface Decision {
  /** Stable id: `${loop}:${kind}:${uid}:${resourceVersion}` style, unique per act. */
  readonly id: string;
  /** Epoch milliseconds, from the injected clock. */
  readonly at: number;
  readonly loop: Loop;
  readonly kind: DecisionKind;
  readonly tenant?: string;
  readonly target: Target;
  readonly policy: PolicyRef;
  readonly inputs: readonly ConditionInput[];
  readonly reason: string;
  readonly outcome: Outcome;
}

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
