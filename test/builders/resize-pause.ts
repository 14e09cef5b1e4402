/**
 * What the resize unit tests on pausing and restarts share (resize-pause,
 * resize-unreadable-clock, resize-restart): the fixed instant they decide at, a policy
 * that pauses, a signal that cannot be read, and a pod tollgate stepped to 750m CPU with
 * its sealed state as the loop stores it.
 *
 *   decideResizeFor(now, { policy: pausePolicy, pod: aResizedPod({ requestedAt: now - 30 * minute }) })
 */
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import type { PodResizeInput, PodResizePlan } from '../../src/decide/resize-plan.ts';
import { stateAnnotation } from '../../src/decide/resize-state.ts';
import { aResizePolicy, aRunningPod, decideResizeFor } from './resize.ts';

/** The instant these tests decide at: fixed, never today's date. */
export const now = Date.UTC(2026, 10, 29, 8, 0, 0);
export const minute = 60_000;

/** Readings of the queue signal when Prometheus answers 503. */
export const unreadable = [{ signal: 'queue', error: 'HTTP 503' }];

/** Pauses after 5 restarts, a resize stuck 30 minutes, or signals unreadable 120 minutes. */
export const pausePolicy = aResizePolicy({
  pause: { restarts: 5, stuckMs: 30 * minute, unreadableMs: 120 * minute },
});

/**
 * A pod tollgate stepped up to 750m CPU at `requestedAt` (one attempt, no restarts then),
 * restarted `restarts` times since, running `actualCpu` when the kubelet has not carried
 * the step out, with `unreadableSince` stored when given.
 */
export function aResizedPod(options: {
  readonly requestedAt: number;
  readonly restarts?: number;
  readonly actualCpu?: string;
  readonly unreadableSince?: number;
}): V1Pod {
  const builder = aRunningPod('web-0', 'team-a').container('app', {
    cpu: '750m',
    memory: '256Mi',
  });
  if (options.actualCpu) builder.actual({ cpu: options.actualCpu, memory: '256Mi' });
  if (options.restarts) builder.restarts('app', options.restarts);
  const { unreadableSince } = options;
  return builder
    .sealed(stateAnnotation, {
      attempts: 1,
      requestedAt: options.requestedAt,
      direction: { cpu: 'up' },
      restarts: { app: 0 },
      target: { containers: { app: { requests: { cpu: '750m', memory: '256Mi' } } } },
      ...(unreadableSince === undefined ? {} : { unreadableSince }),
    })
    .obj();
}

/**
 * One case of a table: decided at `now` under pausePolicy (unless its input names
 * another), its decisions' kinds asserted to be `kinds`; the plan is returned for the
 * case's other checks.
 */
export function decideCase(c: {
  readonly name: string;
  readonly input: Pick<PodResizeInput, 'pod'> & Partial<PodResizeInput>;
  readonly kinds: readonly string[];
}): PodResizePlan {
  const plan = decideResizeFor(now, { policy: pausePolicy, ...c.input });
  assert.deepEqual(
    plan.decisions.map((d) => d.kind),
    c.kinds,
    `${c.name}: ${plan.skip ?? ''}`,
  );
  return plan;
}
