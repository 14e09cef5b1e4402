// The Schedule condition: windows as cron expressions in a time zone, stepped by the
// `cron` package, across daylight-saving changes. Times are fixed instants, never today.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  evaluateSchedule,
  insideWindow,
  nextWindowOpening,
  scheduleWindowProblem,
} from '../../../src/decide/schedule.ts';
import { explainPods } from '../../../src/decide/explain.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { emptyPlanState, planReleases } from '../../../src/decide/release-plan.ts';
import { classifyPods } from '../../../src/decide/release-classify.ts';
import { judgePods } from '../../../src/decide/release-judge.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const nightly = { cron: '* 1-4 * * *', timeZone: 'Europe/Berlin' }; // 01:00 to 05:00 Berlin
const utc = (text: string) => Date.parse(text);

describe('inside a nightly window, in Berlin time', () => {
  const cases = [
    {
      name: 'winter, 00:59 Berlin (23:59 UTC) is outside',
      at: '2026-01-14T23:59:30Z',
      want: false,
    },
    { name: 'winter, 01:00 Berlin (00:00 UTC) is inside', at: '2026-01-15T00:00:00Z', want: true },
    { name: 'winter, 04:59 Berlin is inside', at: '2026-01-15T03:59:59Z', want: true },
    { name: 'winter, 05:00 Berlin is outside', at: '2026-01-15T04:00:00Z', want: false },
    { name: 'summer, 01:00 Berlin (23:00 UTC) is inside', at: '2026-07-14T23:00:00Z', want: true },
    { name: 'summer, 00:30 UTC (02:30 Berlin) is inside', at: '2026-07-15T00:30:00Z', want: true },
    {
      name: 'summer, 03:00 UTC (05:00 Berlin) is outside',
      at: '2026-07-15T03:00:00Z',
      want: false,
    },
    {
      name: 'spring forward (29 March): 01:30 Berlin, before the jump, is inside',
      at: '2026-03-29T00:30:00Z',
      want: true,
    },
    {
      name: 'spring forward: 03:30 CEST (01:30 UTC), after the jump, is inside',
      at: '2026-03-29T01:30:00Z',
      want: true,
    },
    {
      name: 'spring forward: 05:00 CEST (03:00 UTC) is outside',
      at: '2026-03-29T03:00:00Z',
      want: false,
    },
    {
      name: 'fall back (25 October): the first 02:30 (00:30 UTC) is inside',
      at: '2026-10-25T00:30:00Z',
      want: true,
    },
    {
      name: 'fall back: the repeated 02:30 (01:30 UTC) is inside too',
      at: '2026-10-25T01:30:00Z',
      want: true,
    },
    {
      name: 'fall back: 05:00 CET (04:00 UTC) is outside',
      at: '2026-10-25T04:00:00Z',
      want: false,
    },
  ];
  for (const c of cases) it(c.name, () => assert.equal(insideWindow(nightly, utc(c.at)), c.want));
});

describe('when the next window opens', () => {
  const cases = [
    {
      name: 'in winter, the next 01:00 Berlin is 00:00 UTC',
      at: '2026-01-15T10:00:00Z',
      want: '2026-01-16T00:00:00.000Z',
    },
    {
      name: 'in summer, the next 01:00 Berlin is 23:00 UTC the day before',
      at: '2026-07-15T10:00:00Z',
      want: '2026-07-15T23:00:00.000Z',
    },
    {
      name: 'the evening before spring forward, the window still opens at 01:00 CET',
      at: '2026-03-28T20:00:00Z',
      want: '2026-03-29T00:00:00.000Z',
    },
    {
      name: 'the evening before fall back, the window opens at 01:00 CEST',
      at: '2026-10-24T20:00:00Z',
      want: '2026-10-24T23:00:00.000Z',
    },
  ];
  for (const c of cases)
    it(c.name, () =>
      assert.equal(new Date(nextWindowOpening([nightly], utc(c.at))).toISOString(), c.want),
    );
  it('with two windows, the earlier opening wins', () => {
    const lunch = { cron: '* 12 * * 1-5', timeZone: 'America/New_York' };
    assert.equal(
      new Date(nextWindowOpening([nightly, lunch], utc('2026-01-15T10:00:00Z'))).toISOString(),
      '2026-01-15T17:00:00.000Z',
    );
  });
});

describe('the Schedule condition as an input', () => {
  it('is met inside a window, naming it', () => {
    assert.deepEqual(evaluateSchedule([nightly], utc('2026-01-15T00:10:00Z')), {
      condition: 'Schedule',
      met: true,
      value: { window: nightly.cron, timeZone: nightly.timeZone },
    });
  });
  it('is not met outside, saying when the next window opens', () => {
    assert.deepEqual(evaluateSchedule([nightly], utc('2026-01-15T10:00:00Z')), {
      condition: 'Schedule',
      met: false,
      value: { opensAt: '2026-01-16T00:00:00.000Z', windows: [nightly] },
    });
  });
  it("names the cron package's reason for a bad expression or time zone", () => {
    assert.match(scheduleWindowProblem({ cron: '61 * * * *', timeZone: 'UTC' }) ?? '', /61/);
    assert.match(
      scheduleWindowProblem({ cron: '* 1-4 * * *', timeZone: 'Mars/Base' }) ?? '',
      /timezone/i,
    );
    assert.equal(scheduleWindowProblem(nightly), undefined);
  });
});

describe('a GatePolicy with a Schedule', () => {
  const night = aGatePolicy('night', 'team-a').conditions(
    { type: 'Budget' },
    { type: 'Schedule', windows: [nightly] },
  );
  const policy = aPolicy().tenant(aTenant('team-a')).gatePolicy(night).obj();
  const pod = aPod('p', 'team-a')
    .uid('uid-p')
    .gated(night.gateName)
    .createdAt(utc('2026-01-15T09:00:00Z'));
  const snapshot = snapshotOf([pod.obj()], [aNode('n1').obj()]);

  it('holds a pod outside its window and wakes up when the window opens', () => {
    const now = utc('2026-01-15T10:00:00Z');
    const plan = planReleases(policy, snapshot, emptyPlanState, now);
    assert.deepEqual(
      plan.decisions.map((d) => [d.kind, d.reason]),
      [['Hold', 'waiting for Schedule']],
    );
    const classified = classifyPods(policy, [pod.obj()], new Map());
    const judged = judgePods(policy, snapshot, classified, now);
    assert.ok(judged.wakeups.includes(utc('2026-01-16T00:00:00Z')), 'woken when the window opens');
  });

  it('releases it inside the window', () => {
    const plan = planReleases(policy, snapshot, emptyPlanState, utc('2026-01-16T00:00:30Z'));
    assert.deepEqual(
      plan.decisions.map((d) => d.kind),
      ['Release'],
    );
  });

  it('explain estimates its release when the window opens', () => {
    const [explained] = explainPods(policy, snapshot, utc('2026-01-15T10:00:00Z'));
    assert.deepEqual(explained?.estimate, {
      releaseAt: '2026-01-16T00:00:00.000Z',
      basis: 'when its next Schedule window opens (only Schedule holds it); pacing may add to it',
    });
  });
});
