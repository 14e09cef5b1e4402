import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { sameForDecisions } from '../../../src/decide/release-wake.ts';
import { releasedConditionType } from '../../../src/decide/released-condition.ts';
import { aPod } from '../../builders/pod.ts';

const gate = 'team-a.tollgate.io/ready';
const held = () => aPod('a', 'team-a').gated(gate).uid('u-a').resourceVersion('10');

/** The pod as the view holds it: parsed from JSON, so timestamps are text, as served. */
const asViewed = (pod: V1Pod): V1Pod => JSON.parse(JSON.stringify(pod)) as V1Pod;

describe('sameForDecisions: what a pod change gives a gate-release pass to decide on', () => {
  const cases: { why: string; before: V1Pod; after: V1Pod; same: boolean }[] = [
    {
      why: "tollgate's own Released condition written (a new resourceVersion)",
      before: held().obj(),
      after: held().resourceVersion('11').condition(releasedConditionType, 'False', 'Budget').obj(),
      same: true,
    },
    {
      why: 'its Released condition written, seen first in a list (no apiVersion, kind) and then in a watch event',
      before: (() => {
        const listed = held().obj();
        delete listed.apiVersion;
        delete listed.kind;
        return listed;
      })(),
      after: held().resourceVersion('11').condition(releasedConditionType, 'False', 'Budget').obj(),
      same: true,
    },
    {
      why: "tollgate's own Released condition's reason changed",
      before: held().condition(releasedConditionType, 'False', 'Budget').obj(),
      after: held()
        .resourceVersion('12')
        .condition(releasedConditionType, 'False', 'ImagePresent')
        .obj(),
      same: true,
    },
    {
      why: 'only the resourceVersion (a change to a field the view does not keep)',
      before: held().obj(),
      after: held().resourceVersion('11').obj(),
      same: true,
    },
    {
      why: 'another condition changed beside it (the scheduler says Unschedulable)',
      before: held().obj(),
      after: held()
        .resourceVersion('11')
        .condition(releasedConditionType, 'False', 'Budget')
        .condition('PodScheduled', 'False', 'Unschedulable')
        .obj(),
      same: false,
    },
    {
      why: 'a label changed',
      before: held().obj(),
      after: held().resourceVersion('11').label('team', 'b').obj(),
      same: false,
    },
    {
      why: 'its gate removed',
      before: held().obj(),
      after: aPod('a', 'team-a').uid('u-a').resourceVersion('11').obj(),
      same: false,
    },
    {
      why: 'a new pod of the same name (another uid)',
      before: held().obj(),
      after: aPod('a', 'team-a').gated(gate).uid('u-b').resourceVersion('11').obj(),
      same: false,
    },
    {
      why: 'bound to a node',
      before: held().obj(),
      after: held().resourceVersion('11').boundTo('n1').obj(),
      same: false,
    },
    {
      why: 'being deleted',
      before: held().obj(),
      after: held().resourceVersion('11').deleting().obj(),
      same: false,
    },
  ];
  for (const c of cases)
    it(`${c.why}: ${c.same ? 'the same' : 'not the same'}`, () => {
      assert.equal(sameForDecisions(asViewed(c.before), asViewed(c.after)), c.same);
    });
});
