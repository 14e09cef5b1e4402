/**
 * The pods an informer holds share their repeated values. V8's JSON.parse gives every
 * string value its own copy, so 10,000 pods of a few Jobs held 10,000 copies of their
 * namespace, images, label values, tolerations, node names and condition types, reasons
 * and messages. Counted in bytes of heap, not timed: 10,000 pods, each listed from its own
 * JSON text as the API server sends it, through a real Informer as it trims, against the
 * same Informer trimming with every value its own copy (what it held before); a child
 * process with --expose-gc.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { aPod } from '../../builders/pod.ts';
import { SharedValues } from '../../../src/cluster/trim.ts';
import { heapPerPodInChild } from '../../support/heap-in-child.ts';

/** A running Job worker as the API server serves it: labels, owner, tolerations, status. */
function servedWorker(index: number): unknown {
  const job = `train-${Math.floor(index / 100)}`;
  const pod = aPod(`${job}-${index}`, 'ml-batch')
    .uid(`0b9c3f2e-${String(index).padStart(8, '0')}-4c1d-9a57-1f0e2d3c4b5a`)
    .resourceVersion(String(100_000 + index))
    .label('batch.kubernetes.io/job-name', job)
    .label('job-name', job)
    .label('app.kubernetes.io/name', 'trainer')
    .label('tollgate.io/tenant', `team-${index % 7}`)
    .annotate('tollgate.io/gang', job)
    .image('registry.example/ml/trainer:2.14.1')
    .requests({ cpu: '500m', memory: '1Gi' }, { cpu: '2', memory: '2Gi' })
    .boundTo(`node-${index % 50}`)
    .running()
    .condition('Initialized', 'True')
    .condition('Ready', 'True')
    .condition('ContainersReady', 'True')
    .obj();
  return {
    ...pod,
    spec: {
      ...pod.spec,
      schedulerName: 'default-scheduler',
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute' },
      ],
    },
    status: {
      ...pod.status,
      qosClass: 'Burstable',
      hostIP: `10.0.0.${index % 50}`,
      podIP: `10.244.${Math.floor(index / 250)}.${index % 250}`,
    },
  };
}

/** Heap bytes per pod a real Informer holds: as it trims (`shared`), or trimmed with every value its own copy, as before (`own copies`). */
function heapPerPod(mode: 'shared' | 'own copies', pods: number): number {
  const src = (path: string): string =>
    JSON.stringify(fileURLToPath(new URL(`../../../src/cluster/${path}`, import.meta.url)));
  const script = `
    import { Informer } from ${src('informer.ts')};
    import { SharedValues, trimObject } from ${src('trim.ts')};
    /** What the informer held before: trimmed, each value its own copy. */
    class OwnCopies extends SharedValues { share(value) { return value; } }
    import { getHeapStatistics } from 'node:v8';
    const template = ${JSON.stringify(JSON.stringify(servedWorker(0)))};
    const served = (i) => template.replaceAll('train-0-0', 'train-' + Math.floor(i / 100) + '-' + i)
      .replaceAll('00000000', String(i).padStart(8, '0')).replaceAll('"100000"', '"' + (100000 + i) + '"')
      .replaceAll('node-0', 'node-' + (i % 50)).replaceAll('team-0', 'team-' + (i % 7));
    const settle = () => { for (let i = 0; i < 4; i++) gc(); return getHeapStatistics().used_heap_size; };
    const before = settle();
    const source = {
      description: 'pods',
      async list({ continueToken }) {
        const from = Number(continueToken ?? 0), to = Math.min(from + 500, ${pods});
        const items = [];
        for (let i = from; i < to; i++) items.push(JSON.parse(served(i)));
        return { items, resourceVersion: '1', continueToken: to < ${pods} ? String(to) : undefined };
      },
      watch() { return { stop() {} }; },
    };
    const own = new OwnCopies();
    const held = new Informer(${JSON.stringify(mode)} === 'own copies'
      ? { source, transform: (object) => trimObject(object, own) }
      : { source });
    held.start();
    await held.whenSynced();
    const after = settle();
    process.stdout.write(JSON.stringify({ count: held.size, perPod: (after - before) / held.size }));
    await held.stop();`;
  return heapPerPodInChild(script, pods);
}

describe('the pods an informer holds share their repeated values', () => {
  it('10,000 running Job workers take under 0.85 of the heap they take with every value its own copy', () => {
    const own = heapPerPod('own copies', 10_000);
    const shared = heapPerPod('shared', 10_000);
    assert.ok(
      shared < 0.85 * own,
      `heap per pod: ${shared.toFixed(0)} B shared, ${own.toFixed(0)} B own copies (${(shared / own).toFixed(2)})`,
    );
  });

  const values = new SharedValues(3);
  const cases: { what: string; value: string; shared: boolean }[] = [
    { what: 'a short value', value: 'registry.example/ml/trainer:2.14.1', shared: true },
    { what: 'a value longer than 64 characters', value: 'x'.repeat(65), shared: false },
  ];
  for (const { what, value, shared } of cases) {
    it(`${what} is ${shared ? '' : 'not '}kept in the table`, () => {
      const first = values.share(value);
      assert.equal(first, value);
      assert.equal(values.size > 0 && values.has(value), shared);
    });
  }

  it('the table never holds more values than its capacity: a full table starts again', () => {
    const table = new SharedValues(3);
    for (const value of ['a', 'b', 'c', 'd', 'e']) table.share(value);
    assert.ok(table.size <= 3, `holds ${table.size}`);
    assert.equal(table.has('e'), true);
  });
});
