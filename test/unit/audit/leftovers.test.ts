/** planLeftovers: which leftover records are replayed, dropped or turned into a correction. */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  closeUnpushedIntents,
  planLeftovers,
  rebuiltCommits,
  type LeftoverCommit,
  type LeftoverPlan,
} from '../../../src/audit/leftovers.ts';
import { phaseOf, recordSchemaVersion, type AuditRecord } from '../../../src/audit/record.ts';
import type { Decision, Outcome } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

const asRecord = (decision: Decision): AuditRecord => ({
  ...decision,
  v: recordSchemaVersion,
  phase: phaseOf(decision),
});
const intent = aDecision('Release', 'p1').obj();
const cancelled: Outcome = { result: 'cancelled', message: 'not sent before restart' };
const unknown: Outcome = { result: 'unknown', message: 'pod gone before recovery' };

const rows: {
  name: string;
  leftover: Decision;
  remote: { intent?: boolean; outcome?: Outcome };
  replayed: boolean;
  correction?: string;
  confirmation?: string;
}[] = [
  {
    name: 'an intent the remote does not hold is replayed',
    leftover: intent,
    remote: {},
    replayed: true,
  },
  {
    name: 'an intent the remote already holds is dropped (never recorded twice)',
    leftover: intent,
    remote: { intent: true },
    replayed: false,
  },
  {
    name: 'an outcome whose intent the remote left open is replayed',
    leftover: outcomeOf(intent),
    remote: { intent: true },
    replayed: true,
  },
  {
    name: 'an outcome the remote agrees with is not replayed but kept as a confirmation',
    leftover: outcomeOf(intent, { result: 'succeeded', resourceVersion: '9' }),
    remote: { outcome: { result: 'succeeded' } },
    replayed: false,
    confirmation: 'succeeded',
  },
  {
    name: 'a not-applied outcome where recovery said cancelled is kept as a confirmation',
    leftover: outcomeOf(intent, { result: 'conflict', message: '409' }),
    remote: { outcome: cancelled },
    replayed: false,
    confirmation: 'conflict',
  },
  {
    name: "the leftover's own outcome already on the remote (its push landed) is dropped without a record",
    leftover: outcomeOf(intent),
    remote: { outcome: { result: 'succeeded' } },
    replayed: false,
  },
  {
    name: 'a succeeded outcome where recovery said cancelled is dropped and corrected',
    leftover: outcomeOf(intent),
    remote: { outcome: cancelled },
    replayed: false,
    correction: 'succeeded',
  },
  {
    name: 'any answer of the API where recovery said unknown is dropped and corrected',
    leftover: outcomeOf(intent, { result: 'conflict', message: '409' }),
    remote: { outcome: unknown },
    replayed: false,
    correction: 'conflict',
  },
];

for (const { name, leftover, remote, replayed, correction, confirmation } of rows) {
  test(name, () => {
    const commits: LeftoverCommit[] = [
      { path: 'audit/prod/a.jsonl', batch: 'outcomes', records: [asRecord(leftover)] },
    ];
    const plan = planLeftovers(
      commits,
      {
        intents: new Set(remote.intent ? [intent.id] : []),
        outcomes: new Map(
          remote.outcome ? [[intent.id, asRecord(outcomeOf(intent, remote.outcome))]] : [],
        ),
      },
      { now: 42, remoteMoved: true },
    );
    assert.equal(plan.commits.flatMap((c) => c.records).length, replayed ? 1 : 0);
    assert.equal(plan.changed, !replayed);
    assert.deepEqual(
      plan.corrections.map((c) => [
        c.id,
        c.outcome.result,
        (c.inputs[0]?.value as { actual: Outcome }).actual.result,
      ]),
      correction ? [[`${intent.id}:correction`, 'recorded', correction]] : [],
    );
    assert.deepEqual(
      plan.confirmations.map((c) => [
        c.id,
        c.outcome.result,
        (c.inputs[0]?.value as { actual: Outcome }).actual.result,
      ]),
      confirmation ? [[`${intent.id}:confirmation`, 'recorded', confirmation]] : [],
    );
  });
}

test('a leftover checkpoint is dropped once the remote moved on, kept when it did not', () => {
  const checkpoint: LeftoverCommit = {
    path: 'audit/prod/a.checkpoint.jsonl',
    batch: 'checkpoint',
    records: [],
  };
  const none = { intents: new Set<string>(), outcomes: new Map<string, AuditRecord>() };
  assert.equal(planLeftovers([checkpoint], none, { now: 1, remoteMoved: true }).changed, true);
  assert.equal(planLeftovers([checkpoint], none, { now: 1, remoteMoved: false }).changed, false);
});

test("a push rebased onto another leader's outcome says which came first, not which is recovery's (either may be)", () => {
  const commits: LeftoverCommit[] = [
    { path: 'audit/prod/a.jsonl', batch: 'outcomes', records: [asRecord(outcomeOf(intent))] },
  ];
  const remote = {
    intents: new Set<string>(),
    outcomes: new Map([[intent.id, asRecord(outcomeOf(intent, cancelled))]]),
  };
  const plan = planLeftovers(commits, remote, { now: 42, remoteMoved: true, rebased: true });
  const reason = plan.corrections[0]?.reason ?? '';
  assert.match(
    reason,
    /^correction: .* already has the outcome cancelled \(not sent before restart\) on the audit branch; this outcome, succeeded, decided at .* reached the branch after it and says otherwise/,
  );
  assert.doesNotMatch(reason, /recovery/);
});

test('a leftover commit whose file is not audit records is replayed as it was, in its place, and changes nothing alone', () => {
  const verbatim = { text: '{}\n', message: 'manual\n', unreadable: 'field "v" is undefined' };
  const commits: LeftoverCommit[] = [
    { path: 'audit/prod/manual.jsonl', batch: 'records', records: [], verbatim },
    { path: 'audit/prod/a.jsonl', batch: 'intents', records: [asRecord(intent)] },
  ];
  const none = { intents: new Set<string>(), outcomes: new Map<string, AuditRecord>() };
  const alone = planLeftovers(commits, none, { now: 1, remoteMoved: true });
  assert.equal(alone.changed, false);
  const dropping = planLeftovers(
    commits,
    { ...none, intents: new Set([intent.id]) },
    { now: 1, remoteMoved: true },
  );
  assert.equal(dropping.changed, true);
  assert.deepEqual(
    dropping.commits.map((commit) => [commit.path, commit.verbatim?.text]),
    [['audit/prod/manual.jsonl', '{}\n']],
  );
});

const hour7 = 'audit/prod/2026/11/29/07';
const planned = (path: string, controller: string, count: number, name: string) => ({
  path: `${path}.jsonl`,
  controller,
  batch: 'intents' as const,
  records: Array.from({ length: count }, (_, index) =>
    aDecision('Release', `${name}-${index}`).obj(),
  ),
});
const verbatimCommit = {
  path: `${hour7}/manual.jsonl`,
  batch: 'records' as const,
  records: [],
  verbatim: { text: '{}\n', message: 'manual\n', unreadable: 'not records' },
};

const chunkRows: {
  name: string;
  commits: LeftoverPlan['commits'];
  maxRecords: number;
  files: [string, number][];
}[] = [
  {
    name: 'consecutive commits of one hour folder and writer become files of at most maxRecords records, each at its first record’s path',
    commits: [
      planned(`${hour7}/a1`, 'a', 3, 'a1'),
      planned(`${hour7}/a2`, 'a', 3, 'a2'),
      planned(`${hour7}/a3`, 'a', 3, 'a3'),
    ],
    maxRecords: 4,
    files: [
      [`${hour7}/a1.jsonl`, 4],
      [`${hour7}/a2.jsonl`, 4],
      [`${hour7}/a3.jsonl`, 1],
    ],
  },
  {
    name: 'another hour folder starts a new file',
    commits: [
      planned(`${hour7}/a1`, 'a', 2, 'a1'),
      planned('audit/prod/2026/11/29/08/a2', 'a', 2, 'a2'),
    ],
    maxRecords: 10,
    files: [
      [`${hour7}/a1.jsonl`, 2],
      ['audit/prod/2026/11/29/08/a2.jsonl', 2],
    ],
  },
  {
    name: 'another writer starts a new file',
    commits: [planned(`${hour7}/a1`, 'a', 2, 'a1'), planned(`${hour7}/b1`, 'b', 2, 'b1')],
    maxRecords: 10,
    files: [
      [`${hour7}/a1.jsonl`, 2],
      [`${hour7}/b1.jsonl`, 2],
    ],
  },
  {
    name: 'a verbatim commit stays one commit, as it was, between the files before and after it',
    commits: [
      planned(`${hour7}/a1`, 'a', 2, 'a1'),
      verbatimCommit,
      planned(`${hour7}/a2`, 'a', 2, 'a2'),
    ],
    maxRecords: 10,
    files: [
      [`${hour7}/a1.jsonl`, 2],
      [`${hour7}/manual.jsonl`, 0],
      [`${hour7}/a2.jsonl`, 2],
    ],
  },
];

for (const { name, commits, maxRecords, files } of chunkRows)
  test(`rebuiltCommits: ${name}`, () => {
    const rebuilt = rebuiltCommits(commits, maxRecords);
    assert.deepEqual(
      rebuilt.map((commit) => [commit.path, commit.records.length]),
      files,
    );
    assert.deepEqual(
      rebuilt.flatMap((commit) => commit.records.map((record) => record.id)),
      commits.flatMap((commit) => commit.records.map((record) => record.id)),
      'every record, in order',
    );
  });

describe("closeUnpushedIntents: a standby's leftover intents that never reached Git", () => {
  const open = aDecision('Release', 'open').obj();
  const answered = aDecision('Release', 'answered').obj();
  const leftovers: LeftoverCommit[] = [
    { path: 'audit/prod/i.jsonl', batch: 'intents', records: [open, answered].map(asRecord) },
    { path: 'audit/prod/o.jsonl', batch: 'outcomes', records: [asRecord(outcomeOf(answered))] },
  ];
  const rows: { mode: 'strict' | 'async'; result: string; reason: RegExp }[] = [
    { mode: 'strict', result: 'cancelled', reason: /^not sent: its intent never reached Git/ },
    { mode: 'async', result: 'unknown', reason: /^whether the write was applied cannot be told/ },
  ];
  for (const { mode, result, reason } of rows) {
    test(`in ${mode} mode an intent without an outcome among them is closed as ${result}; one with an outcome is left alone`, () => {
      const closed = closeUnpushedIntents(leftovers, mode, 42);
      assert.deepEqual(
        closed.map((d) => [d.id, d.at, d.outcome.result]),
        [[open.id, 42, result]],
      );
      const outcome = closed[0]?.outcome;
      assert.match(outcome && 'message' in outcome ? outcome.message : '', reason);
      assert.equal(phaseOf(closed[0] as Decision), 'outcome');
    });
  }
});
