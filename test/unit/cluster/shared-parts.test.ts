/**
 * The pods the cluster view holds share the parts that pods of one workload hold alike.
 * Every pod of a Job lists the same containers (name, image, resources, resize policy),
 * the same gate, and, created in one burst, the same conditions; JSON.parse gives each
 * pod its own copy of every such object. The view keeps one frozen copy of each, and of
 * each list and spec or status made of them, and hands it to every pod that holds an
 * equal one. Frozen, because a reader that wrote to a shared part would change every pod
 * that shares it: it fails loudly instead.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { KubernetesObject } from '@kubernetes/client-node';
import { SharedParts, SharedValues, trimPod } from '../../../src/cluster/trim.ts';
import { servedJobPod } from '../../builders/served-pod.ts';
import { viewHeapPerPod } from '../../support/heap-in-child.ts';

type Loose = KubernetesObject & Record<string, unknown>;

/** Job pod `index` as the view holds it, trimmed from its own parse of the served JSON. */
function held(
  index: number,
  running: boolean,
  parts: SharedParts,
  change: (pod: Record<string, unknown>) => void = () => {},
): Loose {
  const served = servedJobPod(index, { running });
  change(served);
  return trimPod(JSON.parse(JSON.stringify(served)) as Loose, new SharedValues(), parts);
}

/** The value at a dotted path ("spec.containers.0"); undefined where any step is missing. */
function at(object: unknown, path: string): unknown {
  let current = object;
  for (const step of path.split('.')) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

const sharedParts = [
  {
    form: 'gated',
    running: false,
    paths: [
      'spec.schedulingGates',
      'spec.containers.0',
      'spec.initContainers.0',
      'status.conditions.0',
    ],
  },
  {
    form: 'running',
    running: true,
    paths: [
      'spec.containers',
      'spec.initContainers',
      'status.conditions',
      'status.conditions.0',
      'status.conditions.1',
      'status.containerStatuses.0.state',
      'status.containerStatuses.0.resources',
      'status.containerStatuses.0.allocatedResources',
    ],
  },
];

describe('the pods the view holds share the parts pods of one workload hold alike', () => {
  for (const { form, running, paths } of sharedParts) {
    it(`two ${form} workers of one Job hold one copy of each: ${paths.join(', ')}`, () => {
      const parts = new SharedParts();
      const first = held(7, running, parts);
      const second = held(8, running, parts);
      for (const path of paths) {
        assert.equal(typeof at(first, path), 'object', `the held pod has ${path}`);
        assert.ok(at(first, path) === at(second, path), `${path} is one object`);
      }
    });
  }

  it('a shared part is frozen: a reader that writes to it fails instead of changing every pod that shares it', () => {
    const parts = new SharedParts();
    const first = held(7, false, parts);
    held(8, false, parts);
    const worker = at(first, 'spec.containers.0') as { image: string; resources: object };
    assert.throws(() => {
      worker.image = 'registry.example/other:1';
    }, TypeError);
    assert.throws(() => {
      (at(worker, 'resources.requests') as Record<string, string>).cpu = '9';
    }, TypeError);
    assert.equal(worker.image, 'registry.example/ml/trainer:2.14.1');
  });

  it('a pod whose part differs keeps its own, with its own values', () => {
    const parts = new SharedParts();
    const first = held(7, false, parts);
    const bigger = held(8, false, parts, (pod) => {
      const worker = at(pod, 'spec.containers.0') as { resources: unknown };
      worker.resources = { requests: { cpu: '4', memory: '8Gi' } };
    });
    assert.notEqual(at(first, 'spec.containers.0'), at(bigger, 'spec.containers.0'));
    assert.deepEqual(at(bigger, 'spec.containers.0.resources'), {
      requests: { cpu: '4', memory: '8Gi' },
    });
    assert.deepEqual(at(first, 'spec.containers.0.resources'), {
      requests: { cpu: '500m', memory: '1Gi' },
      limits: { cpu: '2', memory: '2Gi' },
    });
    assert.ok(at(first, 'spec.initContainers.0') === at(bigger, 'spec.initContainers.0'));
  });

  it('a pod held with shared parts equals the same pod held with every part its own copy', () => {
    for (const running of [false, true]) {
      const parts = new SharedParts();
      held(8, running, parts);
      const own = new SharedParts(0);
      assert.deepEqual(held(7, running, parts), held(7, running, own));
    }
  });

  /** Pairs a key that ran values or names together, or lost their types, would read alike. */
  const unequalPairs: { what: string; first: object; second: object }[] = [
    { what: 'a number and its text', first: { restartCount: 1 }, second: { restartCount: '1' } },
    { what: 'null and its text', first: { reason: null }, second: { reason: 'null' } },
    { what: 'true and its text', first: { ready: true }, second: { ready: 'true' } },
    {
      what: 'one value with a comma and two',
      first: { a: 'b,c:d' },
      second: { a: 'b', c: 'd' },
    },
    { what: 'an object and a list', first: { 0: 'a' }, second: ['a'] },
    { what: 'fields in another order', first: { a: '1', b: '2' }, second: { b: '2', a: '1' } },
    { what: 'nested parts that differ', first: { r: { cpu: '1' } }, second: { r: { cpu: '2' } } },
  ];
  for (const { what, first, second } of unequalPairs) {
    it(`parts that differ are never shared: ${what}`, () => {
      const table = new SharedParts();
      const kept = table.share(structuredClone(first));
      const other = table.share(structuredClone(second));
      assert.notEqual(kept, other);
      assert.deepEqual(other, second);
      assert.deepEqual(table.share(structuredClone(first)), first);
    });
  }

  it('the table never holds more parts than its capacity, nor a part whose JSON is over 512 characters', () => {
    const table = new SharedParts(3);
    for (const cpu of ['1', '2', '3', '4', '5']) table.share({ requests: { cpu } });
    assert.ok(table.size <= 3, `holds ${table.size}`);
    const long = { message: 'x'.repeat(520) };
    const before = table.size;
    assert.equal(table.share(long), long);
    assert.equal(table.size, before);
    assert.equal(Object.isFrozen(long), false);
  });
});

describe('the heap shared parts save', () => {
  it('10,000 Job pods, half gated and half running, take under 0.4 of the heap they take with every part its own copy', () => {
    const own = viewHeapPerPod(10_000, 'own copies');
    const shared = viewHeapPerPod(10_000, 'shared');
    assert.ok(
      shared < 0.4 * own,
      `heap per pod: ${shared.toFixed(0)} B shared, ${own.toFixed(0)} B own copies (${(shared / own).toFixed(2)})`,
    );
  });
});
