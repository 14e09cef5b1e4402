import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { referencePath, renderPolicyReference } from '../../../scripts/gen-policy-reference.ts';
import { policyKinds } from '../../../src/policy/schema.ts';

test('the committed policy reference is what the schemas generate (run npm run docs:policy)', async () => {
  const committed = readFileSync(referencePath, 'utf8');
  const fresh = await renderPolicyReference();
  assert.equal(
    committed,
    fresh,
    'docs/policy-reference.md is out of date: run npm run docs:policy',
  );
});

test('the reference documents every kind and its fields', async () => {
  const doc = await renderPolicyReference();
  for (const kind of policyKinds) assert.match(doc, new RegExp(`^## ${kind}$`, 'm'));
  assert.match(doc, /`spec\.conditions\[\]` with `type: ImagePresent`/);
  assert.match(doc, /\| `spec\.conditions\[\]\.minNodes`\s+\| integer\s+\|/);
  assert.match(doc, /\| `spec\.audit\.branch`\s+\| string\s+\|\s+\| `tollgate\/audit`\s+\|/);
  assert.match(doc, /\| `spec\.audit\.mode`\s+\| `strict` \\\| `async`\s+\|\s+\| `strict`\s+\|/);
});
