import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  canonicalJson,
  parseBatch,
  parseRecord,
  serializeBatch,
  serializeRecord,
} from '../../../src/audit/record.ts';
import { aDecision } from '../../builders/decision.ts';

test('a record line has the schema version and phase first and keys in a fixed order', () => {
  const line = serializeRecord(
    aDecision('Release', 'p1').input('Budget', true, { cpuUsed: 3000, cpuLimit: 4000 }).obj(),
  );
  assert.match(
    line,
    /^\{"v":1,"phase":"intent","id":"gate-release:Release:uid-team-a-p1:1","at":\d+,"time":"2026-11-29T07:00:00.000Z","loop":"gate-release","kind":"Release","tenant":"team-a","target":/,
  );
  assert.ok(line.indexOf('"reason"') < line.indexOf('"outcome"'));
});

test('serialisation does not depend on the order keys were set in', () => {
  const decision = aDecision('Hold', 'p1')
    .input('ObjectCondition', false, { b: 1, a: { d: 2, c: 3 } })
    .obj();
  const shuffled = {
    outcome: decision.outcome,
    reason: decision.reason,
    inputs: [{ value: { a: { c: 3, d: 2 }, b: 1 }, met: false, condition: 'ObjectCondition' }],
    policy: {
      name: decision.policy.name,
      file: decision.policy.file,
      commit: decision.policy.commit,
    },
    target: { resourceVersion: '1', uid: decision.target.uid, name: 'p1', namespace: 'team-a' },
    tenant: decision.tenant,
    kind: decision.kind,
    loop: decision.loop,
    at: decision.at,
    id: decision.id,
  };
  assert.equal(serializeRecord(shuffled), serializeRecord(decision));
  assert.equal(canonicalJson({ b: 1, a: [{ y: 1, x: 2 }] }), '{"a":[{"x":2,"y":1}],"b":1}');
});

test('a batch round-trips through parse', () => {
  const decisions = [
    aDecision('Release', 'p1').obj(),
    aDecision('Release', 'p1').succeeded().obj(),
    aDecision('Hold', 'p2').obj(),
  ];
  const parsed = parseBatch(serializeBatch(decisions), 'f.jsonl');
  assert.deepEqual(
    parsed.map((record) => record.phase),
    ['intent', 'outcome', 'record'],
  );
  assert.deepEqual(
    parsed.map(({ v: _v, phase: _p, ...rest }) => rest),
    decisions,
  );
});

const bad: { name: string; line: string; error: RegExp }[] = [
  {
    name: 'a newer schema version is refused, not guessed',
    line: '{"v":2}',
    error: /f\.jsonl:1: field "v" is 2; this tollgate reads schema version 1/,
  },
  {
    name: 'an unknown kind is named',
    line: serializeRecord(aDecision('Release', 'p').obj()).replace('"Release"', '"Launch"'),
    error: /field "kind" must be one of/,
  },
  {
    name: 'a line that is not JSON says so',
    line: '{not json',
    error: /field "\(line\)" is not JSON/,
  },
];
for (const { name, line, error } of bad) {
  test(`parse: ${name}`, () => assert.throws(() => parseRecord(line, 'f.jsonl:1'), error));
}
