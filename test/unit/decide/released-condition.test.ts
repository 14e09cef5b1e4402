import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  heldCondition,
  holdConditionReason,
  releasedCondition,
  releasedConditionType,
  releasedConditionWrite,
} from '../../../src/decide/released-condition.ts';
import { aPod } from '../../builders/pod.ts';

const t0 = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';
const held = (reasonKey: string) => heldCondition(reasonKey, `held: ${reasonKey}`);

test('a hold reason key becomes a condition reason', async (t) => {
  const cases = [
    { name: 'a single word stays as it is', key: 'Pacing', want: 'Pacing' },
    {
      name: 'failing conditions joined by + are joined by commas',
      key: 'ImagePresent+ObjectCondition',
      want: 'ImagePresent,ObjectCondition',
    },
    { name: 'characters a reason cannot hold are dropped', key: 'Gang-Member', want: 'GangMember' },
    { name: 'an empty key reads Held', key: '', want: 'Held' },
  ];
  for (const c of cases)
    await t.test(c.name, () => assert.equal(holdConditionReason(c.key), c.want));
});

test('the Released condition is written only when its status or reason changes', async (t) => {
  const cases = [
    {
      name: 'a held pod without the condition gets it False, with a transition time',
      pod: aPod('p', 'team-a').gated(gate),
      wanted: held('Pacing'),
      want: {
        type: releasedConditionType,
        status: 'False',
        reason: 'Pacing',
        message: 'held: Pacing',
        lastTransitionTime: new Date(t0).toISOString(),
      },
    },
    {
      name: 'a pod already showing the same reason gets no write, whatever the message',
      pod: aPod('p', 'team-a').gated(gate).condition(releasedConditionType, 'False', 'Pacing'),
      wanted: heldCondition('Pacing', 'another message'),
      want: undefined,
    },
    {
      name: 'a new reason under the same status keeps the transition time the pod shows',
      pod: aPod('p', 'team-a').gated(gate).condition(releasedConditionType, 'False', 'Pacing'),
      wanted: held('Budget'),
      want: {
        type: releasedConditionType,
        status: 'False',
        reason: 'Budget',
        message: 'held: Budget',
      },
    },
    {
      name: 'a released pod that showed False turns True, with a transition time',
      pod: aPod('p', 'team-a').condition(releasedConditionType, 'False', 'Budget'),
      wanted: releasedCondition('removed gate'),
      want: {
        type: releasedConditionType,
        status: 'True',
        reason: 'GateRemoved',
        message: 'removed gate',
        lastTransitionTime: new Date(t0).toISOString(),
      },
    },
    {
      name: 'a pod released without ever being held gets no condition at all',
      pod: aPod('p', 'team-a'),
      wanted: releasedCondition('removed gate'),
      want: undefined,
    },
  ];
  for (const c of cases)
    await t.test(c.name, () =>
      assert.deepEqual(releasedConditionWrite(c.pod.obj(), c.wanted, t0), c.want),
    );
});

test('a long hold message is cut to a page', () => {
  assert.equal(heldCondition('Pacing', 'x'.repeat(5000)).message.length, 1024);
});
