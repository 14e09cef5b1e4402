import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  backlogCheck,
  boundedCheck,
  gangsWhole,
  growthCheck,
  memoryGrowth,
  memoryNotJudged,
  releaseGapCheck,
  releasesInAudit,
} from '../../soak/judge.ts';
import type { MemorySample } from '../../soak/replicas.ts';

const minute = 60_000;
const options = { warmupMs: 2 * minute, minSamples: 8, limit: 0.1 };

/**
 * One sample per minute of one process, RSS and heap from `mib` (MiB per minute); its
 * view holds 500 pods, or `pods` (per minute).
 */
function series(
  identity: string,
  incarnation: number,
  mib: readonly number[],
  pods: readonly number[] = mib.map(() => 500),
): MemorySample[] {
  return mib.map((value, minuteIndex) => ({
    viewPods: pods[minuteIndex] ?? Number.NaN,
    at: minuteIndex * minute,
    identity,
    incarnation,
    rssBytes: value * 2 ** 20,
    heapUsedBytes: (value / 2) * 2 ** 20,
    openFds: 40,
    cloneBytes: 2 ** 20,
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
      /^not judged: runs shorter than 10 minutes only report it \(replica-a#0: 8 samples, rss 16\.0%, heap 16\.0%, view 500 -> 500 pods\)$/,
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
  for (const { name, members, pass } of [
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
  ])
    it(name, () => assert.equal(gangsWhole(new Map([['ns/g1', members]])).pass, pass));

  it('names the members left waiting and how far apart whole gangs were released', () => {
    const check = gangsWhole(
      new Map([
        ['ns/g1', [member('a', 0), member('b', 2500), member('c', 1000)]],
        ['ns/g2', [member('d', 0), member('e')]],
      ]),
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

describe('the soak check that releases go on through the chaos', () => {
  const s = 1000;
  const options = { fromMs: 0, toMs: 1800 * s, limitMs: 300 * s };
  for (const { name, at, pass, detail } of [
    {
      name: 'a stretch of twenty minutes without a release fails, naming it',
      at: [10, 70, 200, 260, 1500, 1790].map((t) => t * s),
      pass: false,
      detail: /^longest gap 1240 s without a release \(260 s to 1500 s\)/,
    },
    {
      name: 'no gap longer than the limit: passes',
      at: Array.from({ length: 10 }, (_, i) => (i * 200 + 100) * s),
      pass: true,
      detail: /^longest gap 200 s without a release \(100 s to 300 s\)/,
    },
    {
      name: 'no release after a point until the chaos ends: the gap runs to the end',
      at: [10, 100].map((t) => t * s),
      pass: false,
      detail: /^longest gap 1700 s without a release \(100 s to 1800 s\)/,
    },
    {
      name: 'no release at all: one gap over the whole chaos',
      at: [],
      pass: false,
      detail: /^longest gap 1800 s without a release \(0 s to 1800 s\)/,
    },
  ])
    it(name, () => {
      const check = releaseGapCheck(at, options);
      assert.equal(check.pass, pass);
      assert.match(check.detail, detail);
    });
});
