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

const canonicalCases: { name: string; value: unknown; json: string }[] = [
  {
    name: 'keys sorted at every depth',
    value: { b: { d: 1, c: [{ z: 1, y: 2 }] }, a: 0 },
    json: '{"a":0,"b":{"c":[{"y":2,"z":1}],"d":1}}',
  },
  {
    name: 'undefined members of an object are left out',
    value: { a: undefined, b: 1 },
    json: '{"b":1}',
  },
  {
    name: 'undefined, NaN and Infinity are null',
    value: [undefined, Number.NaN, Infinity, -Infinity],
    json: '[null,null,null,null]',
  },
  {
    name: 'a hole in an array is null, as JSON.stringify writes it',
    value: new Array<number>(3).fill(1, 0, 1).fill(3, 2), // [1, <hole>, 3]
    json: '[1,null,3]',
  },
  {
    name: 'keys are compared by code unit',
    value: { b: 1, B: 2, é: 3, '10': 4, '9': 5 },
    json: '{"10":4,"9":5,"B":2,"b":1,"é":3}',
  },
  {
    name: 'keys and strings are escaped',
    value: { 'a"b\n': 'c\\d\u0001' },
    json: '{"a\\"b\\n":"c\\\\d\\u0001"}',
  },
  {
    name: 'scalars as JSON writes them',
    value: [null, true, false, 0, -1.5, 'x'],
    json: '[null,true,false,0,-1.5,"x"]',
  },
  { name: 'empty containers', value: { a: {}, b: [] }, json: '{"a":{},"b":[]}' },
];
for (const { name, value, json } of canonicalCases) {
  test(`canonical JSON: ${name}`, () => {
    assert.equal(canonicalJson(value), json);
    assert.deepEqual(JSON.parse(canonicalJson(value)), JSON.parse(json));
  });
}

test('a record line is the canonical JSON of the record, keys in the fixed order', () => {
  const decision = aDecision('Hold', 'p1')
    .input('ObjectCondition', false, { b: 'x"y', a: [1, { d: undefined, c: 2 }] })
    .obj();
  const line = serializeRecord(decision);
  const { v, phase, ...rest } = JSON.parse(line) as Record<string, unknown>;
  assert.deepEqual([v, phase], [1, 'record']);
  assert.equal(
    line,
    `{"v":1,"phase":"record",${Object.keys(rest)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(rest[key])}`)
      .join(',')}}`,
  );
  assert.deepEqual(Object.keys(rest), [
    'id',
    'at',
    'time',
    'loop',
    'kind',
    'tenant',
    'target',
    'policy',
    'inputs',
    'reason',
    'outcome',
  ]);
});
