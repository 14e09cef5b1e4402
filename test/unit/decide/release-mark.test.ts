/**
 * The mark tollgate writes with a gate removal (annotation tollgate.io/released) is
 * decided on the version the patch tests: a live read that retargets a removal decides it
 * again on the live pod, so the patch never replaces annotations it did not see.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { releaseMarkFor } from '../../../src/decide/lifecycle.ts';
import type { PlannedWrite } from '../../../src/decide/release-plan.ts';
import { retargetOnLive } from '../../../src/decide/stale-live.ts';
import { aPod } from '../../builders/pod.ts';

const gate = 'team-a.tollgate.io/ready';

test('releaseMarkFor: into the annotations a pod has, or as its annotations when it has none', () => {
  assert.deepEqual(releaseMarkFor(aPod('p', 'team-a').obj()), { annotationsPresent: false });
  assert.deepEqual(releaseMarkFor(aPod('p', 'team-a').annotate('k', 'v').obj()), {
    annotationsPresent: true,
  });
});

test('a removal retargeted at the live pod decides its mark on the live pod', () => {
  const decided = aPod('p', 'team-a').gated(gate).resourceVersion('7').obj();
  const write = {
    key: 'team-a/p',
    target: { namespace: 'team-a', name: 'p', uid: decided.metadata!.uid!, resourceVersion: '7' },
    op: { type: 'removeGate', gate, gateIndex: 0, markReleased: releaseMarkFor(decided) },
  } as unknown as PlannedWrite;
  const live = aPod('p', 'team-a').gated(gate).annotate('owner', 'x').resourceVersion('9').obj();
  const result = retargetOnLive(write, live, () => true);
  assert.equal(result.action, 'send');
  if (result.action === 'send')
    assert.deepEqual(result.write.op, {
      type: 'removeGate',
      gate,
      gateIndex: 0,
      markReleased: { annotationsPresent: true },
    });
});
