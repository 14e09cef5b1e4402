/**
 * The informer's restart logic against a scripted source. This checks the decision
 * logic (what happens after which outcome); the proof against a real API server is
 * test/e2e/cluster-view/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Informer, type RestartReason } from '../../../src/cluster/informer.ts';
import { KubeApiError } from '../../../src/cluster/errors.ts';
import type {
  ListPage,
  RawEventType,
  ResourceSource,
  WatchStart,
} from '../../../src/cluster/source.ts';

function pod(name: string, resourceVersion: string, namespace = 'team-a'): KubernetesObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      resourceVersion,
      uid: `uid-${name}`,
      managedFields: [{ manager: 'm' }],
    },
  };
}

interface Session {
  readonly start: WatchStart;
  emit(type: RawEventType, object: KubernetesObject): void;
  close(error: Error | null): void;
  stopped: boolean;
}

class ScriptedSource implements ResourceSource {
  readonly description = 'Pod.v1';
  readonly listCalls: { continueToken?: string }[] = [];
  readonly sessions: Session[] = [];
  #lists: (ListPage | Error)[] = [];
  #watchWaiters: ((session: Session) => void)[] = [];
  #listWaiters: (() => void)[] = [];

  queueList(...responses: (ListPage | Error)[]): void {
    this.#lists.push(...responses);
    for (const wake of this.#listWaiters.splice(0)) wake();
  }
  async list(options: { continueToken?: string; signal: AbortSignal }): Promise<ListPage> {
    this.listCalls.push({ continueToken: options.continueToken });
    while (this.#lists.length === 0) {
      await new Promise<void>((resolve, reject) => {
        this.#listWaiters.push(resolve);
        options.signal.addEventListener('abort', () => reject(options.signal.reason), {
          once: true,
        });
      });
    }
    const next = this.#lists.shift() as ListPage | Error;
    if (next instanceof Error) throw next;
    return next;
  }
  watch(
    start: WatchStart,
    onEvent: (type: RawEventType, object: KubernetesObject) => void,
    onDone: (e: Error | null) => void,
  ) {
    let done = false;
    const session: Session = {
      start,
      stopped: false,
      emit: (type, object) => onEvent(type, structuredClone(object)),
      close: (error) => {
        if (done) return;
        done = true;
        onDone(error);
      },
    };
    this.sessions.push(session);
    const waiter = this.#watchWaiters.shift();
    if (waiter) queueMicrotask(() => waiter(session));
    return {
      stop: () => {
        session.stopped = true;
      },
    };
  }
  async nextWatch(): Promise<Session> {
    const already = this.sessions.find((s) => !s.stopped && !(s as { taken?: boolean }).taken);
    const session =
      already ?? (await new Promise<Session>((resolve) => this.#watchWaiters.push(resolve)));
    (session as { taken?: boolean }).taken = true;
    return session;
  }
}

function page(
  resourceVersion: string,
  items: KubernetesObject[],
  continueToken?: string,
): ListPage {
  return { items: items.map((i) => structuredClone(i)), resourceVersion, continueToken };
}

function harness(options: { filter?: (o: KubernetesObject) => boolean } = {}) {
  const source = new ScriptedSource();
  const sleeps: number[] = [];
  const restarts: RestartReason[] = [];
  let now = 0;
  const informer = new Informer({
    source,
    filter: options.filter,
    pageSize: 2,
    watchTimeoutSeconds: () => 300,
    random: () => 0.5,
    clock: { now: () => now },
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
    hooks: { restarted: (reason) => restarts.push(reason) },
  });
  const changes: string[] = [];
  informer.onChange((c) =>
    changes.push(`${c.type} ${c.key}@${c.object.metadata?.resourceVersion}`),
  );
  return { source, informer, sleeps, restarts, changes, advance: (ms: number) => (now += ms) };
}

test('the initial list follows continue tokens, trims objects, and only then reports synced', async () => {
  const { source, informer, changes } = harness();
  source.queueList(page('10', [pod('a', '5'), pod('b', '6')], 'next'), page('10', [pod('c', '7')]));
  informer.start();
  await informer.whenSynced();
  assert.deepEqual(source.listCalls, [{ continueToken: undefined }, { continueToken: 'next' }]);
  assert.equal(informer.size, 3);
  assert.equal(informer.lastResourceVersion, '10');
  assert.equal(informer.get('team-a/a')?.metadata?.managedFields, undefined);
  assert.deepEqual(changes, ['ADDED team-a/a@5', 'ADDED team-a/b@6', 'ADDED team-a/c@7']);
  const session = await source.nextWatch();
  assert.equal(session.start.resourceVersion, '10');
  await informer.stop();
});

test('watch events update the store and bookmarks advance the resourceVersion without a change', async () => {
  const { source, informer, changes } = harness();
  source.queueList(page('10', [pod('a', '5')]));
  informer.start();
  const session = await source.nextWatch();
  session.emit('ADDED', pod('b', '11'));
  session.emit('MODIFIED', pod('a', '12'));
  session.emit('DELETED', pod('b', '13'));
  session.emit('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: '20' } });
  assert.deepEqual(changes.slice(1), [
    'ADDED team-a/b@11',
    'MODIFIED team-a/a@12',
    'DELETED team-a/b@13',
  ]);
  assert.equal(informer.lastResourceVersion, '20');
  assert.equal(informer.size, 1);
  await informer.stop();
});

test('a clean close resumes the watch from the last resourceVersion without relisting', async () => {
  const { source, informer, restarts, advance } = harness();
  source.queueList(page('10', []));
  informer.start();
  const first = await source.nextWatch();
  first.emit('ADDED', pod('a', '15'));
  advance(60_000);
  first.close(null);
  const second = await source.nextWatch();
  assert.equal(second.start.resourceVersion, '15');
  assert.equal(source.listCalls.length, 1);
  assert.deepEqual(restarts, ['closed']);
  await informer.stop();
});

test('an in-stream 410 relists atomically and reports a synthetic DELETED for objects that vanished', async () => {
  const { source, informer, changes, restarts } = harness();
  source.queueList(page('10', [pod('a', '5'), pod('b', '6')]));
  informer.start();
  const first = await source.nextWatch();
  first.emit('ERROR', {
    kind: 'Status',
    apiVersion: 'v1',
    code: 410,
    message: 'too old resource version',
  } as KubernetesObject);
  source.queueList(page('30', [pod('b', '25'), pod('c', '26')]));
  const second = await source.nextWatch();
  assert.equal(second.start.resourceVersion, '30');
  assert.deepEqual(changes.slice(2), [
    'MODIFIED team-a/b@25',
    'ADDED team-a/c@26',
    'DELETED team-a/a@5',
  ]);
  assert.deepEqual(restarts, ['gone']);
  await informer.stop();
});

test('an HTTP 410 on the watch request relists too', async () => {
  const { source, informer, restarts } = harness();
  source.queueList(page('10', []));
  informer.start();
  (await source.nextWatch()).close(new KubeApiError(410, 'Gone'));
  source.queueList(page('40', []));
  const second = await source.nextWatch();
  assert.equal(second.start.resourceVersion, '40');
  assert.deepEqual(restarts, ['gone']);
  await informer.stop();
});

test('any other error backs off with growing delays and never stops, then recovers', async () => {
  const { source, informer, sleeps, restarts } = harness();
  const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  source.queueList(
    refused,
    new KubeApiError(500, 'boom'),
    new KubeApiError(403, 'forbidden'),
    refused,
    page('10', [pod('a', '1')]),
  );
  informer.start();
  await informer.whenSynced();
  assert.deepEqual(restarts, ['error', 'error', 'error', 'error']);
  // base 500 ms doubling, random fixed at 0.5: cap * 0.75
  assert.deepEqual(sleeps, [375, 750, 1500, 3000]);
  (await source.nextWatch()).close(new KubeApiError(500, 'watch broke'));
  const again = await source.nextWatch();
  assert.equal(again.start.resourceVersion, '10');
  assert.equal(sleeps.length, 5, 'the watch error waited too');
  await informer.stop();
});

test('an in-stream ERROR other than 410 backs off and resumes from the same resourceVersion without relisting', async () => {
  const { source, informer, sleeps, restarts } = harness();
  source.queueList(page('10', []));
  informer.start();
  (await source.nextWatch()).emit('ERROR', {
    kind: 'Status',
    apiVersion: 'v1',
    code: 500,
    message: 'etcd leader changed',
  } as KubernetesObject);
  const again = await source.nextWatch();
  assert.equal(again.start.resourceVersion, '10');
  assert.deepEqual(restarts, ['error']);
  assert.deepEqual(sleeps, [375]);
  assert.equal(source.listCalls.length, 1);
  await informer.stop();
});

test('a watch that closes immediately with no events is backed off, not hammered', async () => {
  const { source, informer, sleeps } = harness();
  source.queueList(page('10', []));
  informer.start();
  for (let i = 0; i < 4; i++) (await source.nextWatch()).close(null);
  await source.nextWatch();
  assert.deepEqual(sleeps, [375, 750, 1500, 3000]);
  await informer.stop();
});

test('a repeated 410 right after a fresh list backs off instead of relisting in a tight loop', async () => {
  const { source, informer, sleeps } = harness();
  source.queueList(page('10', []));
  informer.start();
  for (let i = 0; i < 3; i++) {
    (await source.nextWatch()).close(new KubeApiError(410, 'Gone'));
    source.queueList(page(String(20 + i), []));
  }
  await source.nextWatch();
  assert.deepEqual(sleeps, [375, 750]);
  await informer.stop();
});

test('changing the filter relists: newly matching objects are ADDED, excluded ones DELETED', async () => {
  let namespaces = new Set(['team-a']);
  const { source, informer, changes, restarts } = harness({
    filter: (o) => namespaces.has(o.metadata?.namespace ?? ''),
  });
  const everything = [pod('a', '5', 'team-a'), pod('b', '6', 'team-b')];
  source.queueList(page('10', everything));
  informer.start();
  const first = await source.nextWatch();
  first.emit('ADDED', pod('c', '11', 'team-b'));
  assert.deepEqual(changes, ['ADDED team-a/a@5']);
  namespaces = new Set(['team-b']);
  source.queueList(page('12', [...everything, pod('c', '11', 'team-b')]));
  informer.setFilter((o) => namespaces.has(o.metadata?.namespace ?? ''));
  const second = await source.nextWatch();
  assert.equal(second.start.resourceVersion, '12');
  assert.equal(first.stopped, true);
  assert.deepEqual(changes.slice(1), [
    'ADDED team-b/b@6',
    'ADDED team-b/c@11',
    'DELETED team-a/a@5',
  ]);
  assert.deepEqual(restarts, ['filter']);
  await informer.stop();
});

test('after a filter change the informer is not current until the relist has listed, also while its list is in flight', async () => {
  let namespaces = new Set(['team-a']);
  const { source, informer } = harness({
    filter: (o) => namespaces.has(o.metadata?.namespace ?? ''),
  });
  const everything = [pod('a', '5', 'team-a'), pod('b', '6', 'team-b')];
  source.queueList(page('10', everything));
  informer.start();
  await source.nextWatch();
  assert.equal(informer.current, true);
  namespaces = new Set(['team-a', 'team-b']);
  informer.setFilter((o) => namespaces.has(o.metadata?.namespace ?? ''));
  assert.equal(informer.current, false, 'the filter changed');
  // The relist's list is sent and not answered yet: the store still lacks team-b.
  while (source.listCalls.length < 2) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(informer.current, false, 'the relist is in flight');
  source.queueList(page('12', everything));
  await informer.whenCurrent();
  assert.equal(informer.get('team-b/b')?.metadata?.name, 'b');
  await informer.stop();
});

test('relist (a new leader term) lists afresh: not current until that list is in, which shows what the held watch missed', async () => {
  const { source, informer, changes, restarts } = harness();
  source.queueList(page('10', [pod('a', '5')]));
  informer.start();
  const first = await source.nextWatch();
  assert.equal(informer.current, true);
  informer.relist();
  assert.equal(informer.current, false, 'a term start asked for a fresh list');
  while (source.listCalls.length < 2) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(informer.current, false, 'the fresh list is in flight');
  // What the watch never delivered: another writer released b and deleted a.
  source.queueList(page('20', [pod('b', '19')]));
  await informer.whenCurrent();
  const second = await source.nextWatch();
  assert.equal(first.stopped, true);
  assert.equal(second.start.resourceVersion, '20');
  assert.deepEqual(changes, ['ADDED team-a/a@5', 'ADDED team-a/b@19', 'DELETED team-a/a@5']);
  assert.deepEqual(restarts, ['relist']);
  await informer.stop();
});

test('whenSynced rejects when its signal aborts before the first list', async () => {
  const { informer } = harness();
  informer.start();
  const controller = new AbortController();
  const waiting = informer.whenSynced(controller.signal);
  controller.abort(new Error('shutting down'));
  await assert.rejects(waiting, /shutting down/);
  await informer.stop();
});

test('stopping an informer that never synced rejects whoever waits on it, so nothing hangs on a removed reference', async () => {
  const { informer, source } = harness();
  source.queueList(new KubeApiError(403, 'list secrets: forbidden', 'Forbidden'));
  informer.start();
  const waiting = informer.whenSynced();
  await informer.stop();
  await assert.rejects(waiting, /was stopped before it synced/);
  await assert.rejects(informer.whenSynced(), /was stopped before it synced/);
});

test('lastError says why an informer is not synced, and clears once a list succeeds', async () => {
  const { informer, source } = harness();
  source.queueList(new KubeApiError(403, 'list secrets: forbidden', 'Forbidden'));
  informer.start();
  await eventuallyTrue(() => informer.lastError !== undefined);
  assert.match(informer.lastError?.message ?? '', /forbidden/);
  assert.equal(informer.synced, false);
  source.queueList(page('10', [pod('a', '5')]));
  await informer.whenSynced();
  assert.equal(informer.lastError, undefined);
  await informer.stop();
});

async function eventuallyTrue(probe: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !probe(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(probe());
}

test('the progressed hook reports every version the informer has seen: the list, each event (filtered ones too) and bookmarks, after the store holds the event', async () => {
  const source = new ScriptedSource();
  const seen: string[] = [];
  const informer: Informer = new Informer({
    source,
    filter: (o) => o.metadata?.namespace === 'team-a',
    watchTimeoutSeconds: () => 300,
    hooks: {
      progressed: (version) =>
        seen.push(`${version}:${informer.get('team-a/b')?.metadata?.resourceVersion ?? '-'}`),
    },
  });
  source.queueList(page('10', [pod('a', '5')]));
  informer.start();
  const session = await source.nextWatch();
  session.emit('ADDED', pod('b', '11'));
  session.emit('ADDED', pod('x', '12', 'elsewhere'));
  session.emit('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: '20' } });
  assert.deepEqual(seen, ['10:-', '11:11', '12:11', '20:11']);
  await informer.stop();
});
