/**
 * Policy source metrics. `tollgate_policy_commit_info{sha}` is 1 for the commit in
 * force and absent for every other (one series at a time, so no cardinality growth);
 * load errors are counted by a closed set of reasons, pre-created at zero.
 */
import { Counter, Gauge } from 'prom-client';
import { registry } from '../observe/metrics.ts';

/**
 * `invalid`: the commit was fetched but failed to parse or validate; `fetch`: it could
 * not be fetched at all; `parse-timeout`: the parse worker passed its deadline (the
 * commit is tried again on the next poll).
 */
export const policyLoadErrorReasons = ['invalid', 'fetch', 'parse-timeout'] as const;
export type PolicyLoadErrorReason = (typeof policyLoadErrorReasons)[number];

export const policyLoadErrorsTotal = new Counter({
  name: 'tollgate_policy_load_errors_total',
  help: 'Policy loads that failed, by reason; the last good policy stayed in force.',
  labelNames: ['reason'] as const,
  registers: [registry],
});
for (const reason of policyLoadErrorReasons) policyLoadErrorsTotal.inc({ reason }, 0);

export const policyCommitInfo = new Gauge({
  name: 'tollgate_policy_commit_info',
  help: 'The policy commit in force (value 1, commit SHA or content hash in the sha label).',
  labelNames: ['sha'] as const,
  registers: [registry],
});

export const policyHeadInvalid = new Gauge({
  name: 'tollgate_policy_head_invalid',
  help: 'Whether the newest commit of the policy location is rejected (1) while an older valid one, or none, stays in force; 0 once the newest commit is in force.',
  registers: [registry],
});

export const policySavedInForce = new Gauge({
  name: 'tollgate_policy_saved_in_force',
  help: 'Whether the policy in force was read from the saved last good policy on disk (1) because no commit of the policy location could be put in force at start (Git unreachable, no valid commit); 0 once a commit from Git is in force.',
  registers: [registry],
});

export const policyRestartRequired = new Gauge({
  name: 'tollgate_policy_restart_required',
  help: 'Whether the policy in force changes settings that take effect only at restart (cluster name, audit mode and batch): 1 until a restart or a revert.',
  registers: [registry],
});

export const policyLastLoadTimestamp = new Gauge({
  name: 'tollgate_policy_last_load_timestamp_seconds',
  help: 'When the policy source last fetched and evaluated its location, successful or not.',
  registers: [registry],
});

let inForce: string | undefined;
/** Moves the commit-info series to `sha`. */
export function setPolicyCommitInForce(sha: string): void {
  if (inForce !== undefined && inForce !== sha) policyCommitInfo.remove({ sha: inForce });
  policyCommitInfo.set({ sha }, 1);
  inForce = sha;
}
