/**
 * The soak's fault schedule: a pure function of (seed, minutes), so a run is reproducible
 * from its seed. Kinds are drawn in seeded shuffled cycles (every kind once per cycle,
 * once-only kinds in the first cycle only), spaced by seeded gaps, and a fault never
 * overlaps another of its group (one process fault at a time, one Git fault at a time,
 * one policy fault at a time), while faults of different groups do overlap: production
 * delivers them together. Every fault ends (start + hold) before the chaos phase ends, and
 * faults that restart a replica end before the last stretch of a long run (memory is
 * judged on the processes that then live on).
 */
import fc from 'fast-check';

export const faultKinds = [
  'leader-sigkill',
  'leader-sigterm',
  'replica-sigstop',
  'apiserver-restart',
  'git-down',
  'git-slow',
  'audit-push-race',
  'prometheus-down',
  'bad-policy',
  'unserved-kind',
  'pod-recreate',
  'node-failure',
] as const;
/** Kinds only `--all-faults` adds (kept out of the default schedule, so seeds keep their schedules). */
export const extraFaultKinds = ['api-throttled', 'etcd-compaction'] as const;
export type FaultKind = (typeof faultKinds)[number] | (typeof extraFaultKinds)[number];

type Group = 'process' | 'apiserver' | 'git' | 'prometheus' | 'policy' | 'pods' | 'nodes';

interface KindSpec {
  readonly group: Group;
  /** How long the fault lasts (a killed replica is restarted after it, like a Deployment). */
  readonly holdMs: number;
  readonly once?: boolean;
  /** The fault ends the process (a new incarnation starts after it). */
  readonly restarts?: boolean;
}

/** Shipped lease duration (15 s): a paused replica stays paused past it. */
export const shippedLeaseMs = 15_000;

export const kindSpecs: Readonly<Record<FaultKind, KindSpec>> = {
  'leader-sigkill': { group: 'process', holdMs: 5_000, restarts: true },
  'leader-sigterm': { group: 'process', holdMs: 5_000, restarts: true },
  'replica-sigstop': { group: 'process', holdMs: shippedLeaseMs + 5_000 },
  'apiserver-restart': { group: 'apiserver', holdMs: 0 },
  'api-throttled': { group: 'apiserver', holdMs: 30_000 },
  'etcd-compaction': { group: 'apiserver', holdMs: 20_000 },
  'git-down': { group: 'git', holdMs: 60_000 },
  'git-slow': { group: 'git', holdMs: 30_000 },
  'audit-push-race': { group: 'git', holdMs: 0 },
  'prometheus-down': { group: 'prometheus', holdMs: 30_000 },
  'bad-policy': { group: 'policy', holdMs: 20_000 },
  'unserved-kind': { group: 'policy', holdMs: 20_000 },
  'pod-recreate': { group: 'pods', holdMs: 0 },
  'node-failure': { group: 'nodes', holdMs: 0, once: true },
};

export interface Fault {
  /** Milliseconds after the chaos phase began. */
  readonly atMs: number;
  readonly kind: FaultKind;
  readonly holdMs: number;
  /** Seeded choice for the fault's own randomness (which pods, which replica). */
  readonly pick: number;
}

export interface ScheduleOptions {
  /** No fault before this (the replicas elect a leader and release a first wave). */
  readonly warmupMs?: number;
  readonly minGapMs?: number;
  readonly maxGapMs?: number;
  /** The kinds to draw from (default: faultKinds; `--all-faults` adds extraFaultKinds). */
  readonly kinds?: readonly FaultKind[];
  /**
   * The last stretch of the chaos without faults that restart a process (every other
   * kind, pauses included, goes on). Default: 8 minutes for runs of 10 minutes or more,
   * none for shorter ones. Memory growth is judged per process after a 2-minute warm-up
   * on at least 12 samples 15 s apart: a leader killed every minute or so never lives
   * that long, so without this stretch a 30-minute run could not judge memory at all.
   */
  readonly restartQuietMs?: number;
}

/** Runs this long or longer keep their last 8 minutes free of restarts (memory is judged). */
export const minutesWithRestartQuiet = 10;
const restartQuietDefaultMs = 8 * 60_000;

interface Draws {
  readonly cycles: FaultKind[][];
  readonly gaps: number[];
  readonly picks: number[];
}

const maxCycles = 40;

function drawFor(seed: number, gaps: number, kinds: readonly FaultKind[]): Draws {
  const cycle = fc.shuffledSubarray([...kinds], {
    minLength: kinds.length,
    maxLength: kinds.length,
  });
  const unit = fc.array(fc.integer({ min: 0, max: 999 }), { minLength: gaps, maxLength: gaps });
  const [draws] = fc.sample(
    fc.record({
      cycles: fc.array(cycle, { minLength: maxCycles, maxLength: maxCycles }),
      gaps: unit,
      picks: unit,
    }),
    { seed, numRuns: 1 },
  );
  return draws!;
}

/** The kinds in drawing order: once-only kinds appear in the first cycle alone. */
function kindOrder(cycles: readonly FaultKind[][]): FaultKind[] {
  return cycles.flatMap((cycle, index) =>
    index === 0 ? cycle : cycle.filter((kind) => !kindSpecs[kind].once),
  );
}

export function faultSchedule(
  seed: number,
  minutes: number,
  options: ScheduleOptions = {},
): Fault[] {
  const warmupMs = options.warmupMs ?? 20_000;
  const minGapMs = options.minGapMs ?? 6_000;
  const maxGapMs = options.maxGapMs ?? 18_000;
  const endMs = minutes * 60_000;
  const restartQuietMs =
    options.restartQuietMs ?? (minutes >= minutesWithRestartQuiet ? restartQuietDefaultMs : 0);
  const slots = Math.ceil(endMs / minGapMs) + 1;
  const draws = drawFor(seed, slots, options.kinds ?? faultKinds);
  const pending = kindOrder(draws.cycles);
  const busyUntil = new Map<Group, number>();
  const faults: Fault[] = [];
  let atMs = warmupMs;
  for (let slot = 0; slot < slots && atMs < endMs; slot++) {
    const index = pending.findIndex((kind) =>
      fits(kind, atMs, kindSpecs[kind].restarts ? endMs - restartQuietMs : endMs, busyUntil),
    );
    if (index >= 0) {
      const [kind] = pending.splice(index, 1) as [FaultKind];
      const spec = kindSpecs[kind];
      faults.push({ atMs, kind, holdMs: spec.holdMs, pick: draws.picks[slot]! });
      busyUntil.set(spec.group, atMs + spec.holdMs);
    }
    atMs += minGapMs + Math.round(((maxGapMs - minGapMs) * draws.gaps[slot]!) / 999);
  }
  return faults;
}

function fits(
  kind: FaultKind,
  atMs: number,
  endMs: number,
  busyUntil: ReadonlyMap<Group, number>,
): boolean {
  const spec = kindSpecs[kind];
  return atMs >= (busyUntil.get(spec.group) ?? 0) && atMs + spec.holdMs <= endMs;
}

/** Faults injected per kind (every kind listed, 0 when absent). */
export function countByKind(faults: readonly { kind: FaultKind }[]): Record<FaultKind, number> {
  const all = [...faultKinds, ...extraFaultKinds];
  const counts = Object.fromEntries(all.map((kind) => [kind, 0])) as Record<FaultKind, number>;
  for (const fault of faults) counts[fault.kind] += 1;
  return counts;
}
