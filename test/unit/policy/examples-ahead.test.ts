/**
 * policy-examples/ must keep working for years: read it with a clock ten years ahead of
 * the machine's and check that nothing in it has silently stopped counting. Every
 * approval still applies to its target, gate expiry is measured from each pod's own
 * creation (never a fixed date), and no date written anywhere in the files lies before
 * that clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { loadPolicyFromDirectory, readPolicyDirectory } from '../../../src/policy/load.ts';
import { parsePolicyFile } from '../../../src/policy/parse.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { approvalFor } from '../../../src/decide/conditions.ts';
import { isExpired } from '../../../src/decide/expiry.ts';
import { ManualClock, systemClock } from '../../../src/lib/clock.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aPod } from '../../builders/pod.ts';

const examples = resolve(import.meta.dirname, '../../../policy-examples');
const YEAR = 365.25 * 86_400_000;
const tenYearsAhead = new ManualClock(systemClock.now() + 10 * YEAR);

async function examplePolicy(): Promise<Policy> {
  const result = await loadPolicyFromDirectory(examples, { commit: 'ahead' });
  assert.ok(result.ok, result.ok ? '' : result.errors.map(formatPolicyError).join('\n'));
  return result.policy;
}

/** Every string value in a parsed document, with its path. */
function strings(value: unknown, path: string): [string, string][] {
  if (typeof value === 'string') return [[path, value]];
  if (Array.isArray(value)) return value.flatMap((v, i) => strings(v, `${path}[${i}]`));
  if (typeof value === 'object' && value !== null)
    return Object.entries(value).flatMap(([k, v]) => strings(v, path ? `${path}.${k}` : k));
  return [];
}

test('with a clock ten years ahead every example approval still applies to its target', async () => {
  const policy = await examplePolicy();
  const now = tenYearsAhead.now();
  assert.ok(policy.approvals.length > 0, 'the examples show an approval');
  for (const approval of policy.approvals) {
    const where = `${approval.source.file} (${approval.name})`;
    if (approval.target.kind === 'Pod' && approval.action !== 'Resume') {
      const pod = aPod(approval.target.name, approval.target.namespace).obj();
      assert.equal(
        approvalFor(policy.approvals, pod, approval.action, now)?.name,
        approval.name,
        `${where}: no longer counts ${new Date(now).toISOString()}`,
      );
    } else {
      assert.ok(
        approval.expiresAt === undefined || approval.expiresAt > now,
        `${where}: expired before ${new Date(now).toISOString()}`,
      );
    }
  }
});

test('with a clock ten years ahead gate expiry still runs from the pod creation: held a minute, not expired; past its age, expired', async () => {
  const policy = await examplePolicy();
  const now = tenYearsAhead.now();
  const withExpiry = policy.gatePolicies.filter((g) => g.expiry);
  assert.ok(withExpiry.length > 0, 'the examples show a gate expiry');
  for (const gate of withExpiry) {
    const after = gate.expiry?.afterMs ?? 0;
    const fresh = aPod('fresh', 'ns')
      .createdAt(new Date(now - 60_000))
      .obj();
    const old = aPod('old', 'ns')
      .createdAt(new Date(now - after - 60_000))
      .obj();
    assert.equal(isExpired(gate, fresh, now), false, `${gate.name}: a one-minute-old pod expired`);
    assert.equal(isExpired(gate, old, now), true, `${gate.name}: an old pod never expires`);
  }
});

test('no date written in any example file lies before a clock ten years ahead', async () => {
  const now = tenYearsAhead.now();
  const { files } = await readPolicyDirectory(examples);
  const stale: string[] = [];
  for (const file of files) {
    for (const doc of parsePolicyFile(file.path, file.content).documents) {
      for (const [path, text] of strings(doc.value, '')) {
        for (const [date] of text.matchAll(
          /\d{4}-\d{2}-\d{2}(?:T[\d:.]+(?:Z|[+-]\d{2}:\d{2}))?/g,
        )) {
          if (!(Date.parse(date) > now)) stale.push(`${file.path}#${doc.index} ${path}: ${date}`);
        }
      }
    }
  }
  assert.deepEqual(stale, [], `dates that pass within ten years:\n${stale.join('\n')}`);
});
