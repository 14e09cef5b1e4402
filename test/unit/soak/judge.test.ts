import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  backlogCheck,
  boundedCheck,
  gangsWhole,
  gitDownWindows,
  gitRecoveryCheck,
  growthCheck,
  memoryGrowth,
  memoryNotJudged,
  releaseGapCheck,
  releasesInAudit,
  type Outage,
} from '../../soak/judge.ts';
import { termStartsIn, type MemorySample } from '../../soak/replicas.ts';
import type { FaultKind } from '../../soak/schedule.ts';

const minute = 60_000;
const options = { warmupMs: 2 * minute, minSamples: 8, liveEveryMs: minute, limit: 0.1 };

/**
 * One sample per minute of one process, RSS and heap from `mib` (MiB per minute): heap
 * used and the live heap (after a full collection) half of it, or `live` (MiB per
 * minute; NaN: the replica did not answer the inspector), of which `code` is V8's
 * compiled code (MiB per minute; none unless given); its view holds 500 pods, or `pods`
 * (per minute).
 */
function series(
  identity: string,
  incarnation: number,
  mib: readonly number[],
  pods: readonly number[] = mib.map(() => 500),
  live: readonly number[] = mib.map((value) => value / 2),
  code: readonly number[] = mib.map(() => 0),
): MemorySample[] {
  return mib.map((value, minuteIndex) => ({
    viewPods: pods[minuteIndex] ?? Number.NaN,
    at: minuteIndex * minute,
    identity,
    incarnation,
    rssBytes: value * 2 ** 20,
    heapUsedBytes: (value / 2) * 2 ** 20,
    heapLiveBytes: (live[minuteIndex] ?? Number.NaN) * 2 ** 20,
    heapCodeBytes: Number.isNaN(live[minuteIndex] ?? Number.NaN)
      ? Number.NaN
      : (code[minuteIndex] ?? 0) * 2 ** 20,
    openFds: 40,
    cloneBytes: 2 ** 20,
  }));
}

/** `mib` as RSS and heap used, with RSS flat at 200 MiB instead: only the heap moves. */
function heapOnly(
  mib: readonly number[],
  live: readonly number[],
  code?: readonly number[],
): MemorySample[] {
  return series('replica-a', 0, mib, undefined, live, code).map((sample) => ({
    ...sample,
    rssBytes: 200 * 2 ** 20,
  }));
}

describe('the soak end checks', () => {
  for (const { name, mib, pods, pass } of [
    {
      name: 'flat after warm-up passes',
      mib: [50, 90, 100, 101, 99, 100, 102, 100, 101, 100],
      pass: true,
    },
    {
      name: 'warm-up growth is not counted',
      mib: [10, 60, 100, 100, 100, 100, 100, 100, 100, 100],
      pass: true,
    },
    {
      name: 'a sawtooth of collections is not growth',
      mib: [90, 95, 100, 130, 100, 135, 101, 128, 100, 133],
      pass: true,
    },
    {
      name: 'a floor 16% higher after warm-up fails',
      mib: [90, 95, 100, 100, 100, 100, 116, 116, 116, 116],
      pass: false,
    },
    {
      name: 'a floor 16% higher while the view grew 20% (the cluster grew: pods held, not deleted) passes',
      mib: [90, 95, 100, 100, 100, 100, 116, 116, 116, 116],
      pods: [400, 450, 500, 500, 500, 500, 600, 600, 600, 600],
      pass: true,
    },
    {
      name: 'a floor 16% higher while the view grew 4% fails: the view explains 4% of it',
      mib: [90, 95, 100, 100, 100, 100, 116, 116, 116, 116],
      pods: [500, 500, 500, 500, 500, 500, 520, 520, 520, 520],
      pass: false,
    },
    {
      name: 'a floor 16% higher while the view shrank fails',
      mib: [90, 95, 100, 100, 100, 100, 116, 116, 116, 116],
      pods: [500, 500, 500, 500, 500, 500, 300, 300, 300, 300],
      pass: false,
    },
  ] as { name: string; mib: number[]; pods?: number[]; pass: boolean }[])
    it(`memory: ${name}`, () => {
      const growth = memoryGrowth(series('replica-a', 0, mib, pods), options);
      assert.equal(growthCheck(growth, options).pass, pass, JSON.stringify(growth));
    });

  for (const { name, heapUsed, live, code, pass, detail } of [
    {
      name: 'heap used 30% higher (garbage not yet collected after a peak) while the live heap stays flat passes',
      heapUsed: [100, 100, 100, 100, 100, 100, 130, 130, 130, 130],
      live: [40, 40, 40, 40, 40, 41, 40, 40, 40, 40],
      pass: true,
      detail:
        /heap used 30\.0% \(reported\), live data heap 0\.0% \(0\.0% with compiled code, 8 readings\)/,
    },
    {
      name: 'a live heap 16% higher after warm-up fails, though heap used is flat',
      heapUsed: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
      live: [40, 40, 50, 50, 50, 50, 58, 58, 58, 58],
      pass: false,
      detail:
        /heap used 0\.0% \(reported\), live data heap 16\.0% \(16\.0% with compiled code, 8 readings\)/,
    },
    {
      name: 'live readings missing while the replica could not answer (paused) are skipped',
      heapUsed: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
      live: [40, 40, 50, NaN, 50, NaN, 51, 50, NaN, 50],
      pass: true,
      detail: /live data heap 0\.0% \(0\.0% with compiled code, 5 readings\)/,
    },
    {
      name: 'a process judged on RSS with too few live readings (under 4) fails: its heap is not judged',
      heapUsed: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
      live: [40, 40, 50, NaN, NaN, NaN, NaN, NaN, NaN, 50],
      pass: false,
      detail: /live data heap n\/a \(n\/a with compiled code, 2 readings\)/,
    },
    {
      name: 'a live heap 11% higher, all of it V8 compiling code paths run for the first time (code 16 -> 20.5 MiB), passes: the data heap is flat',
      heapUsed: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
      live: [40, 40, 41, 41, 42, 43, 44, 45, 45.5, 45.5],
      code: [15, 15, 16, 16, 17, 18, 19, 20, 20.5, 20.5],
      pass: true,
      detail:
        /live data heap 0\.0% \(11\.0% with compiled code, 8 readings\), compiled code 16\.0 -> 20\.5 MiB/,
    },
    {
      name: 'the same growth outside the compiled code fails',
      heapUsed: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100],
      live: [40, 40, 41, 41, 42, 43, 44, 45, 45.5, 45.5],
      code: [15, 15, 16, 16, 16, 16, 16, 16, 16, 16],
      pass: false,
      detail:
        /live data heap 18\.0% \(11\.0% with compiled code, 8 readings\), compiled code 16\.0 -> 16\.0 MiB/,
    },
  ] as {
    name: string;
    heapUsed: number[];
    live: number[];
    code?: number[];
    pass: boolean;
    detail: RegExp;
  }[])
    it(`memory: ${name}`, () => {
      const growth = memoryGrowth(heapOnly(heapUsed, live, code), options);
      const check = growthCheck(growth, options);
      assert.equal(check.pass, pass, check.detail);
      assert.match(check.detail, detail);
    });

  for (const { name, rss, pass, detail } of [
    {
      name: 'RSS 10.7% higher, 4 MiB of it compiled code the live readings saw grow, passes: judged without the code',
      rss: [140, 145, 150, 150, 150, 150, 166, 166, 166, 166],
      pass: true,
      detail: /rss 8\.0% \(10\.7% with compiled code\)/,
    },
    {
      name: 'RSS 13.3% higher with the same 4 MiB of code fails: the code explains 2.7% of it',
      rss: [140, 145, 150, 150, 150, 150, 170, 170, 170, 170],
      pass: false,
      detail: /rss 10\.7% \(13\.3% with compiled code\)/,
    },
  ])
    it(`memory: ${name}`, () => {
      const live = [40, 40, 40, 40, 40, 40, 44, 44, 44, 44];
      const code = [15, 15, 15, 15, 15, 15, 19, 19, 19, 19];
      const growth = memoryGrowth(series('replica-a', 0, rss, undefined, live, code), options);
      const check = growthCheck(growth, options);
      assert.equal(check.pass, pass, check.detail);
      assert.match(check.detail, detail);
    });

  it('memory: a process that lived too briefly for four live readings (plus one missed) is judged on RSS alone, saying so', () => {
    // Seed 35: replica-a#2 lived 12 samples 15 s apart after warm-up (165 s), and read
    // its live heap once a minute: 3 readings. A cadence cannot give more; it is not a
    // failure of the instrument.
    const brief = series(
      'replica-a',
      2,
      [
        100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100,
        100, 100,
      ],
    ).map((sample, index) => ({
      ...sample,
      at: index * 15_000 + (index >= 8 ? 0 : 0),
      heapLiveBytes: index % 4 === 0 && index >= 8 ? 40 * 2 ** 20 : Number.NaN,
      heapCodeBytes: index % 4 === 0 && index >= 8 ? 0 : Number.NaN,
    }));
    const growth = memoryGrowth(brief, options);
    const check = growthCheck(growth, options);
    assert.equal(check.pass, true, check.detail);
    assert.match(
      check.detail,
      /live data heap n\/a \(n\/a with compiled code, 3 readings; not judged: lived 165 s past warm-up, 300 s needed\)/,
    );
  });

  it('memory: a brief process that still gave four live readings is judged on them (seed 37: replica-b#2, 4 readings in 228 s)', () => {
    const brief = series(
      'replica-b',
      2,
      Array.from({ length: 24 }, () => 100),
    ).map((sample, index) => {
      const read = index >= 8 && (index - 8) % 4 === 0;
      return {
        ...sample,
        at: index * 15_000,
        heapLiveBytes: read ? (index >= 16 ? 47 : 40) * 2 ** 20 : Number.NaN,
        heapCodeBytes: read ? 0 : Number.NaN,
      };
    });
    const check = growthCheck(memoryGrowth(brief, options), options);
    assert.equal(check.pass, false, check.detail);
    assert.match(check.detail, /live data heap 17\.5% \(17\.5% with compiled code, 4 readings\)/);
  });

  it('memory: a process that lived long enough for four live readings and gave fewer still fails', () => {
    const long = series(
      'replica-a',
      0,
      Array.from({ length: 40 }, () => 100),
    ).map((sample, index) => ({
      ...sample,
      at: index * 15_000,
      heapLiveBytes: index === 8 || index === 20 || index === 39 ? 40 * 2 ** 20 : Number.NaN,
      heapCodeBytes: index === 8 || index === 20 || index === 39 ? 0 : Number.NaN,
    }));
    const check = growthCheck(memoryGrowth(long, options), options);
    assert.equal(check.pass, false, check.detail);
    assert.match(check.detail, /live data heap n\/a \(n\/a with compiled code, 3 readings\)/);
  });

  it('memory: a restart starts a new series (the restarted process is not compared with the killed one)', () => {
    const samples = [
      ...series('replica-a', 0, [100, 100, 100, 100, 100, 100, 100, 100, 100, 100]),
      ...series('replica-a', 1, [30, 30, 30, 30, 30, 30, 30, 30, 30, 30]),
    ];
    const growth = memoryGrowth(samples, options);
    assert.deepEqual(
      growth.map((g) => [g.process, g.rss]),
      [
        ['replica-a#0', 0],
        ['replica-a#1', 0],
      ],
    );
  });

  it('memory: a run long enough to judge in which no process lived enough samples past warm-up fails, saying so', () => {
    const check = growthCheck(memoryGrowth(series('replica-b', 0, [50, 60, 70]), options), options);
    assert.equal(check.pass, false);
    assert.match(check.detail, /^not judged: no process lived 8 samples past warm-up/);
  });

  it('memory: a short run reports the growth it saw, says it does not judge it, and why', () => {
    const growth = memoryGrowth(
      series('replica-a', 0, [90, 95, 100, 100, 100, 100, 116, 116, 116, 116]),
      options,
    );
    const check = memoryNotJudged(growth, 10);
    assert.equal(check.pass, true);
    assert.match(check.name, /reported/);
    assert.match(
      check.detail,
      /^not judged: runs shorter than 10 minutes only report it \(replica-a#0: 8 samples, rss 16\.0% \(16\.0% with compiled code\), heap used 16\.0% \(reported\), live data heap 16\.0% \(16\.0% with compiled code, 8 readings\), compiled code 0\.0 -> 0\.0 MiB, view 500 -> 500 pods\)$/,
    );
  });

  it('fds and clone size: the largest sample is held to the bound; no sample at all fails', () => {
    const samples = series('replica-a', 0, [1, 1]);
    assert.equal(boundedCheck('fds', samples, (s) => s.openFds, 40).pass, true);
    assert.equal(boundedCheck('fds', samples, (s) => s.openFds, 39).pass, false);
    assert.equal(boundedCheck('fds', [], (s) => s.openFds, 40).pass, false);
  });

  for (const { name, records, pass } of [
    {
      name: 'an intent and a succeeded outcome: found',
      records: [
        { uid: 'u1', phase: 'intent', result: 'pending' },
        { uid: 'u1', phase: 'outcome', result: 'succeeded' },
      ],
      pass: true,
    },
    {
      name: 'an intent alone: missing',
      records: [{ uid: 'u1', phase: 'intent', result: 'pending' }],
      pass: false,
    },
    {
      name: 'a failed outcome: missing',
      records: [
        { uid: 'u1', phase: 'intent', result: 'pending' },
        { uid: 'u1', phase: 'outcome', result: 'failed' },
      ],
      pass: false,
    },
    {
      name: 'an unknown outcome (recovery found the pod gone): an honest outcome',
      records: [
        { uid: 'u1', phase: 'intent', result: 'pending' },
        { uid: 'u1', phase: 'outcome', result: 'unknown' },
      ],
      pass: true,
    },
    {
      name: 'a cancelled outcome: contradicts what the watcher saw',
      records: [
        { uid: 'u1', phase: 'intent', result: 'pending' },
        { uid: 'u1', phase: 'outcome', result: 'cancelled' },
      ],
      pass: false,
    },
    {
      name: "another pod's records: missing",
      records: [
        { uid: 'u2', phase: 'intent', result: 'pending' },
        { uid: 'u2', phase: 'outcome', result: 'succeeded' },
      ],
      pass: false,
    },
  ])
    it(`audit: a release the watcher saw, ${name}`, () => {
      assert.equal(releasesInAudit([{ uid: 'u1', pod: 'soak-ml/eval-1' }], records).pass, pass);
    });
});

describe('the soak end check on gangs', () => {
  const member = (pod: string, releasedAt?: number) => ({
    uid: `uid-${pod}`,
    pod,
    ...(releasedAt === undefined ? {} : { releasedAt }),
  });
  const second = 1000;
  /** A fault of `kind` that began `atS` seconds into the chaos. */
  const fault = (kind: FaultKind, atS: number, holdS = 30) => ({
    kind,
    atMs: atS * second,
    holdMs: holdS * second,
  });
  for (const { name, members, faults, terms, pass, detail } of [
    {
      name: 'a gang released whole passes',
      members: [member('a', 0), member('b', 10), member('c', 20)],
      pass: true,
    },
    {
      name: 'a gang not released at all passes',
      members: [member('a'), member('b'), member('c')],
      pass: true,
    },
    {
      name: 'a gang released in part fails',
      members: [member('a', 0), member('b', 10), member('c')],
      pass: false,
    },
    {
      name: 'a gang whose members were released 0.5 s apart passes',
      members: [
        member('a', 100 * second),
        member('b', 100.2 * second),
        member('c', 100.5 * second),
      ],
      pass: true,
    },
    {
      name: 'a gang whose members were released 23 s apart with no fault fails, naming the gang and the spread',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      pass: false,
      detail: /ns\/g1 .*23\.0 s apart.*a, b, c/,
    },
    {
      name: 'a gang released 23 s apart passes when the leader was SIGKILLed 1 s after its first release, and the line names the fault',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      faults: [fault('leader-sigkill', 101)],
      pass: true,
      detail: /ns\/g1 .*23\.0 s apart.*leader-sigkill at 101\.0 s/,
    },
    {
      name: 'a gang released 23 s apart passes when the leader was SIGSTOPped 2 s after its first release',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      faults: [fault('replica-sigstop', 102)],
      pass: true,
    },
    {
      name: 'a gang released 23 s apart passes when kube-apiserver restarted 2 s after its first release',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      faults: [fault('apiserver-restart', 102)],
      pass: true,
    },
    {
      name: 'a gang released 23 s apart passes when an etcd compaction began 3 s before its first release (its kube-apiserver restart comes 5 s after it begins)',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      faults: [fault('etcd-compaction', 97)],
      pass: true,
    },
    {
      name: 'a gang released 23 s apart fails when an etcd compaction began 10 s before its first release (its restart was over)',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      faults: [fault('etcd-compaction', 90)],
      pass: false,
    },
    {
      name: 'a gang released 135 s apart fails when the only fault in its window was API throttling',
      members: [member('a', 100 * second), member('b', 235 * second), member('c', 235 * second)],
      faults: [fault('api-throttled', 99), fault('api-throttled', 101)],
      pass: false,
      detail: /ns\/g1 .*135\.0 s apart/,
    },
    {
      name: 'a gang released 7 s apart while the API server refused every second request passes: a refused member waits as told (Retry-After, backoff) and follows within the throttling (seed 34: gang-75, gang-95)',
      members: [member('a', 100 * second), member('b', 100 * second), member('c', 107 * second)],
      faults: [fault('api-throttled', 95, 30)],
      pass: true,
      detail:
        /ns\/g1 .*7\.0 s apart.*api-throttled at 95\.0 s, the last member within the throttling and 5\.0 s after it/,
    },
    {
      name: 'a gang released 77 s apart passes when the Git server went down 3 s after its first release: a member re-decided (its write met a conflict) needs a new intent in Git before a strict write (seed 34: gang-46)',
      members: [member('a', 100 * second), member('b', 100 * second), member('c', 177 * second)],
      faults: [fault('git-down', 103, 60)],
      pass: true,
      detail: /ns\/g1 .*77\.0 s apart.*git-down at 103\.0 s/,
    },
    {
      name: 'a gang released 77 s apart fails when the Git server went down 20 s after its first release',
      members: [member('a', 100 * second), member('b', 100 * second), member('c', 177 * second)],
      faults: [fault('git-down', 120, 60)],
      pass: false,
    },
    {
      name: "a gang released 13.5 s apart passes when the throttling began 0.6 s after its first release, a member's write then in flight (seed 38: gang-126)",
      members: [member('a', 100 * second), member('b', 100 * second), member('c', 113.5 * second)],
      faults: [fault('api-throttled', 100.6, 30)],
      pass: true,
    },
    {
      name: 'a gang released 13.5 s apart fails when the throttling began 6 s after its first release',
      members: [member('a', 100 * second), member('b', 100 * second), member('c', 113.5 * second)],
      faults: [fault('api-throttled', 106, 30)],
      pass: false,
    },
    {
      name: 'a gang whose last member came 10 s after the throttling ended fails',
      members: [member('a', 100 * second), member('b', 100 * second), member('c', 135 * second)],
      faults: [fault('api-throttled', 95, 30)],
      pass: false,
    },
    {
      name: 'a gang released 23 s apart fails when the leader was SIGKILLed 60 s after its first release, too late to explain it',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      faults: [fault('leader-sigkill', 160)],
      pass: false,
      detail: /ns\/g1 .*23\.0 s apart/,
    },
    {
      name: 'a gang released 23 s apart passes when a new leader term began 2 s after its first release with no fault injected (a lease lost to a slow API server), and the line says so',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      terms: [40, 102],
      pass: true,
      detail: /ns\/g1 .*23\.0 s apart.*a new leader term \(not injected\) at 102\.0 s/,
    },
    {
      name: 'a gang released 23 s apart fails when the only new leader term began 10 s before its first release',
      members: [member('a', 100 * second), member('b', 123 * second), member('c', 123 * second)],
      terms: [90],
      pass: false,
    },
  ] as {
    name: string;
    members: ReturnType<typeof member>[];
    faults?: ReturnType<typeof fault>[];
    terms?: number[];
    pass: boolean;
    detail?: RegExp;
  }[])
    it(name, () => {
      const check = gangsWhole(new Map([['ns/g1', members]]), faults ?? [], {
        termsAtMs: (terms ?? []).map((atS) => atS * second),
      });
      assert.equal(check.pass, pass);
      if (detail) assert.match(check.detail, detail);
    });

  it('names the members left waiting and how far apart whole gangs were released', () => {
    const check = gangsWhole(
      new Map([
        ['ns/g1', [member('a', 0), member('b', 2500), member('c', 1000)]],
        ['ns/g2', [member('d', 0), member('e')]],
      ]),
      [],
    );
    assert.match(check.detail, /1 whole \(members released at most 2\.5 s apart\)/);
    assert.match(check.detail, /ns\/g2 \(1 of 2 released; e not\)/);
  });
});

describe('the soak end check on the audit backlog', () => {
  for (const { name, backlogs, pass, detail } of [
    {
      name: 'every replica pushed all it accepted: passes',
      backlogs: { 'replica-a': 0, 'replica-b': 0 },
      pass: true,
      detail: /^replica-a 0, replica-b 0$/,
    },
    {
      name: 'a standby still holding leftover decisions fails, naming it and how many',
      backlogs: { 'replica-a': 0, 'replica-b': 7794 },
      pass: false,
      detail: /^replica-a 0, replica-b 7794 not pushed$/,
    },
    {
      name: 'a replica that did not answer fails: its backlog is unknown',
      backlogs: { 'replica-a': 0, 'replica-b': undefined },
      pass: false,
      detail: /replica-b did not answer/,
    },
  ])
    it(name, () => {
      const check = backlogCheck(backlogs);
      assert.equal(check.pass, pass);
      assert.match(check.detail, detail);
    });
});

/** Seconds to ms. */
const s = 1000;
/** Releases every `stepS` seconds from `fromS` up to `toS` (inclusive), in ms. */
const releasesEvery = (stepS: number, fromS: number, toS: number): number[] =>
  Array.from({ length: Math.floor((toS - fromS) / stepS) + 1 }, (_, i) => (fromS + i * stepS) * s);
/** An outage the chaos recorded, from `fromS` to `toS` (seconds of the chaos). */
const outage = (kind: 'down' | 'slow', fromS: number, toS: number): Outage => ({
  server: 'Git server',
  kind,
  fromMs: fromS * s,
  toMs: toS * s,
});
const gitDown = (fromS: number, toS: number): Outage => outage('down', fromS, toS);

describe('the soak check that releases go on through the chaos', () => {
  const options = { fromMs: 0, toMs: 1800 * s, limitMs: 300 * s };
  for (const { name, at, outages = [], pass, detail } of [
    {
      name: 'a stretch of twenty minutes without a release fails, naming it',
      at: [10, 70, 200, 260, 1500, 1790].map((t) => t * s),
      pass: false,
      detail:
        /^longest gap 1240 s without a release counting Git up \(1240 s wall, 0 s Git down; 260 s to 1500 s of the chaos\)/,
    },
    {
      name: 'no gap longer than the limit: passes',
      at: Array.from({ length: 10 }, (_, i) => (i * 200 + 100) * s),
      pass: true,
      detail:
        /^longest gap 200 s without a release counting Git up \(200 s wall, 0 s Git down; 100 s to 300 s of the chaos\)/,
    },
    {
      name: 'no release after a point until the chaos ends: the gap runs to the end',
      at: [10, 100].map((t) => t * s),
      pass: false,
      detail:
        /^longest gap 1700 s without a release counting Git up \(1700 s wall, 0 s Git down; 100 s to 1800 s of the chaos\)/,
    },
    {
      name: 'no release at all: one gap over the whole chaos',
      at: [],
      pass: false,
      detail:
        /^longest gap 1800 s without a release counting Git up \(1800 s wall, 0 s Git down; 0 s to 1800 s of the chaos\)/,
    },
    {
      name: 'a 529 s gap of which Git was down 300 s (seed 9: five outages of 60 s) passes: 229 s counting Git up',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1529, 1799)],
      outages: [
        gitDown(1020, 1080),
        gitDown(1090, 1150),
        gitDown(1200, 1260),
        gitDown(1300, 1360),
        gitDown(1420, 1480),
      ],
      pass: true,
      detail:
        /^longest gap 229 s without a release counting Git up \(529 s wall, 300 s Git down; 1000 s to 1529 s of the chaos\); Git down 300 s in all/,
    },
    {
      name: 'a 310 s gap with Git up all along fails',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1310, 1800)],
      outages: [gitDown(200, 260)],
      pass: false,
      detail:
        /^longest gap 310 s without a release counting Git up \(310 s wall, 0 s Git down; 1000 s to 1310 s/,
    },
    {
      name: 'Git slow is not excluded: slow Git must still release',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1400, 1800)],
      outages: [outage('slow', 1000, 1030), outage('slow', 1100, 1130), outage('slow', 1200, 1230)],
      pass: false,
      detail: /^longest gap 400 s without a release counting Git up \(400 s wall, 0 s Git down;/,
    },
    {
      name: 'overlapping down windows are not subtracted twice (420 s wall, 100 s down: 320 s) and fail',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1420, 1800)],
      outages: [gitDown(1050, 1150), gitDown(1100, 1150)],
      pass: false,
      detail: /^longest gap 320 s without a release counting Git up \(420 s wall, 100 s Git down;/,
    },
    {
      name: 'overlapping down windows count once each moment (400 s wall, 150 s down: 250 s) and pass',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1400, 1800)],
      outages: [gitDown(1050, 1150), gitDown(1100, 1200)],
      pass: true,
      detail: /^longest gap 250 s without a release counting Git up \(400 s wall, 150 s Git down;/,
    },
    {
      name: 'a gap measured counting Git up can be the longest though a wider one had Git down',
      at: [
        ...releasesEvery(10, 0, 500),
        ...releasesEvery(10, 900, 1000),
        ...releasesEvery(10, 1280, 1800),
      ],
      outages: [gitDown(550, 850)],
      pass: true,
      detail:
        /^longest gap 280 s without a release counting Git up \(280 s wall, 0 s Git down; 1000 s to 1280 s/,
    },
  ] as { name: string; at: number[]; outages?: Outage[]; pass: boolean; detail: RegExp }[])
    it(name, () => {
      const check = releaseGapCheck(at, { ...options, gitDown: gitDownWindows(outages) });
      assert.equal(check.pass, pass, check.detail);
      assert.match(check.detail, detail);
    });
});

describe('the soak check that releases resume by themselves after Git comes back', () => {
  const options = { fromMs: 0, toMs: 1800 * s, limitMs: 120 * s };
  for (const { name, at, outages, pass, detail } of [
    {
      name: 'a release 30 s after every window passes',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1090, 1800)],
      outages: [gitDown(1000, 1060)],
      pass: true,
      detail:
        /^1 Git-down window judged, the slowest release after one 30 s of Git up \(after Git down 1000 s to 1060 s\)/,
    },
    {
      name: 'a window with no release after it fails, naming the window',
      at: releasesEvery(10, 0, 1000),
      outages: [gitDown(200, 260), gitDown(1000, 1060)],
      pass: false,
      detail: /no release in the 740 s of Git up after Git down 1000 s to 1060 s/,
    },
    {
      name: 'a first release 130 s of Git up after the window fails, naming the window',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1190, 1800)],
      outages: [gitDown(1000, 1060)],
      pass: false,
      detail: /first release 130 s of Git up after Git down 1000 s to 1060 s/,
    },
    {
      name: 'time Git is down again before the first release is not counted (130 s wall, 60 s of it down)',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1190, 1800)],
      outages: [gitDown(1000, 1060), gitDown(1100, 1160)],
      pass: true,
      detail: /^2 Git-down windows judged/,
    },
    {
      name: 'overlapping windows are one window, judged from its last end',
      at: [...releasesEvery(10, 0, 1000), ...releasesEvery(10, 1150, 1800)],
      outages: [gitDown(1000, 1060), gitDown(1030, 1140)],
      pass: true,
      detail:
        /^1 Git-down window judged, the slowest release after one 10 s of Git up \(after Git down 1000 s to 1140 s\)/,
    },
    {
      name: 'a window ending less than 120 s of Git up before the chaos ends is not judged',
      at: releasesEvery(10, 0, 1700),
      outages: [gitDown(1700, 1760)],
      pass: true,
      detail: /^0 Git-down windows judged; 1 ending within 120 s of the chaos end not judged/,
    },
    {
      name: 'Git slow is no window: nothing to judge',
      at: releasesEvery(10, 0, 1000),
      outages: [outage('slow', 1000, 1030)],
      pass: true,
      detail: /^0 Git-down windows judged/,
    },
  ] as { name: string; at: number[]; outages: Outage[]; pass: boolean; detail: RegExp }[])
    it(name, () => {
      const check = gitRecoveryCheck(at, gitDownWindows(outages), options);
      assert.equal(check.pass, pass, check.detail);
      assert.match(check.detail, detail);
    });
});

describe("the soak's reading of leader terms from a replica's log", () => {
  it('takes the time of each "became leader" line and skips the rest, a line cut short by a SIGKILL included', () => {
    const log = [
      'Debugger listening on ws://127.0.0.1:33755/171276d2',
      '{"level":30,"time":"2026-12-03T21:05:51.986Z","msg":"became leader","fencingToken":"replica-a/23"}',
      '{"level":30,"time":"2026-12-03T21:05:52.245Z","msg":"new term: destructive acts take live reads"}',
      '{"level":30,"time":"2026-12-03T21:06:22.470Z","msg":"became leader","fencingTo',
      '{"level":30,"time":"2026-12-03T21:07:16.336Z","msg":"became leader"}',
    ].join('\n');
    assert.deepEqual(termStartsIn(log), [
      Date.parse('2026-12-03T21:05:51.986Z'),
      Date.parse('2026-12-03T21:07:16.336Z'),
    ]);
  });
});
