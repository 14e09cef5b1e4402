/**
 * The demo's rules about time, driven by an injected clock: its own approval counts from
 * the moment the demo runs for a few hours, whatever the date.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { loadPolicyFromFiles, readPolicyDirectory } from '../../../src/policy/load.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { approvalFor } from '../../../src/decide/conditions.ts';
import { ManualClock, systemClock } from '../../../src/lib/clock.ts';
import { APPROVAL_HOURS, APPROVED, approvalFile } from '../../../scripts/demo-time.ts';
import { aPod } from '../../builders/pod.ts';

const examples = resolve(import.meta.dirname, '../../../policy-examples');
const HOUR = 3_600_000;
const YEAR = 365.25 * 24 * HOUR;

/** policy-examples/ plus the demo's approval commit, as `tollgate run` reads them. */
async function demoPolicy(now: number) {
  const { files } = await readPolicyDirectory(examples);
  const result = loadPolicyFromFiles([...files, approvalFile(now)]);
  assert.ok(result.ok, result.ok ? '' : result.errors.map(formatPolicyError).join('\n'));
  return result.policy;
}

for (const [when, start] of [
  ['today', systemClock.now()],
  ['ten years from today', systemClock.now() + 10 * YEAR],
] as const) {
  test(`a demo run ${when}: its approval releases the approved load from the start until ${APPROVAL_HOURS}h later, not after`, async () => {
    const clock = new ManualClock(start);
    const policy = await demoPolicy(clock.now());
    const load = aPod(APPROVED.name, APPROVED.namespace).obj();
    const demoApproval = (now: number) => approvalFor(policy.approvals, load, 'Release', now);
    assert.equal(demoApproval(clock.now())?.name, 'demo-nightly-load-approved');
    clock.advance(APPROVAL_HOURS * HOUR - 1);
    assert.equal(demoApproval(clock.now())?.name, 'demo-nightly-load-approved');
    clock.advance(1);
    assert.equal(demoApproval(clock.now()), undefined, 'still approved after it expired');
  });
}

test("the demo approves a load of its own, not the example approval's target", async () => {
  const policy = await demoPolicy(systemClock.now());
  const examplesOnly = policy.approvals.filter((a) => a.name !== 'demo-nightly-load-approved');
  const load = aPod(APPROVED.name, APPROVED.namespace).obj();
  assert.equal(approvalFor(examplesOnly, load, 'Release', systemClock.now()), undefined);
});
