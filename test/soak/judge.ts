/**
 * The soak's end checks as pure functions of what was observed: memory growth per
 * replica process after warm-up (RSS, and the live heap after a full collection), file
 * descriptors and the audit clone bounded, and every
 * release the watcher saw matched by an intent and a succeeded outcome in Git, and every
 * gang released whole (its members within a few seconds of each other) or not at all.
 */
import type { MemorySample } from './replicas.ts';
import type { FaultKind } from './schedule.ts';

export interface Check {
  readonly name: string;
  readonly pass: boolean;
  readonly detail: string;
}

export interface GrowthOptions {
  /** Samples this long after a process started are warm-up and ignored. */
  readonly warmupMs: number;
  /** Fewer samples after warm-up: not enough to judge (reported, not failed). */
  readonly minSamples: number;
  /** How often a replica's live heap is read (replicas.ts), ms. */
  readonly liveEveryMs: number;
  readonly limit: number;
}

export interface Growth {
  readonly process: string;
  readonly samples: number;
  /**
   * RSS judged: the floor (lowest sample) of the last four samples, less what V8's
   * compiled code grew by between the first and last live windows (`codeMiB`), over the
   * floor of the first four, minus 1 (NaN: too few). The floor is what stays after
   * garbage collection, so a sawtooth of collections is not growth and a leak is.
   */
  readonly rss: number;
  /** RSS the same way with the compiled code counted: reported. */
  readonly rssWithCode: number;
  /** nodejs_heap_size_used_bytes the same way: reported, not judged (it counts garbage). */
  readonly heapUsed: number;
  /**
   * The live data heap: what stays after a full collection (heapLiveBytes) outside the
   * heap spaces of V8's compiled code (heapCodeBytes), the floor of the last two readings
   * over the floor of the first two, minus 1 (NaN: fewer than `minLiveReadings`). Judged
   * instead of heap used: after a load peak V8 raises its next-collection limit, so heap
   * used stays high with fewer live objects (seeds 8 and 9: +24% and +33% while the view
   * shrank 400 -> 180 pods). Each reading follows a full collection, so there is no
   * sawtooth to floor out; windows of two readings (taken a minute apart) keep the first
   * and last windows apart in a run that judges six. Compiled code is left out because
   * it grows as a process runs code paths for the first time, bounded by the program
   * (heap snapshots of a 20-minute run: 2-4 MiB of a 47-50 MiB live heap, nearly all the
   * growth, in 5-9 minutes; docs/soak.md, memory).
   */
  readonly heapLive: number;
  /** The whole live heap, compiled code counted, the same way: reported. */
  readonly heapLiveWithCode: number;
  /** Compiled code, MiB: floor of the first two live readings and of the last two. */
  readonly codeMiB: readonly [number, number];
  /** Live heap readings after warm-up (the replica answered its inspector). */
  readonly liveReadings: number;
  /** From the first to the last sample after warm-up, ms. */
  readonly warmSpanMs: number;
  /** Pods in the process's own view, mean of the first four and of the last four samples. */
  readonly viewPods: readonly [number, number];
}

const mean = (values: readonly number[]): number =>
  values.reduce((sum, value) => sum + value, 0) / values.length;

/** How much the view grew over the window (0 when it shrank or is unknown). */
const viewGrowth = (g: Growth): number => {
  const [first, last] = g.viewPods;
  const ratio = last / first - 1;
  return Number.isFinite(ratio) ? Math.max(0, ratio) : 0;
};

/**
 * Growth beyond what the view's growth explains: a replica holds every pod of the
 * cluster, so a cluster that grows (pods held, not deleted) grows its memory without a
 * leak. The view's growth ratio is subtracted from the memory's; a leak in a steady
 * cluster is counted whole.
 */
export const unexplained = (ratio: number, g: Growth): number => ratio - viewGrowth(g);

const floor = (values: readonly number[]): number => Math.min(...values);

/** Live heap readings per window, and the fewest that judge a process's heap (two windows). */
const liveWindow = 2;
export const minLiveReadings = 2 * liveWindow;

interface LiveGrowth {
  readonly readings: number;
  readonly data: number;
  readonly whole: number;
  /** Compiled code in the first and last windows, bytes (NaN: too few readings). */
  readonly code: readonly [number, number];
}

function liveHeapGrowth(warm: readonly MemorySample[]): LiveGrowth {
  const live = warm.filter(
    (s) => Number.isFinite(s.heapLiveBytes) && Number.isFinite(s.heapCodeBytes),
  );
  if (live.length < minLiveReadings)
    return { readings: live.length, data: Number.NaN, whole: Number.NaN, code: [NaN, NaN] };
  const first = live.slice(0, liveWindow);
  const last = live.slice(-liveWindow);
  const grown = (pick: (s: MemorySample) => number): number =>
    floor(last.map(pick)) / floor(first.map(pick)) - 1;
  return {
    readings: live.length,
    data: grown((s) => s.heapLiveBytes - s.heapCodeBytes),
    whole: grown((s) => s.heapLiveBytes),
    code: [floor(first.map((s) => s.heapCodeBytes)), floor(last.map((s) => s.heapCodeBytes))],
  };
}

/** Growth of RSS and heap per process (identity and incarnation), after warm-up. */
export function memoryGrowth(samples: readonly MemorySample[], options: GrowthOptions): Growth[] {
  const byProcess = new Map<string, MemorySample[]>();
  for (const s of samples) {
    const key = `${s.identity}#${s.incarnation}`;
    byProcess.set(key, [...(byProcess.get(key) ?? []), s]);
  }
  return [...byProcess].map(([process, all]) => {
    const firstAt = all[0]!.at;
    const warm = all.filter((s) => s.at - firstAt >= options.warmupMs);
    const live = liveHeapGrowth(warm);
    const codeGrowth = Math.max(0, live.code[1] - live.code[0]);
    const ratio = (pick: (s: MemorySample) => number, less = 0): number =>
      warm.length < options.minSamples
        ? Number.NaN
        : (floor(warm.slice(-4).map(pick)) - less) / floor(warm.slice(0, 4).map(pick)) - 1;
    const pods = (window: readonly MemorySample[]): number =>
      window.length === 0 ? Number.NaN : mean(window.map((s) => s.viewPods));
    return {
      process,
      samples: warm.length,
      // Without live readings the code's growth is unknown: RSS is judged whole.
      rss: ratio((s) => s.rssBytes, Number.isFinite(codeGrowth) ? codeGrowth : 0),
      rssWithCode: ratio((s) => s.rssBytes),
      heapUsed: ratio((s) => s.heapUsedBytes),
      heapLive: live.data,
      heapLiveWithCode: live.whole,
      codeMiB: [live.code[0] / 2 ** 20, live.code[1] / 2 ** 20],
      liveReadings: live.readings,
      warmSpanMs: warm.length === 0 ? 0 : warm.at(-1)!.at - warm[0]!.at,
      viewPods: [pods(warm.slice(0, 4)), pods(warm.slice(-4))],
    };
  });
}

const podCount = (pods: number): string => (Number.isNaN(pods) ? 'n/a' : pods.toFixed(0));

const percent = (ratio: number): string =>
  Number.isNaN(ratio) ? 'n/a' : `${(ratio * 100).toFixed(1)}%`;

const mibs = ([first, last]: readonly [number, number]): string =>
  Number.isNaN(first) ? 'n/a' : `${first.toFixed(1)} -> ${last.toFixed(1)} MiB`;

/**
 * The span after warm-up in which a process must have given `minLiveReadings` live heap
 * readings: up to one cadence before the first falls due, one between each, and one
 * missed (a reading falls due while the replica is paused or busy). A process that lived less is judged on RSS alone
 * (seed 35: replica-a#2 lived 12 samples, 165 s, and could give 3 readings a minute
 * apart) unless it gave enough readings anyway; one that lived longer and gave fewer
 * fails, since an instrument that could not read the heap must not let it pass unjudged.
 */
const liveSpanNeededMs = (options: GrowthOptions): number =>
  (minLiveReadings + 1) * options.liveEveryMs;

const liveHeapJudged = (g: Growth, options: GrowthOptions): boolean =>
  g.liveReadings >= minLiveReadings || g.warmSpanMs >= liveSpanNeededMs(options);

const liveNote = (g: Growth, options?: GrowthOptions): string =>
  options === undefined || liveHeapJudged(g, options) || g.samples < options.minSamples
    ? ''
    : `; not judged: lived ${(g.warmSpanMs / 1000).toFixed(0)} s past warm-up, ${(liveSpanNeededMs(options) / 1000).toFixed(0)} s needed`;

const growthDetail = (growth: readonly Growth[], options?: GrowthOptions): string =>
  growth
    .map(
      (g) =>
        `${g.process}: ${g.samples} samples, rss ${percent(g.rss)} (${percent(g.rssWithCode)} with compiled code), heap used ${percent(g.heapUsed)} (reported), live data heap ${percent(g.heapLive)} (${percent(g.heapLiveWithCode)} with compiled code, ${g.liveReadings} readings${liveNote(g, options)}), compiled code ${mibs(g.codeMiB)}, view ${podCount(g.viewPods[0])} -> ${podCount(g.viewPods[1])} pods`,
    )
    .join('; ');

export function growthCheck(growth: readonly Growth[], options: GrowthOptions): Check {
  const judged = growth.filter((g) => g.samples >= options.minSamples);
  // A process whose live heap is judged but could not be read enough (NaN) fails.
  const over = judged.filter(
    (g) =>
      unexplained(g.rss, g) > options.limit ||
      (liveHeapJudged(g, options) && !(unexplained(g.heapLive, g) <= options.limit)),
  );
  const detail = growthDetail(growth, options);
  return {
    name: `memory growth after warm-up (RSS, and the live data heap after a full collection; V8's compiled code reported) within ${options.limit * 100}% beyond the growth of the replica's view`,
    pass: judged.length > 0 && over.length === 0,
    detail:
      judged.length === 0
        ? `not judged: no process lived ${options.minSamples} samples past warm-up (${detail})`
        : detail,
  };
}

/** The growth line of a run too short to judge it: always passes, says why. */
export function memoryNotJudged(growth: readonly Growth[], minutesToJudge: number): Check {
  const detail = growthDetail(growth);
  return {
    name: 'memory growth after warm-up (reported)',
    pass: true,
    detail: `not judged: runs shorter than ${minutesToJudge} minutes only report it (${detail})`,
  };
}

export function boundedCheck(
  name: string,
  samples: readonly MemorySample[],
  pick: (s: MemorySample) => number,
  bound: number,
): Check {
  const values = samples.map(pick).filter((v) => !Number.isNaN(v));
  const max = values.length > 0 ? Math.max(...values) : Number.NaN;
  return {
    name: `${name} at most ${bound}`,
    pass: values.length > 0 && max <= bound,
    detail: `max ${max} over ${values.length} samples`,
  };
}

/**
 * Every decision a replica accepted reached Git by the end: a backlog left in a replica's
 * clone (a standby's leftovers of earlier incarnations wait for it to lead again) is not
 * in the trail, and is lost with the clone if the pod goes (its cache is an emptyDir).
 * `undefined`: the replica did not answer, so its backlog is unknown.
 */
export function backlogCheck(backlogs: Readonly<Record<string, number | undefined>>): Check {
  const entries = Object.entries(backlogs);
  const describe = ([identity, n]: [string, number | undefined]): string =>
    n === undefined
      ? `${identity} did not answer`
      : `${identity} ${n}${n > 0 ? ' not pushed' : ''}`;
  return {
    name: 'every decision the replicas accepted reached Git (audit backlog 0 at the end)',
    pass: entries.every(([, n]) => n === 0),
    detail: entries.map(describe).join(', '),
  };
}

/** A stretch of time, in the same clock as the release times (ms). */
export interface Window {
  readonly fromMs: number;
  readonly toMs: number;
}

/** A server the chaos took away (down) or slowed, from when to when (faults.ts records it). */
export interface Outage extends Window {
  readonly server: string;
  readonly kind: 'down' | 'slow';
}

/**
 * The windows in which the Git server was down, overlapping ones merged so no moment
 * counts twice. Slow Git is not among them: tollgate must still release through it.
 */
export function gitDownWindows(outages: readonly Outage[]): Window[] {
  const down = outages
    .filter((o) => o.server === 'Git server' && o.kind === 'down')
    .map(({ fromMs, toMs }) => ({ fromMs, toMs }))
    .sort((a, b) => a.fromMs - b.fromMs);
  const merged: Window[] = [];
  for (const w of down) {
    const last = merged.at(-1);
    if (last && w.fromMs <= last.toMs)
      merged[merged.length - 1] = { fromMs: last.fromMs, toMs: Math.max(last.toMs, w.toMs) };
    else merged.push(w);
  }
  return merged;
}

/** How much of [from, to] falls in the (merged, disjoint) windows. */
const overlapMs = (fromMs: number, toMs: number, windows: readonly Window[]): number =>
  windows.reduce(
    (sum, w) => sum + Math.max(0, Math.min(toMs, w.toMs) - Math.max(fromMs, w.fromMs)),
    0,
  );

/** The time from `fromMs` to `toMs` in which Git was up. */
const upMs = (fromMs: number, toMs: number, down: readonly Window[]): number =>
  toMs - fromMs - overlapMs(fromMs, toMs, down);

const sec = (ms: number): string => (ms / 1000).toFixed(0);

export interface GapOptions {
  /** The chaos phase, in the same clock as the release times (ms). */
  readonly fromMs: number;
  readonly toMs: number;
  /** A longer stretch without any release, counting the time Git was up, fails. */
  readonly limitMs: number;
  /** When the Git server was down (gitDownWindows: merged). */
  readonly gitDown: readonly Window[];
}

interface Gap extends Window {
  /** The part of the gap in which Git was up. */
  readonly upMs: number;
}

/** The stretch of the chaos phase without a release that had Git up longest. */
function longestGap(releasedAt: readonly number[], options: GapOptions): Gap {
  const inside = releasedAt.filter((t) => t >= options.fromMs && t <= options.toMs);
  const edges = [options.fromMs, ...[...inside].sort((a, b) => a - b), options.toMs];
  let widest: Gap = { fromMs: options.fromMs, toMs: options.fromMs, upMs: 0 };
  for (let i = 1; i < edges.length; i++) {
    const [fromMs, toMs] = [edges[i - 1]!, edges[i]!];
    const up = upMs(fromMs, toMs, options.gitDown);
    if (up > widest.upMs) widest = { fromMs, toMs, upMs: up };
  }
  return widest;
}

/**
 * Releases go on through the chaos: the stream adds held pods every few seconds, so a
 * long stretch without any release is tollgate not releasing (leaders whose terms end
 * before their loops start), not a quiet cluster. Faults take a leader away for a lease
 * and a term start at a time; the limit is far above that. Time the Git server was down
 * is not counted: strict mode releases nothing whose intent it cannot push, by design
 * (an unreachable Git server degrades what depends on it), and a seed can keep Git down
 * for minutes in a row (seed 9: five 60 s outages within 529 s). That time is judged by
 * gitRecoveryCheck instead: releases must resume once Git is back.
 */
export function releaseGapCheck(releasedAt: readonly number[], options: GapOptions): Check {
  const gap = longestGap(releasedAt, options);
  const at = (ms: number): string => sec(ms - options.fromMs);
  const wall = gap.toMs - gap.fromMs;
  const totalDown = overlapMs(options.fromMs, options.toMs, options.gitDown);
  return {
    name: `releases go on through the chaos (no ${sec(options.limitMs)} s without one, counting the time Git is up)`,
    pass: gap.upMs <= options.limitMs,
    detail: `longest gap ${sec(gap.upMs)} s without a release counting Git up (${sec(wall)} s wall, ${sec(wall - gap.upMs)} s Git down; ${at(gap.fromMs)} s to ${at(gap.toMs)} s of the chaos); Git down ${sec(totalDown)} s in all, not counted`,
  };
}

export interface RecoveryOptions {
  /** The chaos phase, in the same clock as the release times (ms). */
  readonly fromMs: number;
  readonly toMs: number;
  /** The first release after Git comes back comes within this much time of Git up. */
  readonly limitMs: number;
}

interface Recovery {
  readonly window: Window;
  /** Git up from the window's end to its first release (or to the chaos end: none). */
  readonly waitMs: number;
  readonly released: boolean;
}

/** Per window: how long releases took to resume after it, in time of Git up. */
function recoveries(
  releasedAt: readonly number[],
  gitDown: readonly Window[],
  options: RecoveryOptions,
): Recovery[] {
  const sorted = [...releasedAt].sort((a, b) => a - b);
  return gitDown.map((window) => {
    const next = sorted.find((t) => t >= window.toMs && t <= options.toMs);
    return {
      window,
      waitMs: upMs(window.toMs, next ?? options.toMs, gitDown),
      released: next !== undefined,
    };
  });
}

/**
 * An unreachable Git server recovers by itself when it comes back: after every window
 * of Git down, a release follows within the limit of Git up (time Git is down again
 * before it is not counted). The load stream adds held pods every 2 s through the
 * chaos, so pods are always waiting when Git returns. A window that ends less than the
 * limit (of Git up) before the chaos ends cannot be judged and is counted apart.
 */
export function gitRecoveryCheck(
  releasedAt: readonly number[],
  gitDown: readonly Window[],
  options: RecoveryOptions,
): Check {
  const all = recoveries(releasedAt, gitDown, options);
  const judged = all.filter((r) => r.released || r.waitMs > options.limitMs);
  const late = judged.filter((r) => r.waitMs > options.limitMs);
  const span = (w: Window): string =>
    `Git down ${sec(w.fromMs - options.fromMs)} s to ${sec(w.toMs - options.fromMs)} s`;
  const slowest = judged.reduce<Recovery | undefined>(
    (worst, r) => (worst === undefined || r.waitMs > worst.waitMs ? r : worst),
    undefined,
  );
  const headline = `${judged.length} Git-down window${judged.length === 1 ? '' : 's'} judged${
    slowest
      ? `, the slowest release after one ${sec(slowest.waitMs)} s of Git up (after ${span(slowest.window)})`
      : ''
  }`;
  const notJudged = all.length - judged.length;
  const lateDetail = late.map((r) =>
    r.released
      ? `first release ${sec(r.waitMs)} s of Git up after ${span(r.window)}`
      : `no release in the ${sec(r.waitMs)} s of Git up after ${span(r.window)}`,
  );
  return {
    name: `releases resume by themselves after Git comes back (within ${sec(options.limitMs)} s of Git up)`,
    pass: late.length === 0,
    detail: [
      headline,
      ...(notJudged > 0
        ? [`${notJudged} ending within ${sec(options.limitMs)} s of the chaos end not judged`]
        : []),
      ...lateDetail,
    ].join('; '),
  };
}

export interface AuditRelease {
  readonly uid: string;
  readonly phase: string;
  readonly result: string;
}

/**
 * Every release the watcher saw has a Release intent and an outcome that does not deny
 * it: succeeded, or unknown (a successor's recovery found the pod gone and could not
 * tell; counted in the detail). Cancelled or failed would be a false record.
 */
export function releasesInAudit(
  seen: readonly { uid: string; pod: string }[],
  records: readonly AuditRelease[],
): Check {
  const intents = new Set(records.filter((r) => r.phase === 'intent').map((r) => r.uid));
  const outcomes = (result: string): Set<string> =>
    new Set(records.filter((r) => r.phase === 'outcome' && r.result === result).map((r) => r.uid));
  const succeeded = outcomes('succeeded');
  const unknown = outcomes('unknown');
  const recorded = (uid: string): boolean => succeeded.has(uid) || unknown.has(uid);
  const missing = seen.filter((r) => !intents.has(r.uid) || !recorded(r.uid));
  const unknownSeen = seen.filter((r) => !succeeded.has(r.uid) && unknown.has(r.uid)).length;
  return {
    name: 'every release the watcher saw has an intent and a succeeded (or unknown) outcome in Git',
    pass: missing.length === 0,
    detail: `${seen.length} releases seen, ${unknownSeen} recorded unknown, ${missing.length} without both${
      missing.length > 0
        ? `: ${missing
            .slice(0, 10)
            .map(
              (r) =>
                `${r.pod} (${r.uid}, intent ${intents.has(r.uid)}, outcome ${recorded(r.uid)})`,
            )
            .join(', ')}`
        : ''
    }`,
  };
}

export interface GangMember {
  readonly uid: string;
  readonly pod: string;
  /** When the watcher saw tollgate's gate go (undefined: never released). */
  readonly releasedAt?: number;
}

/**
 * How far apart a whole gang's first and last release may be: a pass or two. In the soaks
 * the gangs released whole were released 0.1-0.5 s apart; the gangs released in part that
 * the check once let through were 23 s and 135 s apart.
 */
export const gangSplitLimitMs = 5_000;

/**
 * The fault kinds that interrupt the leader's writes in the middle of a gang: the leader
 * killed (SIGKILL, SIGTERM) or paused (SIGSTOP, past its lease), or kube-apiserver
 * restarted (alone, or by the etcd compaction fault, which restarts it about 5 s after
 * it begins), or the Git server taken away: the soak's audit is strict, so a member
 * whose write must be decided again (a conflict, a deadline) waits for its new intent to
 * reach Git (seed 34's gang-46: a 422 at 18:53:10, Git down 0.7 s later, released when
 * Git came back). API throttling (429s) is not one: the dispatcher keeps a gang's queued
 * writes together and must not split them under throttling (throttledWhile bounds it).
 */
export const gangSplitFaults: readonly FaultKind[] = [
  'leader-sigkill',
  'leader-sigterm',
  'replica-sigstop',
  'apiserver-restart',
  'etcd-compaction',
  'git-down',
];

/** How long before its API server restart a fault of this kind begins (see faults.ts). */
const restartLeadMs: Partial<Record<FaultKind, number>> = { 'etcd-compaction': 5_000 };

/** A fault injected, and when it began, on the same clock as the gang members' `releasedAt`. */
export interface FaultStart {
  readonly kind: FaultKind;
  readonly atMs: number;
  /** How long it lasted (the throttling's window). */
  readonly holdMs?: number;
}

/**
 * A gang whose first release came while the API server refused requests (429 with
 * Retry-After), or up to `maxSplitMs` before it began (a member's write still in flight
 * then: seed 38's gang-126, 0.6 s), and whose last came within the throttling and
 * `maxSplitMs` after it: a refused member's write waits as it is told and its backoff,
 * so it follows while the throttling lasts (seed 34: gang-75 and gang-95, 7.0 and 8.3 s
 * apart under a 30 s throttling). Later than that is a split (seed 33: 135 s, a defect
 * fixed).
 */
function throttledWhile(
  faults: readonly FaultStart[],
  firstMs: number,
  lastMs: number,
  maxSplitMs: number,
): FaultStart | undefined {
  return faults.find(
    (f) =>
      f.kind === 'api-throttled' &&
      f.atMs <= firstMs + maxSplitMs &&
      firstMs <= f.atMs + (f.holdMs ?? 0) &&
      lastMs <= f.atMs + (f.holdMs ?? 0) + maxSplitMs,
  );
}

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/**
 * Every gang released whole or not at all once the system settled, and a whole gang's
 * members released within `maxSplitMs` of each other. A gang some of whose members were
 * released while another still waits (or was deleted waiting) is a gang released in
 * part; so is a whole gang whose first and last release were further apart (it was in
 * part in between), unless a fault that interrupts the leader's writes (gangSplitFaults)
 * or a new leader term began between its first release and `maxSplitMs` after it, or
 * the API server was throttling when it began and the last member followed within the
 * throttling and `maxSplitMs` (throttledWhile): such a split passes and is listed with
 * its cause. A fault that began later does not explain why the rest did not
 * follow within a pass or two. `faults` must be on the clock of `releasedAt`. The detail
 * also says how far apart the first and last release of a whole gang were (the longest).
 */
export function gangsWhole(
  gangs: ReadonlyMap<string, readonly GangMember[]>,
  faults: readonly FaultStart[],
  {
    maxSplitMs = gangSplitLimitMs,
    termsAtMs = [],
  }: {
    readonly maxSplitMs?: number;
    /**
     * When each leader term after the first began ("became leader" in the replicas'
     * logs), on the same clock: a new term interrupts the old leader's writes whatever
     * ended the old one, an injected fault or not (seed 34: a lease lost while the API
     * server was slow), so it excuses a split as a leader fault does, and says it was
     * not injected.
     */
    readonly termsAtMs?: readonly number[];
  } = {},
): Check {
  const partial: string[] = [];
  const split: string[] = [];
  const excused: string[] = [];
  let whole = 0;
  let none = 0;
  let widestMs = 0;
  for (const [gang, members] of gangs) {
    const times = members.flatMap((m) => (m.releasedAt === undefined ? [] : [m.releasedAt]));
    if (times.length === 0) none += 1;
    else if (times.length < members.length) {
      const waiting = members.filter((m) => m.releasedAt === undefined).map((m) => m.pod);
      partial.push(
        `${gang} (${times.length} of ${members.length} released; ${waiting.join(', ')} not)`,
      );
    } else {
      whole += 1;
      const firstMs = Math.min(...times);
      const spreadMs = Math.max(...times) - firstMs;
      widestMs = Math.max(widestMs, spreadMs);
      if (spreadMs <= maxSplitMs) continue;
      const gangLine = `${gang} ${secs(spreadMs)} apart (${members.map((m) => m.pod).join(', ')})`;
      const excuse = faults.find(
        (f) =>
          gangSplitFaults.includes(f.kind) &&
          f.atMs + (restartLeadMs[f.kind] ?? 0) >= firstMs &&
          f.atMs <= firstMs + maxSplitMs,
      );
      const term = termsAtMs.find((atMs) => atMs >= firstMs && atMs <= firstMs + maxSplitMs);
      const throttled = throttledWhile(faults, firstMs, firstMs + spreadMs, maxSplitMs);
      if (excuse) excused.push(`${gangLine}, ${excuse.kind} at ${secs(excuse.atMs)}`);
      else if (throttled)
        excused.push(
          `${gangLine}, api-throttled at ${secs(throttled.atMs)}, the last member within the throttling and ${secs(maxSplitMs)} after it`,
        );
      else if (term !== undefined)
        excused.push(`${gangLine}, a new leader term (not injected) at ${secs(term)}`);
      else split.push(gangLine);
    }
  }
  const list = (lines: readonly string[]): string =>
    lines.length > 0 ? `: ${lines.slice(0, 10).join('; ')}` : '';
  return {
    name: `every gang released whole or not at all, its members within ${secs(maxSplitMs)} of each other`,
    pass: partial.length === 0 && split.length === 0,
    detail: `${gangs.size} gangs: ${whole} whole (members released at most ${secs(widestMs)} apart), ${none} not released, ${partial.length} in part${list(partial)}, ${split.length} split more than ${secs(maxSplitMs)} apart${list(split)}, ${excused.length} split and excused (a leader fault or a new leader term within ${secs(maxSplitMs)} of the first release, or API throttling the last member followed within)${list(excused)}`,
  };
}

/** One look at the held pods while settling, per tenant: held now, releases seen so far. */
export interface SettleSample {
  readonly atMs: number;
  readonly tenants: Readonly<Record<string, { readonly held: number; readonly released: number }>>;
}

export interface DrainOptions {
  /** A tenant with pods held and no release for this long has stalled. */
  readonly stallMs: number;
  /** Settling ends here, drained or not. */
  readonly limitMs: number;
  /** Per tenant: the fastest drain its policy allows (budget pods over a pod's run time). */
  readonly allowedPerSecond: Readonly<Record<string, number>>;
}

export type DrainState =
  | { readonly kind: 'settled' }
  | { readonly kind: 'draining' }
  | {
      readonly kind: 'stalled';
      readonly tenant: string;
      readonly held: number;
      /** The look since which the tenant has had no release (its last release, or the start). */
      readonly sinceMs: number;
    }
  | { readonly kind: 'limit' };

const heldAt = (s: SettleSample): number =>
  Object.values(s.tenants).reduce((sum, t) => sum + t.held, 0);

const tenantAt = (s: SettleSample, tenant: string) => s.tenants[tenant] ?? { held: 0, released: 0 };

/** The first look at which the tenant's releases reached their latest count. */
function lastReleaseAt(samples: readonly SettleSample[], tenant: string): number {
  const latest = tenantAt(samples.at(-1)!, tenant).released;
  return samples.find((s) => tenantAt(s, tenant).released >= latest)!.atMs;
}

/** The first tenant holding pods without a release for a whole window, if any. */
function stalledTenant(samples: readonly SettleSample[], stallMs: number): DrainState | undefined {
  const last = samples.at(-1)!;
  for (const [tenant, { held }] of Object.entries(last.tenants)) {
    if (held === 0) continue;
    const sinceMs = lastReleaseAt(samples, tenant);
    if (last.atMs - sinceMs >= stallMs) return { kind: 'stalled', tenant, held, sinceMs };
  }
  return undefined;
}

/**
 * Whether settling is over: every held pod released (settled), a tenant holding pods
 * without a release for a window (stalled: its queue is stuck, not slow), or the limit
 * reached; otherwise the queues are still draining, as fast as their budgets let them
 * (a budget of 9 pods that run 4 s each releases about 2 pods a second, so 700 held
 * pods need minutes), and settling goes on.
 */
export function drainState(samples: readonly SettleSample[], options: DrainOptions): DrainState {
  const last = samples.at(-1)!;
  if (heldAt(last) === 0) return { kind: 'settled' };
  const stalled = stalledTenant(samples, options.stallMs);
  if (stalled) return stalled;
  return last.atMs - samples[0]!.atMs >= options.limitMs ? { kind: 'limit' } : { kind: 'draining' };
}

const seconds = (ms: number): string => (ms / 1000).toFixed(0);

/** Per tenant that held pods at the start: how fast it drained, against what its budget allows. */
function drainRate(samples: readonly SettleSample[], tenant: string, allowed: number): string {
  const first = samples[0]!;
  const drainedAt = samples.find((s) => tenantAt(s, tenant).held === 0);
  const end = drainedAt ?? samples.at(-1)!;
  const elapsedMs = end.atMs - first.atMs;
  const released = tenantAt(end, tenant).released - tenantAt(first, tenant).released;
  const rate = elapsedMs > 0 ? (released * 1000) / elapsedMs : Number.NaN;
  const start = `${tenant}: ${tenantAt(first, tenant).held} held at the start`;
  const where = drainedAt
    ? `drained in ${seconds(elapsedMs)} s`
    : `${tenantAt(end, tenant).held} at the end after ${seconds(elapsedMs)} s`;
  return `${start}, ${where}, ${rate.toFixed(2)} pods/s seen, ${allowed.toFixed(2)} allowed`;
}

/** The least time the budgets need to release what was held at the start. */
function budgetsNeedMs(first: SettleSample, allowedPerSecond: DrainOptions['allowedPerSecond']) {
  const needs = Object.entries(first.tenants).map(
    ([tenant, { held }]) => (held * 1000) / (allowedPerSecond[tenant] ?? Number.NaN),
  );
  return Math.max(0, ...needs.filter((n) => !Number.isNaN(n)));
}

function settleHeadline(
  samples: readonly SettleSample[],
  state: DrainState,
  options: DrainOptions,
) {
  const first = samples[0]!;
  const last = samples.at(-1)!;
  if (state.kind === 'stalled')
    return `stalled: no ${state.tenant} pod released for ${seconds(last.atMs - state.sinceMs)} s with ${state.held} held`;
  if (state.kind === 'limit')
    return `settle limit (${seconds(options.limitMs)} s) reached with ${heldAt(last)} held (the budgets need ${seconds(budgetsNeedMs(first, options.allowedPerSecond))} s at least for what was held at the start)`;
  return `${state.kind === 'settled' ? 'none' : heldAt(last)} held after ${seconds(last.atMs - first.atMs)} s`;
}

/**
 * The settle check over every look taken: passes once nothing is held; the detail gives
 * why it ended and, per tenant that held pods, the drain rate seen against the rate its
 * budget allows.
 */
export function settleCheck(samples: readonly SettleSample[], options: DrainOptions): Check {
  const state = drainState(samples, options);
  const rates = Object.entries(samples[0]!.tenants)
    .filter(([, { held }]) => held > 0)
    .map(([tenant]) => drainRate(samples, tenant, options.allowedPerSecond[tenant] ?? Number.NaN));
  return {
    name: `after settling, every pod whose conditions hold is released (a release at least every ${seconds(options.stallMs)} s per tenant holding pods, within ${seconds(options.limitMs)} s)`,
    pass: state.kind === 'settled',
    detail: [settleHeadline(samples, state, options), ...rates].join('; '),
  };
}
