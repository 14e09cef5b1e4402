import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { KubernetesObject } from '@kubernetes/client-node';
import { ObjectStore, diffRelist } from '../../../src/cluster/store.ts';
import { trimObject } from '../../../src/cluster/trim.ts';

function pod(
  name: string,
  resourceVersion: string,
  uid = `uid-${name}`,
  namespace = 'team-a',
): KubernetesObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, resourceVersion, uid } };
}

function map(...objects: KubernetesObject[]): Map<string, KubernetesObject> {
  return new Map(objects.map((o) => [`${o.metadata?.namespace}/${o.metadata?.name}`, o]));
}

test('relist diff: each case reports exactly the changes between old and new content', () => {
  const cases: {
    name: string;
    before: KubernetesObject[];
    after: KubernetesObject[];
    expected: string[];
  }[] = [
    {
      name: 'an object that appeared while not watching is ADDED',
      before: [],
      after: [pod('a', '1')],
      expected: ['ADDED team-a/a'],
    },
    {
      name: 'an object that vanished while not watching gets a synthetic DELETED',
      before: [pod('a', '1')],
      after: [],
      expected: ['DELETED team-a/a'],
    },
    {
      name: 'an object with a new resourceVersion is MODIFIED',
      before: [pod('a', '1')],
      after: [pod('a', '2')],
      expected: ['MODIFIED team-a/a'],
    },
    {
      name: 'an unchanged object is not reported',
      before: [pod('a', '1')],
      after: [pod('a', '1')],
      expected: [],
    },
    {
      name: 'a pod re-created under the same name (new uid) is MODIFIED',
      before: [pod('a', '5', 'u1')],
      after: [pod('a', '5', 'u2')],
      expected: ['MODIFIED team-a/a'],
    },
    {
      name: 'mixed changes are all reported, deletions last',
      before: [pod('gone', '1'), pod('same', '1'), pod('changed', '1')],
      after: [pod('same', '1'), pod('changed', '3'), pod('new', '4')],
      expected: ['MODIFIED team-a/changed', 'ADDED team-a/new', 'DELETED team-a/gone'],
    },
  ];
  for (const { name, before, after, expected } of cases) {
    const changes = diffRelist(map(...before), map(...after)).map((c) => `${c.type} ${c.key}`);
    assert.deepEqual(changes, expected, name);
  }
});

test('a DELETED from a relist carries the last known object', () => {
  const last = pod('a', '7');
  const [change] = diffRelist(map(last), map());
  assert.equal(change?.object, last);
});

test('the store swaps atomically on replace and reports the diff', () => {
  const store = new ObjectStore();
  store.apply('ADDED', pod('a', '1'));
  store.apply('ADDED', pod('b', '1'));
  const changes = store.replace([pod('b', '2'), pod('c', '3')]);
  assert.deepEqual(
    changes.map((c) => `${c.type} ${c.key}`),
    ['MODIFIED team-a/b', 'ADDED team-a/c', 'DELETED team-a/a'],
  );
  assert.equal(store.size, 2);
  assert.equal(store.get('team-a/a'), undefined);
  assert.equal(store.get('team-a/b')?.metadata?.resourceVersion, '2');
});

test('watch events: a replayed ADDED is a modification, an unknown DELETED changes nothing', () => {
  const store = new ObjectStore();
  assert.equal(store.apply('ADDED', pod('a', '1'))?.type, 'ADDED');
  assert.equal(store.apply('ADDED', pod('a', '2'))?.type, 'MODIFIED');
  assert.equal(store.apply('DELETED', pod('x', '3')), undefined);
  assert.equal(store.apply('DELETED', pod('a', '4'))?.type, 'DELETED');
  assert.equal(store.size, 0);
});

test('cluster-scoped objects are keyed by name alone', () => {
  const store = new ObjectStore();
  store.apply('ADDED', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-1', resourceVersion: '1' },
  });
  assert.ok(store.get('node-1'));
});

test('an object without a name is rejected with a clear error', () => {
  assert.throws(
    () => new ObjectStore().apply('ADDED', { kind: 'Pod', metadata: {} }),
    /Pod has no metadata.name/,
  );
});

test('trim drops managedFields and the last-applied annotation and keeps everything decisions use', () => {
  const object = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'p',
      namespace: 'ns',
      uid: 'u',
      resourceVersion: '9',
      labels: { app: 'x' },
      annotations: {
        'kubectl.kubernetes.io/last-applied-configuration': '{"big":true}',
        'tollgate.io/x': 'y',
      },
      managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsV1: { 'f:spec': {} } }],
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'r' }],
    },
    spec: { schedulingGates: [{ name: 'tollgate.io/gate' }], containers: [{ name: 'c' }] },
    status: { phase: 'Pending' },
  } as KubernetesObject & { spec: unknown; status: unknown };
  const trimmed = trimObject(structuredClone(object));
  const { managedFields: _dropped, ...keptMetadata } = object.metadata ?? {};
  assert.deepEqual(trimmed, {
    ...object,
    metadata: { ...keptMetadata, annotations: { 'tollgate.io/x': 'y' } },
  } as unknown as KubernetesObject);
});
