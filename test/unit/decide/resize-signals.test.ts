import { test } from 'node:test';
import assert from 'node:assert/strict';
import { combineVerdicts, judgeSlo, judgeWindow } from '../../../src/decide/resize-signals.ts';
import { queueSignal, series, steady } from '../../builders/resize.ts';

const end = Date.UTC(2026, 10, 29, 8, 0, 0);
const window = { startMs: end - 60_000, endMs: end, stepMs: 15_000, hysteresis: 0.1 };

test('window verdicts', () => {
  const cases: { name: string; values: number[]; direction: string; covered: boolean }[] = [
    {
      name: 'a signal above the threshold plus hysteresis for the whole window steps up',
      values: [120, 130, 111, 150, 140],
      direction: 'up',
      covered: true,
    },
    {
      name: 'a signal above the threshold but inside the hysteresis band does nothing',
      values: [105, 105, 105, 105, 105],
      direction: 'hold',
      covered: true,
    },
    {
      name: 'one spike does nothing',
      values: [50, 50, 500, 50, 50],
      direction: 'hold',
      covered: true,
    },
    {
      name: 'one dip below the threshold in a high window does nothing',
      values: [150, 150, 90, 150, 150],
      direction: 'hold',
      covered: true,
    },
    {
      name: 'a signal below the threshold minus hysteresis for the whole window steps down',
      values: [5, 10, 17, 3, 0],
      direction: 'down',
      covered: true,
    },
    {
      name: 'a signal just under the down threshold but inside the band does nothing',
      values: [19, 19, 19, 19, 19],
      direction: 'hold',
      covered: true,
    },
    {
      name: 'an oscillating signal does nothing',
      values: [150, 5, 150, 5, 150],
      direction: 'hold',
      covered: true,
    },
  ];
  for (const c of cases) {
    const verdict = judgeWindow(queueSignal, series(c.values, end), window);
    assert.equal(verdict.direction, c.direction, c.name);
    assert.equal(verdict.covered, c.covered, c.name);
  }
});

test('missing data holds instead of deciding', () => {
  const cases: { name: string; samples: ReturnType<typeof series> }[] = [
    { name: 'no samples at all', samples: [] },
    { name: 'only the second half of the window', samples: series([200, 200, 200], end) },
    {
      name: 'a gap in the middle of the window',
      samples: series([200, 200, 200, 200, 200], end).filter((_, i) => i !== 2 && i !== 3),
    },
    {
      name: 'data that stopped before the end of the window',
      samples: series([200, 200, 200], end - 30_000),
    },
  ];
  for (const c of cases) {
    const verdict = judgeWindow(queueSignal, c.samples, window);
    assert.equal(verdict.direction, 'hold', c.name);
    assert.equal(verdict.covered, false, c.name);
  }
});

test('a signal with only an up threshold never asks for less', () => {
  const verdict = judgeWindow(
    { ...queueSignal, scaleDownBelow: undefined },
    steady(0, end),
    window,
  );
  assert.equal(verdict.direction, 'hold');
});

test('combining verdicts: any up wins, down needs every voter', () => {
  const v = (direction: 'up' | 'down' | 'hold', downThreshold?: number) => ({
    signal: 's',
    direction,
    covered: true,
    read: 'ok' as const,
    resources: ['cpu', 'memory'] as const,
    samples: 5,
    reason: '',
    ...(downThreshold === undefined ? {} : { downThreshold }),
  });
  const cases: { name: string; verdicts: ReturnType<typeof v>[]; want: string }[] = [
    { name: 'one up and one down is up', verdicts: [v('up', 1), v('down', 1)], want: 'up' },
    { name: 'all voters down is down', verdicts: [v('down', 1), v('down', 1)], want: 'down' },
    { name: 'one voter holding blocks down', verdicts: [v('down', 1), v('hold', 1)], want: 'hold' },
    {
      name: 'a signal without a down threshold does not vote on down',
      verdicts: [v('down', 1), v('hold')],
      want: 'down',
    },
    { name: 'no verdicts hold', verdicts: [], want: 'hold' },
  ];
  for (const c of cases) assert.equal(combineVerdicts(c.verdicts), c.want, c.name);
});

test('an SLO is breached only when above for the whole forMs', () => {
  const slo = { above: 0.5, forMs: 30_000 };
  assert.equal(
    judgeSlo(slo, series([0.9, 0.9, 0.9], end), { endMs: end, stepMs: 15_000 }).breached,
    true,
  );
  assert.equal(
    judgeSlo(slo, series([0.9, 0.2, 0.9], end), { endMs: end, stepMs: 15_000 }).breached,
    false,
  );
  assert.equal(judgeSlo(slo, series([0.9], end), { endMs: end, stepMs: 15_000 }).breached, false);
});
