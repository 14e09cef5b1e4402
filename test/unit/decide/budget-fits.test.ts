import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  addUsage,
  budgetFits,
  emptyUsage,
  evaluateBudget,
  type BudgetLimits,
  type Usage,
} from '../../../src/decide/conditions.ts';

const usage = (pods: number, resources: Record<string, number> = {}): Usage => ({
  pods,
  resources,
});

/** What budgetFits must always answer: the budget input's `met` for used + ahead. */
function evaluatedFit(used: Usage, ahead: Usage, adding: Usage, limits: BudgetLimits): boolean {
  return evaluateBudget(addUsage(addUsage(emptyUsage(), used), ahead), adding, limits).met;
}

test('budgetFits answers as the Budget input of used plus the units queued ahead', async (t) => {
  const cases: {
    name: string;
    used: Usage;
    ahead: Usage;
    adding: Usage;
    limits: BudgetLimits;
    fits: boolean;
  }[] = [
    {
      name: 'fits with nothing limited',
      used: usage(100, { cpu: 9000 }),
      ahead: usage(50),
      adding: usage(1, { cpu: 100 }),
      limits: { resources: {} },
      fits: true,
    },
    {
      name: 'does not fit when the pods queued ahead fill the pod limit',
      used: usage(2),
      ahead: usage(2),
      adding: usage(1),
      limits: { pods: 4, resources: {} },
      fits: false,
    },
    {
      name: 'fits exactly at the pod limit',
      used: usage(2),
      ahead: usage(1),
      adding: usage(1),
      limits: { pods: 4, resources: {} },
      fits: true,
    },
    {
      name: 'does not fit when a resource used only ahead is exceeded',
      used: usage(0),
      ahead: usage(3, { cpu: 1900 }),
      adding: usage(1, { cpu: 200 }),
      limits: { resources: { cpu: 2000 } },
      fits: false,
    },
    {
      name: 'does not fit when a resource used only by running pods is exceeded',
      used: usage(3, { memory: 1000 }),
      ahead: usage(0),
      adding: usage(1, { memory: 1 }),
      limits: { resources: { memory: 1000 } },
      fits: false,
    },
    {
      name: 'fits when the unit asks nothing of the exceeded resource',
      used: usage(3, { 'nvidia.com/gpu': 9 }),
      ahead: usage(0),
      adding: usage(1, { cpu: 100 }),
      limits: { resources: { 'nvidia.com/gpu': 2, cpu: 1000 } },
      fits: true,
    },
    {
      name: 'fits with fractional sums at the limit',
      used: usage(1, { cpu: 0.1 }),
      ahead: usage(1, { cpu: 0.2 }),
      adding: usage(1, { cpu: 0.7 }),
      limits: { resources: { cpu: 1 } },
      fits: true,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      assert.equal(budgetFits(c.used, c.ahead, c.adding, c.limits), c.fits);
      assert.equal(
        budgetFits(c.used, c.ahead, c.adding, c.limits),
        evaluatedFit(c.used, c.ahead, c.adding, c.limits),
      );
    });
  }
});

test('budgetFits agrees with the Budget input on 2,000 generated usages', () => {
  // A fixed linear congruential sequence: the same cases on every run.
  let seed = 23;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const resources = ['cpu', 'memory', 'nvidia.com/gpu'];
  const some = (scale: number): Record<string, number> =>
    Object.fromEntries(resources.filter(() => next(2) === 0).map((r) => [r, next(scale) / 10]));
  for (let i = 0; i < 2000; i++) {
    const used = usage(next(20), some(100));
    const ahead = usage(next(20), some(100));
    const adding = usage(1 + next(8), some(40));
    const limits: BudgetLimits = {
      ...(next(2) === 0 ? { pods: next(40) } : {}),
      resources: some(250),
    };
    assert.equal(
      budgetFits(used, ahead, adding, limits),
      evaluatedFit(used, ahead, adding, limits),
      JSON.stringify({ used, ahead, adding, limits }),
    );
  }
});
