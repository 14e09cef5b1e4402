import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podRequests } from '../../../src/decide/requests.ts';
import { aPod } from '../../builders/pod.ts';

const Mi = 2 ** 20;

test('podRequests follows the scheduler', async (t) => {
  const cases = [
    { name: 'a pod without requests requests nothing', pod: aPod('p'), want: {} },
    {
      name: 'containers are summed',
      pod: aPod('p')
        .requests({ cpu: '500m', memory: '256Mi' })
        .container({ name: 'b', resources: { requests: { cpu: '250m', 'nvidia.com/gpu': '1' } } }),
      want: { cpu: 750, memory: 256 * Mi, 'nvidia.com/gpu': 1 },
    },
    {
      name: 'a limit without a request counts as the request',
      pod: aPod('p').requests({}, { cpu: '1', 'nvidia.com/gpu': '2' }),
      want: { cpu: 1000, 'nvidia.com/gpu': 2 },
    },
    {
      name: 'a large init container raises the pod to its peak',
      pod: aPod('p')
        .requests({ cpu: '500m' })
        .initContainer({ name: 'init', resources: { requests: { cpu: '2' } } }),
      want: { cpu: 2000 },
    },
    {
      name: 'a sidecar adds to the containers and to every later init container',
      pod: aPod('p')
        .requests({ cpu: '500m' })
        .initContainer({
          name: 'proxy',
          restartPolicy: 'Always',
          resources: { requests: { cpu: '100m' } },
        })
        .initContainer({ name: 'migrate', resources: { requests: { cpu: '1' } } }),
      want: { cpu: 1100 },
    },
    {
      name: 'pod-level requests replace the container sum for cpu and memory',
      pod: aPod('p')
        .requests({ cpu: '4', memory: '1Gi' })
        .podResources({ cpu: '1', memory: '512Mi' }),
      want: { cpu: 1000, memory: 512 * Mi },
    },
    {
      name: 'runtime overhead is added on top',
      pod: aPod('p').requests({ cpu: '1' }).overhead({ cpu: '250m' }),
      want: { cpu: 1250 },
    },
    {
      name: 'the same text is read per resource, however often it was read before (1 cpu is 1000m, 1 of memory is 1 byte)',
      pod: aPod('p')
        .requests({ cpu: '1', memory: '1' })
        .container({ name: 'b', resources: { requests: { memory: '1', cpu: '1' } } }),
      want: { cpu: 2000, memory: 2 },
    },
    {
      name: 'a limit that does not parse is refused even where a request covers it',
      pod: aPod('p').requests({ cpu: '1' }, { cpu: 'lots' }),
      want: 'refused',
    },
  ];
  for (const c of cases) {
    if (c.want === 'refused') {
      await t.test(c.name, () => assert.throws(() => podRequests(c.pod.obj()), /lots/));
      continue;
    }
    await t.test(c.name, () => assert.deepEqual(podRequests(c.pod.obj()), c.want));
  }
});
