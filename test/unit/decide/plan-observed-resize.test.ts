/**
 * `tollgate plan` shows what an observe-only ResizePolicy would have done, from the
 * audit trail: per policy, the would-be decisions by kind and the latest ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { observedHistory, observedLines } from '../../../src/decide/plan-observed.ts';
import type { Decision } from '../../../src/decide/decision.ts';

const t0 = Date.UTC(2026, 10, 29, 8, 0, 0);

function record(n: number, policy: string, kind: Decision['kind'], observe = true): Decision {
  return {
    id: `resize:${kind}:uid-${n}:${n}:observe:${t0 + n}`,
    at: t0 + n * 60_000,
    loop: 'resize',
    kind,
    target: { namespace: 'team-a', name: `web-${n}`, uid: `uid-${n}`, resourceVersion: String(n) },
    policy: { commit: 'c0ffee', file: `resize/${policy}.yaml`, name: policy },
    inputs: observe ? [{ condition: 'mode', met: true, value: 'Observe' }] : [],
    reason: `${observe ? 'observe-only: would carry out ' : ''}${kind}: step`,
    outcome: { result: 'recorded' },
  };
}

test('per observe-only policy: its would-be decisions by kind and the latest first', () => {
  const records = [
    record(1, 'web', 'Resize'),
    record(2, 'web', 'Hold'),
    record(3, 'web', 'Resize'),
    record(3, 'web', 'Resize'), // the same record read twice (an intent and a retry)
    record(4, 'api', 'Resize', false), // acted on: not observe-only
    record(5, 'other', 'Rollback'),
  ];
  const [web, api] = observedHistory(records, ['web', 'api'], 2);
  assert.equal(web?.decisions, 3);
  assert.deepEqual(web?.byKind, { Hold: 1, Resize: 2 });
  assert.deepEqual(
    web?.recent.map((r) => r.pod),
    ['team-a/web-3', 'team-a/web-2'],
  );
  assert.equal(api?.decisions, 0);
  assert.deepEqual(observedLines(api!), ['api: no observe-only decision recorded yet']);
  assert.match(
    observedLines(web!)[0] ?? '',
    /^web: 3 would-be decision\(s\) from 2026-11-29T08:01:00.000Z to 2026-11-29T08:03:00.000Z \(1 Hold, 2 Resize\); latest:$/,
  );
});
