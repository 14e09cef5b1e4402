/**
 * `tollgate plan` without Prometheus (bounds-only targets) judges pod-level changes the
 * way the loop does: a container's RestartContainer holds the pod-level resource, and a
 * target that breaks the pod-level budget is not shown as one tollgate would set.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { boundsTarget } from '../../../src/decide/plan-resize.ts';
import { toRecord } from '../../../src/decide/resize-resources.ts';
import { aResizePolicy, aRunningPod } from '../../builders/resize.ts';

const Mi = 2 ** 20;

test('bounds-only plan targets respect RestartContainer and the pod-level budget', () => {
  const cases: {
    name: string;
    policy: ReturnType<typeof aResizePolicy>;
    pod: ReturnType<ReturnType<typeof aRunningPod>['obj']>;
    want: ReturnType<typeof toRecord>;
  }[] = [
    {
      name: "a pod-level memory below its min stays where it is when a container's memory change restarts it",
      policy: aResizePolicy({
        containers: {},
        pod: { memory: { min: 512 * Mi, max: 2048 * Mi, step: 256 * Mi } },
      }),
      pod: aRunningPod('web-0', 'team-a')
        .container('app', {}, {}, [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }])
        .podResources({ cpu: '1', memory: '256Mi' })
        .obj(),
      want: { containers: { app: {} }, pod: { requests: { cpu: '1', memory: '256Mi' } } },
    },
    {
      name: 'a container request raised to its min is not shown above the pod-level request',
      policy: aResizePolicy({
        containers: { app: { cpu: { min: 1500, max: 2000, step: 250 } } },
      }),
      pod: aRunningPod('web-0', 'team-a')
        .container('app', { cpu: '500m' })
        .podResources({ cpu: '1' })
        .obj(),
      want: {
        containers: { app: { requests: { cpu: '500m' } } },
        pod: { requests: { cpu: '1' } },
      },
    },
  ];
  for (const c of cases) assert.deepEqual(toRecord(boundsTarget(c.policy, c.pod)), c.want, c.name);
});
