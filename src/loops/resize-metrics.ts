/**
 * Metrics of the resize loop. Label sets are closed and pre-created at zero; no
 * per-pod labels (a pod count is a gauge, not a label).
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../observe/metrics.ts';
import { stateRejections } from '../decide/resize-seal.ts';
import { pauseCauses } from '../decide/resize-state.ts';

/** How a resize ended, from the write's outcome or the kubelet's answer. */
export const resizeResults = [
  'succeeded', // the pods/resize write was accepted
  'conflict', // 409: decided again from fresh state
  'failed', // final API error (403/404/422) or retries exhausted
  'expired', // its deadline passed in the queue
  'cancelled', // superseded, pod deleted, leadership lost
  'deferred', // the kubelet reported PodResizePending=Deferred
  'infeasible', // the kubelet reported PodResizePending=Infeasible
  'stale', // skipped: the cache had not seen tollgate's last write to the pod
] as const;
export type ResizeResult = (typeof resizeResults)[number];

export const rollbackReasons = ['OOMKilled', 'SLO'] as const;
export type RollbackReason = (typeof rollbackReasons)[number];

export const pendingReasons = ['Deferred', 'Infeasible'] as const;

function getOrCreate<T>(name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export const resizesTotal = getOrCreate(
  'tollgate_resizes_total',
  () =>
    new Counter({
      name: 'tollgate_resizes_total',
      help: 'In-place resizes by result (write outcome or kubelet answer).',
      labelNames: ['result'],
      registers: [registry],
    }),
);

export const resizePending = getOrCreate(
  'tollgate_resize_pending',
  () =>
    new Gauge({
      name: 'tollgate_resize_pending',
      help: 'Pods whose last tollgate resize is pending, by reason (Deferred, Infeasible).',
      labelNames: ['reason'],
      registers: [registry],
    }),
);

export const resizeActuationSeconds = getOrCreate(
  'tollgate_resize_actuation_seconds',
  () =>
    new Histogram({
      name: 'tollgate_resize_actuation_seconds',
      help: 'From the accepted pods/resize write to the kubelet reporting the new resources.',
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers: [registry],
    }),
);

export const resizeRollbacksTotal = getOrCreate(
  'tollgate_resize_rollbacks_total',
  () =>
    new Counter({
      name: 'tollgate_resize_rollbacks_total',
      help: 'Rollbacks to the last good resources, by reason.',
      labelNames: ['reason'],
      registers: [registry],
    }),
);

export const resizePausedWorkloads = getOrCreate(
  'tollgate_resize_paused_workloads',
  () =>
    new Gauge({
      name: 'tollgate_resize_paused_workloads',
      help: 'Pods whose resize automation is paused until an approval resumes it.',
      registers: [registry],
    }),
);

for (const result of resizeResults) resizesTotal.inc({ result }, 0);
for (const reason of rollbackReasons) resizeRollbacksTotal.inc({ reason }, 0);
for (const reason of pendingReasons) resizePending.set({ reason }, 0);
resizePausedWorkloads.set(0);

/** How a signal could not be read: the query failed, or it answered with nothing for the pod. */
export const unreadableReads = ['error', 'no-samples'] as const;

export const resizeSignalUnreadable = getOrCreate(
  'tollgate_resize_signal_unreadable',
  () =>
    new Gauge({
      name: 'tollgate_resize_signal_unreadable',
      help: 'Pods whose signal (or SLO, signal="(slo)") could not be read in the last pass, per ResizePolicy; each holds every step-down of its pod. Alert when above 0 for long.',
      labelNames: ['policy', 'signal', 'read'],
      registers: [registry],
    }),
);

export const resizeStepDownsHeldTotal = getOrCreate(
  'tollgate_resize_step_downs_held_total',
  () =>
    new Counter({
      name: 'tollgate_resize_step_downs_held_total',
      help: 'Step-downs held because a signal or the SLO could not be read, per ResizePolicy (counted once per change of what they were held on).',
      labelNames: ['policy'],
      registers: [registry],
    }),
);

export const resizeWakeupsTotal = getOrCreate(
  'tollgate_resize_wakeups_total',
  () =>
    new Counter({
      name: 'tollgate_resize_wakeups_total',
      help: 'Pods reconciled at once on a change (new pod, restart, terminated container, resize condition, running resources) rather than at the next timer pass.',
      labelNames: ['cause'],
      registers: [registry],
    }),
);

export const resizeStateRejectedTotal = getOrCreate(
  'tollgate_resize_state_rejected_total',
  () =>
    new Counter({
      name: 'tollgate_resize_state_rejected_total',
      help: 'Resize state annotations ignored because their seal did not verify (unsigned, unknown-key, forged, corrupt); counted once per pod and value. Alert on any increase: someone edits tollgate state, or the state key changed.',
      labelNames: ['reason'],
      registers: [registry],
    }),
);
for (const reason of stateRejections) resizeStateRejectedTotal.inc({ reason }, 0);

export const resizePausesTotal = getOrCreate(
  'tollgate_resize_pauses_total',
  () =>
    new Counter({
      name: 'tollgate_resize_pauses_total',
      help: 'Workloads paused until an approval, by cause (rollback, restarts, stuck, unreadable).',
      labelNames: ['cause'],
      registers: [registry],
    }),
);
for (const cause of pauseCauses) resizePausesTotal.inc({ cause }, 0);
