import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadPolicyFromDirectory } from '../../../src/policy/load.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';

const root = resolve(import.meta.dirname, '../../fixtures/policy-invalid');
const cases = readdirSync(root, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);

test('there are invalid fixtures to check', () => {
  assert.ok(cases.length >= 20, `${cases.length} cases`);
});

for (const name of cases) {
  test(`the invalid policy "${name}" is rejected with its expected message`, async () => {
    const expected = readFileSync(join(root, name, 'expected.txt'), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
    assert.ok(expected.length > 0, 'expected.txt lists at least one message');
    const result = await loadPolicyFromDirectory(join(root, name));
    assert.equal(result.ok, false, 'the fixture must not validate');
    if (result.ok) return;
    const printed = result.errors.map(formatPolicyError);
    for (const line of expected) {
      assert.ok(
        printed.some((p) => p.includes(line)),
        `expected "${line}" among:\n${printed.join('\n')}`,
      );
    }
  });
}
