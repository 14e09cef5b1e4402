import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import {
  intentsWithoutOutcome,
  podStateLookup,
  recoveredOutcome,
} from '../../../src/audit/recover.ts';
import type { AuditCommit } from '../../../src/audit/reader.ts';
import { phaseOf, recordSchemaVersion, type AuditRecord } from '../../../src/audit/record.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

const record = (decision: Decision, file = 'audit/prod/x.jsonl') => ({
  ...decision,
  v: recordSchemaVersion,
  phase: phaseOf(decision),
  file,
});
const history = (...records: ReturnType<typeof record>[]): AuditCommit[] => [
  {
    oid: '1'.repeat(40),
    parents: [],
    message: '',
    summary: '',
    trailers: new Map(),
    author: { name: '', email: '', timestamp: 0 },
    committedAt: 0,
    changes: [],
    records,
    errors: [],
  },
];

test('only intents of this cluster without an outcome are open', () => {
  const done = aDecision('Release', 'done').obj();
  const open = aDecision('Release', 'open').obj();
  const other = aDecision('Release', 'other').obj();
  const found = intentsWithoutOutcome(
    history(
      record(done),
      record(outcomeOf(done)),
      record(open),
      record(other, 'audit/elsewhere/x.jsonl'),
    ),
    'prod',
  );
  assert.deepEqual(
    found.map((item) => item.target.name),
    ['open'],
  );
});

const pod = (gates: string[], extra: Partial<NonNullable<V1Pod['metadata']>> = {}): V1Pod => ({
  metadata: {
    namespace: 'team-a',
    name: 'p1',
    uid: 'uid-team-a-p1',
    resourceVersion: '9',
    ...extra,
  },
  spec: { containers: [], schedulingGates: gates.map((name) => ({ name })) },
});
const owns = (gate: string) => gate.startsWith('tollgate.io/');
const asRecord = (decision: Decision): AuditRecord => ({
  ...decision,
  v: recordSchemaVersion,
  phase: phaseOf(decision),
});

const cases: {
  name: string;
  intent: Decision;
  pod: V1Pod | undefined;
  result: string;
  text: RegExp;
}[] = [
  {
    name: 'a release whose gate is gone succeeded before the restart',
    intent: aDecision('Release', 'p1').obj(),
    pod: pod(['other.io/keep']),
    result: 'succeeded',
    text: /^recovered: applied before restart \(gate removed\)/,
  },
  {
    name: 'a release still gated was not sent',
    intent: aDecision('Release', 'p1').obj(),
    pod: pod(['tollgate.io/budget']),
    result: 'cancelled',
    text: /not sent before restart \(still gated by tollgate.io\/budget\)/,
  },
  {
    name: 'a release whose pod is unchanged since the decision (same resourceVersion) was not applied, even when its gate is no longer in the policy (renamed)',
    intent: aDecision('Release', 'p1').obj(),
    pod: pod(['renamed.io/old-gate'], { resourceVersion: '1' }),
    result: 'cancelled',
    text: /not sent before restart \(resourceVersion 1 unchanged since the decision\)/,
  },
  {
    name: 'a pod replaced under the same name (new uid) is gone: whether the release was applied is unknown, never cancelled',
    intent: aDecision('Release', 'p1').obj(),
    pod: pod([], { uid: 'new' }),
    result: 'unknown',
    text: /^pod gone before recovery: whether the write was applied cannot be known/,
  },
  {
    name: 'a deleted pod is gone: its release is recorded unknown, with the reason',
    intent: aDecision('Release', 'p1').obj(),
    pod: undefined,
    result: 'unknown',
    text: /^pod gone before recovery: whether the write was applied cannot be known/,
  },
  {
    name: 'a cancel whose pod is deleting succeeded',
    intent: aDecision('Cancel', 'p1').obj(),
    pod: pod([], { deletionTimestamp: new Date() }),
    result: 'succeeded',
    text: /recovered: applied before restart \(pod deleting\)/,
  },
  {
    name: 'a write the pod cannot confirm, on a pod changed since, is unknown (never cancelled) and re-decided',
    intent: aDecision('Resize', 'p1').obj(),
    pod: pod([]),
    result: 'unknown',
    text: /not confirmed after restart: whether the write was applied cannot be told from the pod .*; re-decided from current state/,
  },
];

for (const { name, intent, pod: current, result, text } of cases) {
  test(name, async () => {
    const lookup = podStateLookup(() => current, owns);
    const outcome = recoveredOutcome(asRecord(intent), await lookup(asRecord(intent)), 42);
    assert.equal(outcome.outcome.result, result);
    assert.match('message' in outcome.outcome ? outcome.outcome.message : outcome.reason, text);
    assert.equal(outcome.id, intent.id);
    assert.equal(outcome.at, 42);
    assert.ok(
      !('v' in outcome) && !('phase' in outcome) && !('file' in outcome),
      'a plain Decision',
    );
  });
}
