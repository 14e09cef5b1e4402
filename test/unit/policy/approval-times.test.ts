/**
 * When each approval was merged: from Git (the commit that last changed its file), or for
 * a folder when the source first read that file's content.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FirstSeen, withApprovalTimes } from '../../../src/policy/approval-times.ts';
import { anApproval, aPolicy } from '../../builders/policy.ts';

const at = (minute: number) => Date.UTC(2026, 10, 29, 9, minute, 0);

test('withApprovalTimes dates every approval by its file, asking once per file', async () => {
  const a = anApproval('Cancel', { kind: 'Pod', namespace: 'team-a', name: 'p' });
  const b = { ...a, name: 'b', source: { file: 'approvals/b.yaml', document: 0 } };
  const b2 = { ...b, name: 'b2', source: { file: 'approvals/b.yaml', document: 1 } };
  const asked: string[] = [];
  const times: Record<string, number> = { 'approvals/b.yaml': at(5) };
  const dated = await withApprovalTimes(aPolicy().approval(a, b, b2).obj(), async (file) => {
    asked.push(file);
    return times[file];
  });
  assert.deepEqual(asked, ['approvals/cancel-pod.yaml', 'approvals/b.yaml']);
  assert.deepEqual(
    dated.approvals.map((x) => [x.name, x.mergedAt]),
    [
      ['cancel-pod', undefined],
      ['b', at(5)],
      ['b2', at(5)],
    ],
  );
});

test('FirstSeen keeps the first time of a content, and restarts when the content changes', () => {
  const seen = new FirstSeen();
  assert.equal(seen.at('approvals/a.yaml', 'v1', at(1)), at(1));
  assert.equal(seen.at('approvals/a.yaml', 'v1', at(2)), at(1));
  assert.equal(seen.at('approvals/a.yaml', 'v2', at(3)), at(3));
  assert.equal(seen.at('approvals/b.yaml', 'v1', at(4)), at(4));
});
