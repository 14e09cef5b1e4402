import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fingerprintOf, wakeCause } from '../../../src/loops/resize-wake.ts';
import { stateAnnotation } from '../../../src/decide/resize-state.ts';
import { aRunningPod } from '../../builders/resize.ts';

const base = () =>
  aRunningPod('web-0', 'team-a').container('app', { cpu: '500m', memory: '256Mi' });

test('which pod changes wake the resize loop at once', () => {
  const seen = fingerprintOf(base().obj());
  const cases: {
    name: string;
    previous?: ReturnType<typeof fingerprintOf>;
    pod: ReturnType<ReturnType<typeof base>['obj']>;
    cause: string | undefined;
  }[] = [
    { name: 'a pod never seen wakes it', pod: base().obj(), cause: 'new' },
    { name: 'an unchanged status does not', previous: seen, pod: base().obj(), cause: undefined },
    {
      name: "tollgate's own annotation write does not",
      previous: seen,
      pod: base().annotation(stateAnnotation, '{"attempts":1}').obj(),
      cause: undefined,
    },
    {
      name: 'an OOM kill (a restart) does',
      previous: seen,
      pod: base().oomKilled('app', '2026-11-29T08:00:00Z').obj(),
      cause: 'restart',
    },
    {
      name: 'a resize condition does',
      previous: seen,
      pod: base().condition('PodResizePending', 'Deferred').obj(),
      cause: 'resize-condition',
    },
    {
      name: 'the kubelet reporting other running resources does',
      previous: seen,
      pod: base().actual({ cpu: '750m', memory: '256Mi' }).obj(),
      cause: 'status',
    },
    {
      name: 'a pod that starts running does',
      previous: fingerprintOf(base().phase('Pending').obj()),
      pod: base().obj(),
      cause: 'status',
    },
  ];
  for (const c of cases) assert.equal(wakeCause(c.previous, fingerprintOf(c.pod)), c.cause, c.name);
});
