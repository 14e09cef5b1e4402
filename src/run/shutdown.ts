/**
 * The stop sequence of `tollgate run` after SIGTERM: every part started is stopped in
 * the shutdown order (main.ts). The parts before the final audit flush share one budget
 * (the shutdown timeout), so the process releases its lease and exits within the pod's
 * grace period whatever one of them waits for: a loop pass blocked on a strict audit
 * push while Git is down, an end-of-term audit flush retrying, a write in flight. A
 * part still stopping when the budget is spent is logged and left behind (its promise
 * keeps running until the process exits). The final flush bounds itself (a quarter of
 * the timeout, run/audit.ts); it and the parts after it are always waited for.
 */
import type { Logger } from 'pino';
import { systemTimers, type Timers } from '../lib/timers.ts';

export interface StopStep {
  readonly name: string;
  readonly stop: () => Promise<unknown>;
}

export interface StopOptions {
  /** How long the steps before `unboundedFrom` may take together. */
  readonly budgetMs: number;
  /** The first step always waited for (the final audit flush), and every one after it. */
  readonly unboundedFrom: string;
  readonly log: Logger;
  readonly timers?: Timers;
  readonly now?: () => number;
}

/** Stops `steps` in order; resolves to 1 when a step failed, else 0 (a step left behind is logged, like the final audit flush abandoned). */
export async function stopInOrder(
  steps: readonly StopStep[],
  options: StopOptions,
): Promise<number> {
  const now = options.now ?? Date.now;
  const deadline = now() + options.budgetMs;
  const unboundedAt = steps.findIndex((step) => step.name === options.unboundedFrom);
  let exitCode = 0;
  for (const [index, { name, stop }] of steps.entries()) {
    const stopping = now();
    const bounded = unboundedAt < 0 || index < unboundedAt;
    const result = await settleWithin(
      stop(),
      bounded ? deadline - stopping : undefined,
      options.timers ?? systemTimers,
    );
    if (result === 'stopped') {
      options.log.info({ part: name, ms: now() - stopping }, 'stopped');
    } else if (result === 'left behind') {
      options.log.warn(
        { part: name, ms: now() - stopping, budgetMs: options.budgetMs },
        'did not stop within the shutdown budget; left behind so the lease is released and the process exits within its grace period',
      );
    } else {
      options.log.error({ err: result, part: name }, 'did not stop cleanly');
      exitCode = 1;
    }
  }
  return exitCode;
}

/** The step's end, or `left behind` once `boundMs` passed first (no bound: waits). */
function settleWithin(
  work: Promise<unknown>,
  boundMs: number | undefined,
  timers: Timers,
): Promise<'stopped' | 'left behind' | Error> {
  const settled = work.then(
    () => 'stopped' as const,
    (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
  );
  if (boundMs === undefined) return settled;
  return new Promise((resolve) => {
    const timer = timers.set(() => resolve('left behind'), Math.max(0, boundMs));
    void settled.then((result) => {
      timers.clear(timer);
      resolve(result);
    });
  });
}
