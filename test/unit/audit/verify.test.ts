import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AuditCommit } from '../../../src/audit/reader.ts';
import { phaseOf, recordSchemaVersion } from '../../../src/audit/record.ts';
import type { Change } from '../../../src/audit/tree.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

let counter = 0;
function commit(
  decisions: Decision[],
  options: { parents?: string[]; changes?: Change[] } = {},
): AuditCommit {
  counter += 1;
  const oid = counter.toString(16).padStart(40, '0');
  const path = `audit/prod/2026/11/29/T070000Z-c-${counter}.jsonl`;
  return {
    oid,
    parents: options.parents ?? [],
    message: 'm\n',
    summary: 'm',
    trailers: new Map(),
    author: { name: 'a', email: 'a@b', timestamp: 0 },
    committedAt: 0,
    changes: options.changes ?? [{ path, change: 'added', oid: 'b'.repeat(40) }],
    records: decisions.map((decision) => ({
      ...decision,
      v: recordSchemaVersion,
      phase: phaseOf(decision),
      file: path,
    })),
    errors: [],
  };
}

function chain(...commits: AuditCommit[]): AuditCommit[] {
  return commits.map((item, index) =>
    index === 0 ? item : { ...item, parents: [(commits[index - 1] as AuditCommit).oid] },
  );
}

const intent = aDecision('Release', 'p1').obj();

const cases: { name: string; history: () => AuditCommit[]; problems: RegExp[] }[] = [
  {
    name: 'a trail where every intent has its outcome passes',
    history: () => chain(commit([intent]), commit([outcomeOf(intent)])),
    problems: [],
  },
  {
    name: 'an intent without an outcome is reported by id',
    history: () => chain(commit([intent])),
    problems: [/intent gate-release:Release:uid-team-a-p1:1 .* has no outcome/],
  },
  {
    name: 'a commit that modifies a file breaks the chain',
    history: () =>
      chain(
        commit([intent]),
        commit([outcomeOf(intent)], {
          changes: [{ path: 'audit/x.jsonl', change: 'modified', oid: 'c'.repeat(40) }],
        }),
      ),
    problems: [/modified audit\/x.jsonl; audit files are never changed or removed/, /adds 0 files/],
  },
  {
    name: 'a commit that deletes a file breaks the chain',
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)]),
        commit([], {
          changes: [{ path: 'audit/x.jsonl', change: 'deleted', oid: 'c'.repeat(40) }],
        }),
      ),
    problems: [/deleted audit\/x.jsonl/, /adds 0 files/],
  },
  {
    name: 'a merge commit breaks linearity',
    history: () => {
      const [first, second] = chain(commit([intent]), commit([outcomeOf(intent)]));
      return [
        first as AuditCommit,
        { ...(second as AuditCommit), parents: [(first as AuditCommit).oid, 'f'.repeat(40)] },
      ];
    },
    problems: [/is a merge/],
  },
  {
    name: 'a file outside audit/ is reported',
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)], {
          changes: [{ path: 'README.md', change: 'added', oid: 'c'.repeat(40) }],
        }),
      ),
    problems: [/adds README.md, outside audit/],
  },
];

for (const { name, history, problems } of cases) {
  test(name, () => {
    const report = verifyTrail(history());
    assert.equal(report.problems.length, problems.length, JSON.stringify(report.problems));
    problems.forEach((pattern, index) =>
      assert.match(report.problems[index]?.message ?? '', pattern),
    );
    assert.equal(report.ok, problems.length === 0);
  });
}

test('an intent younger than the grace period is in flight, not missing', () => {
  const report = verifyTrail(chain(commit([intent])), { now: intent.at + 1_000, graceMs: 5_000 });
  assert.equal(report.ok, true);
});

test('an ungated pod the trail knows needs a succeeded Release; gated or unknown pods are not judged', () => {
  const history = chain(
    commit([intent]),
    commit([outcomeOf(intent)]),
    commit([aDecision('Hold', 'p2').obj()]),
  );
  const report = verifyTrail(history, {
    pods: [
      { namespace: 'team-a', name: 'p1', uid: 'uid-team-a-p1', schedulingGates: [] },
      { namespace: 'team-a', name: 'p2', uid: 'uid-team-a-p2', schedulingGates: [] },
      { namespace: 'team-a', name: 'p3', uid: 'uid-team-a-p3', schedulingGates: [] },
      { namespace: 'team-a', name: 'p4', uid: 'uid-team-a-p2b', schedulingGates: ['x.io/y'] },
    ],
  });
  assert.equal(report.podsChecked, 2);
  assert.deepEqual(
    report.problems.map((problem) => problem.message),
    [
      'pod team-a/p2 (uid uid-team-a-p2) has no scheduling gates but the trail has no succeeded Release decision for it',
    ],
  );
});
