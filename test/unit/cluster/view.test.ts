import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { createClusterView } from '../../../src/cluster/view.ts';
import type { ListPage, ResourceSource, ResourceTarget } from '../../../src/cluster/source.ts';
import { KubeApiError } from '../../../src/cluster/errors.ts';

/** A source per target: lists answer from `objects` (or fail with `error`), each list waits for `gate` when set; watches stay open and silent. */
class FakeSource implements ResourceSource {
  objects: KubernetesObject[] = [];
  error: Error | undefined;
  gate: Promise<void> | undefined;
  lists = 0;
  readonly description: string;
  constructor(description: string) {
    this.description = description;
  }
  async list(): Promise<ListPage> {
    this.lists += 1;
    await this.gate;
    if (this.error) throw this.error;
    return {
      items: structuredClone(this.objects),
      resourceVersion: '10',
      continueToken: undefined,
    };
  }
  watch() {
    return { stop() {} };
  }
}

function world() {
  const sources = new Map<string, FakeSource>();
  const sourceFor = (target: ResourceTarget) => {
    const key = `${target.kind}|${target.namespace ?? ''}`;
    let source = sources.get(key);
    if (!source) sources.set(key, (source = new FakeSource(key)));
    return source;
  };
  const view = createClusterView({
    kubeConfig: new KubeConfig(),
    namespaces: ['team-a'],
    sourceFactory: sourceFor,
    backoff: { baseMs: 1, maxMs: 2 },
  });
  return {
    view,
    source: (kind: string, namespace = '') => sourceFor({ apiVersion: 'v1', kind, namespace }),
  };
}

const pod = (namespace: string, name: string): KubernetesObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace, name, resourceVersion: '5' },
});

test('a namespace added to the managed set keeps the view un-synced until its pods are listed', async () => {
  const { view, source } = world();
  source('Pod').objects = [pod('team-a', 'a'), pod('team-b', 'b')];
  view.start();
  await view.whenSynced(AbortSignal.timeout(5000));
  assert.deepEqual(
    [...view.pods()].map((p) => p.metadata?.name),
    ['a'],
  );

  let release!: () => void;
  source('Pod').gate = new Promise((resolve) => (release = resolve));
  view.setNamespaces(['team-a', 'team-b']);
  assert.equal(view.synced, false, 'the store does not hold team-b yet');
  const caughtUp = view.whenSynced(AbortSignal.timeout(5000));
  release();
  await caughtUp;
  assert.equal(view.synced, true);
  assert.deepEqual([...view.pods()].map((p) => p.metadata?.name).sort(), ['a', 'b']);
  await view.stop();
});

test('an unreadable referenced kind never holds up the view, and says why per reference', async () => {
  const { view, source } = world();
  const widget = { apiVersion: 'v1', kind: 'Widget', namespace: 'team-a', name: 'w' };
  const flag = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'team-a', name: 'flag' };
  source('Widget', 'team-a').error = new KubeApiError(
    404,
    'the server could not find the requested resource',
    'NotFound',
  );
  source('ConfigMap', 'team-a').error = new KubeApiError(
    403,
    'configmaps is forbidden',
    'Forbidden',
  );
  view.watchObjects([widget, flag]);
  view.start();
  await view.whenSynced(AbortSignal.timeout(5000));
  const problems = async () => [view.objectProblem(widget), view.objectProblem(flag)];
  for (let i = 0; i < 100 && (await problems()).some((p) => !p?.includes('cannot be read')); i++)
    await new Promise((r) => setTimeout(r, 5));
  assert.match(view.objectProblem(widget) ?? '', /does not serve this kind/);
  assert.match(view.objectProblem(flag) ?? '', /may not list it/);
  assert.deepEqual(
    view
      .references()
      .map((r) => (r.ready ? 'ready' : r.reason))
      .sort(),
    ['forbidden', 'unserved'],
  );
  source('ConfigMap', 'team-a').error = undefined;
  source('ConfigMap', 'team-a').objects = [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'team-a', name: 'flag' } },
  ];
  for (let i = 0; i < 200 && view.objectProblem(flag) !== undefined; i++)
    await new Promise((r) => setTimeout(r, 5));
  assert.equal(view.objectProblem(flag), undefined, 'recovers by itself once readable');
  assert.ok(view.object(flag));
  view.watchObjects([flag]);
  assert.deepEqual(
    view.references().map((r) => r.reference),
    ['ConfigMap|team-a'],
  );
  await view.stop();
});

test('a cluster-scoped object referenced from a namespace is found by its bare name', async () => {
  const { view, source } = world();
  const node = { apiVersion: 'v1', kind: 'Node', namespace: 'team-a', name: 'n1' };
  source('Node', 'team-a').objects = [{ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } }];
  view.watchObjects([node]);
  view.start();
  await view.whenSynced(AbortSignal.timeout(5000));
  for (let i = 0; i < 100 && view.objectProblem(node) !== undefined; i++)
    await new Promise((r) => setTimeout(r, 5));
  assert.equal(view.object(node)?.metadata?.name, 'n1');
  await view.stop();
});
