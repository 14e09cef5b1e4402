/**
 * validate warns about every tenant whose budget ignores pods tollgate did not release
 * (the risk in words); plan warns only about the tenants a proposal turns to Ignore.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  neverGatedWarnings,
  neverGatedWarningsOfChange,
} from '../../../src/cli/budget-warnings.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';

const policyOf = (choices: Record<string, 'Charge' | 'Ignore'>) =>
  aPolicy()
    .tenant(
      ...Object.entries(choices).map(([name, choice]) => aTenant(name).neverGatedPods(choice)),
    )
    .obj();

test('validate warns once per tenant that ignores never-gated pods, naming field and risk', async (t) => {
  const rows = [
    { name: 'Charge everywhere: nothing', choices: { a: 'Charge', b: 'Charge' }, warned: [] },
    {
      name: 'one tenant ignores: one warning',
      choices: { a: 'Ignore', b: 'Charge' },
      warned: ['a'],
    },
    { name: 'two ignore: two warnings', choices: { a: 'Ignore', b: 'Ignore' }, warned: ['a', 'b'] },
  ] as const;
  for (const row of rows) {
    await t.test(row.name, () => {
      const warnings = neverGatedWarnings(policyOf(row.choices));
      assert.deepEqual(
        warnings.map((w) => /tenant "(\w+)"/.exec(w.message)?.[1]),
        row.warned,
      );
      for (const w of warnings) {
        assert.equal(w.path, 'spec.budget.neverGatedPods');
        assert.match(w.message, /run outside the budget/);
      }
    });
  }
});

test('plan warns only about the tenants a proposal turns to Ignore', async (t) => {
  const rows = [
    { name: 'Charge to Ignore', base: { a: 'Charge' }, proposed: { a: 'Ignore' }, warned: ['a'] },
    { name: 'already Ignore', base: { a: 'Ignore' }, proposed: { a: 'Ignore' }, warned: [] },
    { name: 'a new tenant with Ignore', base: {}, proposed: { n: 'Ignore' }, warned: ['n'] },
    { name: 'back to Charge', base: { a: 'Ignore' }, proposed: { a: 'Charge' }, warned: [] },
  ] as const;
  for (const row of rows) {
    await t.test(row.name, () => {
      const warnings = neverGatedWarningsOfChange(policyOf(row.base), policyOf(row.proposed));
      assert.deepEqual(
        warnings.map((w) => /tenant "(\w+)"/.exec(w.message)?.[1]),
        row.warned,
      );
    });
  }
});
