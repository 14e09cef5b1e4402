/**
 * Audit trail metrics. Label sets are closed and pre-created at zero so alerts on
 * push failures and a growing backlog see a series before the first incident.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../observe/metrics.ts';
import { batchKinds } from './record.ts';

/**
 * Why a push attempt failed: lost a race, refused credentials, network or HTTP trouble,
 * the remote branch was rewritten (no longer contains the last commit tollgate saw
 * there: refused, see AuditHistoryRewrittenError), the leader's fence closed before a
 * retry (a process that lost its lease stops pushing), anything else.
 */
export const pushFailureReasons = [
  'rejected',
  'auth',
  'network',
  'http',
  'rewritten',
  'fenced',
  'other',
] as const;
export type PushFailureReason = (typeof pushFailureReasons)[number];

export const auditCommitsTotal = new Counter({
  name: 'tollgate_audit_commits_total',
  help: 'Audit commits created locally, by batch kind.',
  labelNames: ['batch'] as const,
  registers: [registry],
});

export const auditDecisionsTotal = new Counter({
  name: 'tollgate_audit_decisions_total',
  help: 'Decisions written into audit commits, by batch kind.',
  labelNames: ['batch'] as const,
  registers: [registry],
});

export const auditPushFailuresTotal = new Counter({
  name: 'tollgate_audit_push_failures_total',
  help: 'Failed push attempts of the audit branch, by reason (each retry counts).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const auditPushSeconds = new Histogram({
  name: 'tollgate_audit_push_seconds',
  help: 'Time of one push() of the audit branch, fetch-and-retry rounds included, successful or given up.',
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});

export const auditHistoryRewritten = new Gauge({
  name: 'tollgate_audit_history_rewritten',
  help: '1 while tollgate refuses the audit branch because it no longer contains the last audit commit tollgate pushed (its clone or the leader Lease remembers it): history was rewritten; nothing is pushed and strict writes are held.',
  registers: [registry],
});
auditHistoryRewritten.set(0);

export const auditDroppedTotal = new Counter({
  name: 'tollgate_audit_dropped_total',
  help: 'Decisions without a write (Hold, SkipStale, ...) refused because the audit backlog was full.',
  registers: [registry],
});

export const auditLeftoversDroppedTotal = new Counter({
  name: 'tollgate_audit_leftover_records_dropped_total',
  help: 'Records of commits left unpushed by an earlier term or process that were not pushed because the remote already records them (another leader closed those intents meanwhile); a contradicting outcome is kept as a correction record, an agreeing one as a confirmation record.',
  registers: [registry],
});

export const auditStandbyClosedTotal = new Counter({
  name: 'tollgate_audit_standby_closed_intents_total',
  help: "Intents a standby closed when it pushed the commits its earlier terms left unpushed: they never reached Git, so no leader's recovery could close them (cancelled in strict mode, where such a write is never sent; unknown in async mode).",
  registers: [registry],
});

export const auditRecoveryPending = new Gauge({
  name: 'tollgate_audit_recovery_pending',
  help: "1 while the leader's term-start recovery of open intents has not succeeded (the audit remote unreachable or refusing pushes); retried with backoff within the term.",
  registers: [registry],
});
auditRecoveryPending.set(0);

export const auditFinalFlushAbandonedTotal = new Counter({
  name: 'tollgate_audit_final_flush_abandoned_total',
  help: "Shutdowns whose final audit flush did not finish within its bound (a quarter of --shutdown-timeout): the commits stay queued locally and the next term's leftover reconciliation pushes them.",
  registers: [registry],
});

/** Every live writer reports its backlog; the gauge sums them at scrape time. */
const backlogSources = new Set<{ readonly backlog: number }>();

export const auditBacklog = new Gauge({
  name: 'tollgate_audit_backlog',
  help: 'Decisions accepted but not yet pushed to the audit branch.',
  registers: [registry],
  collect() {
    let total = 0;
    for (const source of backlogSources) total += source.backlog;
    this.set(total);
  },
});

export function trackBacklog(source: { readonly backlog: number }): () => void {
  backlogSources.add(source);
  return () => backlogSources.delete(source);
}

for (const batch of batchKinds) {
  auditCommitsTotal.inc({ batch }, 0);
  auditDecisionsTotal.inc({ batch }, 0);
}
auditCommitsTotal.inc({ batch: 'checkpoint' }, 0);
for (const reason of pushFailureReasons) auditPushFailuresTotal.inc({ reason }, 0);
