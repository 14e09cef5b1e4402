import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { drainState, settleCheck, type SettleSample } from '../../soak/judge.ts';

const second = 1000;
/** ml-training drains at most 9 pods per 4 s, data-pipeline 6 per 4 s. */
const options = {
  stallMs: 120 * second,
  limitMs: 480 * second,
  allowedPerSecond: { 'ml-training': 9 / 4, 'data-pipeline': 6 / 4 },
};

/** One look per row: [seconds into settling, ml-training [held, released so far], data-pipeline [held, released]]. */
type Pair = readonly [number, number];
type Row = readonly [number, Pair, Pair?];

function looks(rows: readonly Row[]): SettleSample[] {
  return rows.map(([at, ml, etl = [0, 0]]) => ({
    atMs: at * second,
    tenants: {
      'ml-training': { held: ml[0], released: ml[1] },
      'data-pipeline': { held: etl[0], released: etl[1] },
    },
  }));
}

/** 700 eval pods drained at 2 pods per second: the budget's pace, not a stall. */
const drainingAtTheBudgetsPace: Row[] = Array.from({ length: 176 }, (_, i) => [
  i * 2,
  [Math.max(0, 700 - i * 4), Math.min(700, i * 4)],
]);

describe('the soak waits while held pods drain at the pace the policies allow', () => {
  for (const { name, rows, state } of [
    { name: 'nothing held at the first look: settled', rows: [[0, [0, 0]]], state: 'settled' },
    {
      name: 'held pods released in every window: still draining after the old fixed wait would have given up',
      rows: drainingAtTheBudgetsPace.slice(0, 150),
      state: 'draining',
    },
    {
      name: 'the queue drained at the budgets pace: settled',
      rows: drainingAtTheBudgetsPace,
      state: 'settled',
    },
    {
      name: 'pods held and no release for less than the window: still draining',
      rows: [
        [0, [50, 0]],
        [60, [40, 10]],
        [179, [40, 10]],
      ],
      state: 'draining',
    },
    {
      name: 'pods held and no release for the whole window since the last one: stalled',
      rows: [
        [0, [50, 0]],
        [60, [40, 10]],
        [180, [40, 10]],
      ],
      state: 'stalled',
    },
    {
      name: 'pods held and no release at all for a window from the start: stalled',
      rows: [
        [0, [50, 0]],
        [120, [50, 0]],
      ],
      state: 'stalled',
    },
    {
      name: 'one tenant draining does not hide another that stalled',
      rows: [
        [0, [500, 0], [5, 0]],
        [120, [260, 240], [5, 0]],
      ],
      state: 'stalled',
    },
    {
      name: 'a tenant with nothing held never stalls',
      rows: [
        [0, [500, 0], [0, 0]],
        [130, [240, 260], [0, 0]],
      ],
      state: 'draining',
    },
    {
      name: 'the settle limit reached while still draining: the limit',
      rows: [
        [0, [2000, 0]],
        [240, [1000, 1000]],
        [480, [40, 1960]],
      ],
      state: 'limit',
    },
  ] as { name: string; rows: Row[]; state: string }[])
    it(name, () => assert.equal(drainState(looks(rows), options).kind, state));

  it('a stall names the tenant, how many of its pods are held and since when no release', () => {
    const state = drainState(
      looks([
        [0, [500, 0], [5, 0]],
        [120, [260, 240], [5, 0]],
      ]),
      options,
    );
    assert.deepEqual(state, { kind: 'stalled', tenant: 'data-pipeline', held: 5, sinceMs: 0 });
  });
});

describe('the settle check', () => {
  it('passes once drained and reports the drain rate seen against the rate the budgets allow', () => {
    const check = settleCheck(looks(drainingAtTheBudgetsPace), options);
    assert.equal(check.pass, true);
    assert.match(
      check.detail,
      /^none held after 350 s; ml-training: 700 held at the start, drained in 350 s, 2\.00 pods\/s seen, 2\.25 allowed$/,
    );
  });

  it('fails on a stall, naming the tenant and the window without a release', () => {
    const check = settleCheck(
      looks([
        [0, [50, 0]],
        [60, [40, 10]],
        [180, [40, 10]],
      ]),
      options,
    );
    assert.equal(check.pass, false);
    assert.match(check.detail, /^stalled: no ml-training pod released for 120 s with 40 held/);
    assert.match(
      check.detail,
      /ml-training: 50 held at the start, 40 at the end after 180 s, 0\.06 pods\/s seen, 2\.25 allowed/,
    );
  });

  it('fails at the limit, saying how long the budgets need for what was held', () => {
    const check = settleCheck(
      looks([
        [0, [2000, 0]],
        [240, [1000, 1000]],
        [480, [40, 1960]],
      ]),
      options,
    );
    assert.equal(check.pass, false);
    assert.match(
      check.detail,
      /^settle limit \(480 s\) reached with 40 held \(the budgets need 889 s at least for what was held at the start\)/,
    );
  });

  it('names the tenants that had nothing held as such', () => {
    const check = settleCheck(looks([[0, [0, 0]]]), options);
    assert.equal(check.detail, 'none held after 0 s');
  });
});
