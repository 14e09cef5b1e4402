/** Time is injected everywhere so decisions are reproducible and tests control it. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = Date.UTC(2026, 10, 29, 7, 0, 0)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
  set(ms: number): void {
    this.#now = ms;
  }
}

/** A duration as a policy file would write it, in its largest whole unit: 5m, 90s, 1500ms. */
export function formatDuration(ms: number): string {
  if (ms > 0 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  return ms > 0 && ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** Durations in policy files: "500ms", "30s", "5m", "2h", "1h30m", "7d". */
export function parseDuration(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const trimmed = text.trim();
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;
  let total = 0;
  let index = 0;
  while (index < trimmed.length) {
    part.lastIndex = index;
    const match = part.exec(trimmed);
    if (!match) break;
    total += Number(match[1]) * (units[match[2] as string] ?? 0);
    index = part.lastIndex;
  }
  if (trimmed.length === 0 || index !== trimmed.length) {
    throw new Error(`"${text}" is not a duration (examples: 500ms, 30s, 5m, 1h30m, 7d)`);
  }
  return total;
}
