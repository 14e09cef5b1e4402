import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  commitMessage,
  parseTrailers,
  rebuiltCommitMessage,
  summaryLine,
} from '../../../src/audit/message.ts';
import type { BatchKind } from '../../../src/audit/record.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { aDecision } from '../../builders/decision.ts';

const releases = (count: number, tenant: string): Decision[] =>
  Array.from({ length: count }, (_, index) => aDecision('Release', `p${index}`, tenant).obj());

const cases: { name: string; batch: BatchKind; decisions: Decision[]; summary: string }[] = [
  {
    name: 'releases across tenants name every tenant alphabetically',
    batch: 'intents',
    decisions: [...releases(2, 'team-b'), ...releases(118, 'team-a')],
    summary: 'release 120 pods in team-a, team-b',
  },
  {
    name: 'kinds follow the decision kind order whatever the input order',
    batch: 'intents',
    decisions: [
      aDecision('Resize', 'r1').obj(),
      aDecision('Expire', 'e1').obj(),
      aDecision('Release', 'p1').obj(),
      aDecision('Resize', 'r2').obj(),
    ],
    summary: 'release 1 pod in team-a; expire 1; resize 2',
  },
  {
    name: 'an outcome batch adds the results per kind',
    batch: 'outcomes',
    decisions: [
      aDecision('Release', 'p1').succeeded().obj(),
      aDecision('Release', 'p2').outcome({ result: 'conflict', message: '409' }).obj(),
      aDecision('Release', 'p3').succeeded().obj(),
    ],
    summary: 'release 3 pods in team-a (2 succeeded, 1 conflict)',
  },
  {
    name: 'decisions without a tenant leave the tenant list out',
    batch: 'records',
    decisions: [aDecision('Hold', 'h1').tenant(undefined).obj()],
    summary: 'hold 1 pod',
  },
];

for (const { name, batch, decisions, summary } of cases) {
  test(`summary: ${name}`, () => {
    assert.equal(summaryLine(decisions, batch), summary);
    assert.equal(
      summaryLine([...decisions].reverse(), batch),
      summary,
      'order of decisions does not change the summary',
    );
  });
}

test('the message is a summary, a blank line and trailers in a fixed order, policy commits sorted and listed', () => {
  const decisions = [
    aDecision('Release', 'p1').policyCommit('b'.repeat(40)).obj(),
    aDecision('Release', 'p2').policyCommit('a'.repeat(40)).obj(),
    aDecision('Release', 'p3').policyCommit('b'.repeat(40)).obj(),
  ];
  const message = commitMessage(decisions, {
    batch: 'intents',
    controller: 'tollgate-0',
    cluster: 'prod-eu',
  });
  assert.equal(
    message,
    [
      'release 3 pods in team-a',
      '',
      `Tollgate-Policy: ${'a'.repeat(40)}`,
      `Tollgate-Policy: ${'b'.repeat(40)}`,
      'Tollgate-Controller: tollgate-0',
      'Tollgate-Cluster: prod-eu',
      'Tollgate-Decisions: 3',
      'Tollgate-Batch: intents',
      '',
    ].join('\n'),
  );
  assert.equal(
    commitMessage([...decisions].reverse(), {
      batch: 'intents',
      controller: 'tollgate-0',
      cluster: 'prod-eu',
    }),
    message,
  );
  const trailers = parseTrailers(message);
  assert.deepEqual(trailers.get('Tollgate-Policy'), ['a'.repeat(40), 'b'.repeat(40)]);
  assert.deepEqual(trailers.get('Tollgate-Decisions'), ['3']);
});

test('an empty batch is refused: there are no empty commits', () => {
  assert.throws(
    () => commitMessage([], { batch: 'records', controller: 'c', cluster: 'x' }),
    /no empty commits/,
  );
});

test('an identity that could break a path or a trailer is refused by name', () => {
  assert.throws(
    () =>
      commitMessage(releases(1, 'a'), { batch: 'intents', controller: 'bad/name', cluster: 'x' }),
    /controller identity "bad\/name"/,
  );
});

test('a rebuilt commit of one batch kind reads exactly as the writer’s own commit of it', () => {
  const outcomes = [aDecision('Release', 'p1').succeeded().obj()];
  const context = { controller: 'tollgate-0', cluster: 'prod' };
  assert.equal(
    rebuiltCommitMessage(outcomes, context),
    commitMessage(outcomes, { ...context, batch: 'outcomes' }),
  );
});

test('a rebuilt commit of several batch kinds summarizes each in the order intents, outcomes, records, with one Tollgate-Batch trailer per kind and every record counted', () => {
  const intent = aDecision('Release', 'p2').obj();
  const message = rebuiltCommitMessage(
    [
      aDecision('Hold', 'h1').recorded().obj(),
      aDecision('Release', 'p1').succeeded().obj(),
      intent,
    ],
    { controller: 'tollgate-0', cluster: 'prod' },
  );
  assert.equal(
    message.split('\n')[0],
    'release 1 pod in team-a; release 1 pod in team-a (1 succeeded); hold 1 pod in team-a',
  );
  const trailers = parseTrailers(message);
  assert.deepEqual(trailers.get('Tollgate-Batch'), ['intents', 'outcomes', 'records']);
  assert.deepEqual(trailers.get('Tollgate-Decisions'), ['3']);
  assert.deepEqual(trailers.get('Tollgate-Controller'), ['tollgate-0']);
});
