/**
 * What a read of the target says about a write whose answer was lost
 * (podWriteVisible / eventWriteVisible in src/cluster/writer.ts), one sentence a row.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { eventWriteVisible, podWriteVisible } from '../../../src/cluster/writer.ts';
import type { WriteOperation, WriteRequest } from '../../../src/dispatch/types.ts';
import { aPod } from '../../builders/pod.ts';

const gate = 'team-a.tollgate.io/ready';

function writeTo(pod: V1Pod, op: WriteOperation): WriteRequest {
  const metadata = pod.metadata ?? {};
  return {
    key: `${metadata.namespace}/${metadata.name}`,
    target: {
      namespace: metadata.namespace ?? '',
      name: metadata.name ?? '',
      uid: metadata.uid ?? '',
      resourceVersion: metadata.resourceVersion ?? '',
    },
    op,
    priority: 0,
    tenant: 'team-a',
    deadline: 0,
    decisionId: 'd1',
  };
}

const decided = aPod('p', 'team-a').gated(gate).resourceVersion('10');
const removeGate: WriteOperation = { type: 'removeGate', gate, gateIndex: 0 };
const resize: WriteOperation = {
  type: 'resize',
  containers: [{ name: 'app', resources: { requests: { cpu: '500m' } } }],
};
const annotate: WriteOperation = {
  type: 'annotate',
  annotations: { 'tollgate.io/review': 'due', 'tollgate.io/old': null },
};
const remove: WriteOperation = { type: 'delete', reason: 'expired' };

const rows: {
  name: string;
  op: WriteOperation;
  seen: V1Pod | undefined;
  verdict: ReturnType<typeof podWriteVisible>['state'];
}[] = [
  {
    name: 'a gate gone from a pod at a newer version is a removal that landed',
    op: removeGate,
    seen: aPod('p', 'team-a').resourceVersion('11').obj(),
    verdict: 'applied',
  },
  {
    name: 'a pod still at the decided version did not take the removal',
    op: removeGate,
    seen: decided.obj(),
    verdict: 'absent',
  },
  {
    name: 'a pod changed by someone else with the gate still there did not take the removal',
    op: removeGate,
    seen: aPod('p', 'team-a').gated(gate).resourceVersion('12').obj(),
    verdict: 'absent',
  },
  {
    name: 'a missing pod is gone for a removal',
    op: removeGate,
    seen: undefined,
    verdict: 'gone',
  },
  {
    name: 'a pod of the same name and a new uid is gone for a removal',
    op: removeGate,
    seen: aPod('p', 'team-a').uid('another').resourceVersion('30').obj(),
    verdict: 'gone',
  },
  {
    name: 'a pod whose container shows the resized requests took the resize',
    op: resize,
    seen: aPod('p', 'team-a').requests({ cpu: '500m' }).resourceVersion('11').obj(),
    verdict: 'applied',
  },
  {
    name: 'a pod with other requests did not take the resize',
    op: resize,
    seen: aPod('p', 'team-a').requests({ cpu: '250m' }).resourceVersion('11').obj(),
    verdict: 'absent',
  },
  {
    name: 'a pod showing the set annotation and not the removed one took the annotate',
    op: annotate,
    seen: aPod('p', 'team-a').annotate('tollgate.io/review', 'due').resourceVersion('11').obj(),
    verdict: 'applied',
  },
  {
    name: 'a pod still carrying the removed annotation did not take the annotate',
    op: annotate,
    seen: aPod('p', 'team-a')
      .annotate('tollgate.io/review', 'due')
      .annotate('tollgate.io/old', 'x')
      .resourceVersion('11')
      .obj(),
    verdict: 'absent',
  },
  {
    name: 'a missing pod is a delete that landed',
    op: remove,
    seen: undefined,
    verdict: 'applied',
  },
  {
    name: 'a pod being deleted is a delete that landed',
    op: remove,
    seen: aPod('p', 'team-a').gated(gate).deleting().resourceVersion('11').obj(),
    verdict: 'applied',
  },
  {
    name: 'a pod of the same name and a new uid means the decided pod is gone: the delete landed',
    op: remove,
    seen: aPod('p', 'team-a').uid('another').obj(),
    verdict: 'applied',
  },
  {
    name: 'the decided pod, not being deleted, did not take the delete',
    op: remove,
    seen: decided.obj(),
    verdict: 'absent',
  },
];
for (const row of rows) {
  test(row.name, () => {
    assert.equal(podWriteVisible(writeTo(decided.obj(), row.op), row.seen).state, row.verdict);
  });
}

test('an applied write reports the resourceVersion the read saw', () => {
  assert.deepEqual(
    podWriteVisible(
      writeTo(decided.obj(), removeGate),
      aPod('p', 'team-a').resourceVersion('11').obj(),
    ),
    { state: 'applied', resourceVersion: '11' },
  );
});

const series: Extract<WriteOperation, { type: 'event' }> = {
  type: 'event',
  event: { action: 'series', count: 3, lastObservedTime: '2026-11-29T07:00:00.000000Z' },
};
const create: Extract<WriteOperation, { type: 'event' }> = {
  type: 'event',
  event: { action: 'create', body: { metadata: { name: 'e' }, eventTime: new Date(0) } as never },
};
const eventRows: {
  name: string;
  op: Extract<WriteOperation, { type: 'event' }>;
  seen: { metadata?: { resourceVersion?: string }; series?: { count?: number } } | undefined;
  verdict: string;
}[] = [
  {
    name: 'an Event that exists is a create that landed',
    op: create,
    seen: { metadata: { resourceVersion: '5' } },
    verdict: 'applied',
  },
  {
    name: 'a missing Event is a create that did not land',
    op: create,
    seen: undefined,
    verdict: 'absent',
  },
  {
    name: 'a series count at the written count is a bump that landed',
    op: series,
    seen: { series: { count: 3 } },
    verdict: 'applied',
  },
  {
    name: 'a lower series count is a bump that did not land',
    op: series,
    seen: { series: { count: 2 } },
    verdict: 'absent',
  },
  {
    name: 'a missing Event is gone for a series bump',
    op: series,
    seen: undefined,
    verdict: 'gone',
  },
];
for (const row of eventRows) {
  test(row.name, () => {
    assert.equal(eventWriteVisible(row.op, row.seen).state, row.verdict);
  });
}
