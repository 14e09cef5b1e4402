/**
 * Turning signal samples over a window into a direction. A signal counts only when it
 * is past its threshold (moved by the hysteresis) for the whole window: one spike, an
 * oscillating value, or a window with missing data all give `hold`, so a noisy signal
 * never makes a pod flap.
 */
import type { Signal } from '../policy/model.ts';

export interface WindowSample {
  readonly at: number; // epoch ms
  readonly value: number;
}

export type Direction = 'up' | 'down' | 'hold';

/**
 * How a signal was read, explicit in every decision's inputs: `ok`, `gaps` (samples do
 * not cover the window), `no-samples` (the query answered with nothing for this pod) or
 * `error` (the query failed: HTTP error, timeout, query limits). `error` and
 * `no-samples` mean the signal cannot be read, which holds every step-down of the pod.
 */
export type SignalRead = 'ok' | 'gaps' | 'no-samples' | 'error';

/** The resources a signal may speak for. */
export type SignalResource = 'cpu' | 'memory';
export const bothResources: readonly SignalResource[] = ['cpu', 'memory'];

/** True when a reading cannot be trusted to justify a step-down. */
export function unreadable(read: SignalRead): boolean {
  return read === 'error' || read === 'no-samples';
}

export interface SignalVerdict {
  readonly signal: string;
  /** Set when the signal is per container (its query uses `$container`). */
  readonly container?: string;
  readonly direction: Direction;
  /** True when data covers the window; false means the verdict is `hold` for lack of data. */
  readonly covered: boolean;
  readonly read: SignalRead;
  /** The query's error, when `read` is `error`. */
  readonly error?: string;
  /** The resources this signal speaks for. */
  readonly resources: readonly SignalResource[];
  readonly min?: number;
  readonly max?: number;
  readonly last?: number;
  readonly samples: number;
  readonly upThreshold?: number;
  readonly downThreshold?: number;
  readonly reason: string;
}

export interface WindowSpec {
  readonly startMs: number;
  readonly endMs: number;
  /** The resolution the samples were taken at; a gap longer than 1.5 steps is missing data. */
  readonly stepMs: number;
  readonly hysteresis: number;
}

/** Judges one signal's samples over the window. */
export function judgeWindow(
  signal: Signal,
  samples: readonly WindowSample[],
  window: WindowSpec,
  container?: string,
): SignalVerdict {
  const upThreshold =
    signal.scaleUpAbove === undefined ? undefined : signal.scaleUpAbove * (1 + window.hysteresis);
  const downThreshold =
    signal.scaleDownBelow === undefined
      ? undefined
      : signal.scaleDownBelow * (1 - window.hysteresis);
  const inWindow = samples
    .filter((s) => s.at >= window.startMs && s.at <= window.endMs && Number.isFinite(s.value))
    .sort((a, b) => a.at - b.at);
  const base = {
    signal: signal.name,
    ...(container === undefined ? {} : { container }),
    samples: inWindow.length,
    resources: signal.resources ?? bothResources,
    ...(upThreshold === undefined ? {} : { upThreshold }),
    ...(downThreshold === undefined ? {} : { downThreshold }),
  };
  const tolerance = window.stepMs * 1.5;
  const first = inWindow[0];
  const last = inWindow.at(-1);
  if (!first || !last) {
    return {
      ...base,
      direction: 'hold',
      covered: false,
      read: 'no-samples',
      reason: 'no samples in the window',
    };
  }
  const values = inWindow.map((s) => s.value);
  const stats = { min: Math.min(...values), max: Math.max(...values), last: last.value };
  let gap = first.at - window.startMs;
  for (let i = 1; i < inWindow.length; i += 1) {
    gap = Math.max(gap, (inWindow[i] as WindowSample).at - (inWindow[i - 1] as WindowSample).at);
  }
  gap = Math.max(gap, window.endMs - last.at);
  if (gap > tolerance) {
    return {
      ...base,
      ...stats,
      direction: 'hold',
      covered: false,
      read: 'gaps',
      reason: `samples do not cover the window (gap of ${gap} ms > ${tolerance} ms)`,
    };
  }
  if (upThreshold !== undefined && stats.min > upThreshold) {
    return {
      ...base,
      ...stats,
      direction: 'up',
      covered: true,
      read: 'ok',
      reason: `above ${upThreshold} for the whole window (min ${stats.min})`,
    };
  }
  if (downThreshold !== undefined && stats.max < downThreshold) {
    return {
      ...base,
      ...stats,
      direction: 'down',
      covered: true,
      read: 'ok',
      reason: `below ${downThreshold} for the whole window (max ${stats.max})`,
    };
  }
  return {
    ...base,
    ...stats,
    direction: 'hold',
    covered: true,
    read: 'ok',
    reason: 'not past a threshold for the whole window',
  };
}

/**
 * Combines verdicts for one resize unit: any signal asking for more wins (starving a
 * workload is worse than over-provisioning it briefly); shrinking needs every signal
 * that can ask for less to ask for less, with data, and none asking for more.
 */
export function combineVerdicts(verdicts: readonly SignalVerdict[]): Direction {
  if (verdicts.some((v) => v.direction === 'up')) return 'up';
  const voters = verdicts.filter((v) => v.downThreshold !== undefined);
  if (voters.length > 0 && voters.every((v) => v.direction === 'down')) return 'down';
  return 'hold';
}

/** An SLO is breached when every sample over the last `forMs` is above the threshold. */
export function judgeSlo(
  slo: { readonly above: number; readonly forMs: number },
  samples: readonly WindowSample[],
  window: { readonly endMs: number; readonly stepMs: number },
): { breached: boolean; max?: number; min?: number; reason: string } {
  const verdict = judgeWindow({ name: 'slo', query: '', scaleUpAbove: slo.above }, samples, {
    startMs: window.endMs - slo.forMs,
    endMs: window.endMs,
    stepMs: window.stepMs,
    hysteresis: 0,
  });
  const stats = {
    ...(verdict.min === undefined ? {} : { min: verdict.min }),
    ...(verdict.max === undefined ? {} : { max: verdict.max }),
  };
  if (verdict.direction === 'up') {
    return { breached: true, ...stats, reason: `SLO above ${slo.above} for ${slo.forMs} ms` };
  }
  return { breached: false, ...stats, reason: verdict.reason };
}
