/**
 * How `tollgate run` wires its dispatcher to the cluster view (src/run/writes.ts): the
 * view's word on a write's pod, and a pod's delete cancelling its queued writes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { createRunDispatcher, podPresence } from '../../../src/run/writes.ts';
import { dispatchSettings } from '../../../src/dispatch/settings.ts';
import { TermWrites } from '../../../src/loops/leadership.ts';
import type { ViewChange } from '../../../src/cluster/types.ts';
import type { WriteOperation, WriteRequest } from '../../../src/dispatch/types.ts';
import { aPod } from '../../builders/pod.ts';

function requestFor(
  pod: V1Pod,
  op: WriteOperation = { type: 'removeGate', gate: 'g', gateIndex: 0 },
): WriteRequest {
  return {
    key: `${pod.metadata?.namespace}/${pod.metadata?.name}`,
    target: {
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      uid: pod.metadata?.uid ?? '',
      resourceVersion: '1',
    },
    op,
    priority: 0,
    tenant: 't',
    deadline: Number.MAX_SAFE_INTEGER,
    decisionId: `d-${pod.metadata?.name}`,
  };
}

const decided = aPod('p', 'team-a').uid('u1').obj();
const presenceRows: {
  name: string;
  inView: V1Pod | undefined;
  request: WriteRequest;
  expected: string;
}[] = [
  {
    name: 'the pod decided on, still in the view, is present',
    inView: decided,
    request: requestFor(decided),
    expected: 'present',
  },
  {
    name: 'a pod missing from the view is gone',
    inView: undefined,
    request: requestFor(decided),
    expected: 'gone',
  },
  {
    name: 'a pod of the same name with another uid is replaced',
    inView: aPod('p', 'team-a').uid('u2').obj(),
    request: requestFor(decided),
    expected: 'replaced',
  },
  {
    name: 'an Event write is not judged by the pod view',
    inView: undefined,
    request: requestFor(decided, {
      type: 'event',
      event: { action: 'series', count: 2, lastObservedTime: '2026-11-29T07:00:00.000000Z' },
    }),
    expected: 'unknown',
  },
];
for (const row of presenceRows) {
  test(row.name, () => {
    const presence = podPresence({ pod: () => row.inView });
    assert.equal(presence(row.request), row.expected);
  });
}

test('a pod deleted in the view cancels its queued write with the reason', async () => {
  const listeners: ((change: ViewChange) => void)[] = [];
  const a = aPod('a', 'team-a').uid('ua').obj();
  const blocker = aPod('blocker', 'team-a').uid('ub').obj();
  const stopped: (() => void)[] = [];
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const dispatcher = createRunDispatcher({
    // One token: the blocker takes it, `a` waits for the next one (1000 s away).
    config: { writes: dispatchSettings({ concurrency: 1, qps: 0.001, burst: 1 }) },
    kubeConfig,
    cacheLag: { observe: () => undefined } as never,
    elector: {
      fence: () => true,
      onStoppedLeading: (listener) =>
        stopped.push(() => listener({ signal: new AbortController().signal } as never)),
    },
    termWrites: new TermWrites(),
    view: {
      pod: (_namespace, name) => (name === 'a' ? a : name === 'blocker' ? blocker : undefined),
      onChange: (listener) => {
        listeners.push(listener);
        return () => undefined;
      },
    },
  });
  assert.ok(dispatcher.enqueue(requestFor(blocker)).accepted);
  const queued = dispatcher.enqueue(requestFor(a));
  assert.ok(queued.accepted);
  assert.equal(dispatcher.depth, 1, '`a` waits for a token');
  for (const listener of listeners)
    listener({ type: 'DELETED', resource: 'pods', key: 'team-a/a', object: a });
  assert.deepEqual(await queued.done, { result: 'cancelled', message: 'the pod was deleted' });
  assert.equal(stopped.length, 1, 'the end of a term is wired to abort writes in flight');
  stopped[0]?.();
  await dispatcher.close({ cancelQueued: true });
});

test('a shutdown that times out aborts the writes still in flight and waits for their outcome, so the lease is released only after they settled', async () => {
  const { PriorityDispatcher } = await import('../../../src/dispatch/queue.ts');
  const { closeWithin } = await import('../../../src/run/writes.ts');
  const { silentLogger } = await import('../../../src/observe/log.ts');
  let inFlight = 0;
  const dispatcher = new PriorityDispatcher({
    attemptTimeoutMs: 60_000,
    executor: (_request, signal) => {
      inFlight += 1;
      return new Promise((_resolve, reject) =>
        signal.addEventListener('abort', () => {
          inFlight -= 1;
          reject(signal.reason);
        }),
      );
    },
    readBack: async () => ({ state: 'absent' }),
  });
  const write = dispatcher.enqueue(requestFor(aPod('a', 'team-a').obj()));
  assert.ok(write.accepted);
  await closeWithin(dispatcher, 20, silentLogger);
  assert.equal(inFlight, 0, 'nothing in flight when closeWithin returns');
  assert.equal(dispatcher.inFlight, 0);
  const result = await write.done;
  assert.equal(result.result, 'cancelled');
  assert.match((result as { message: string }).message, /shutdown/);
});

test("tollgate run's writes ask the elector's fence again as they reach a connection: one queued in the pool when the term ends is cancelled, never sent", async () => {
  const { holdingApiServer, oneConnection, until, waiting } =
    await import('../../support/held-connection.ts');
  const server = await holdingApiServer();
  const { kubeConfig, agent } = oneConnection(server.url);
  let termOpen = true;
  const dispatcher = createRunDispatcher({
    config: { writes: dispatchSettings({ concurrency: 2 }) },
    kubeConfig,
    cacheLag: { expect: () => undefined } as never,
    elector: { fence: () => termOpen, onStoppedLeading: () => undefined },
    termWrites: new TermWrites(),
  });
  try {
    const held = dispatcher.enqueue(requestFor(aPod('held', 'ns').uid('uh').obj()));
    assert.ok(held.accepted);
    await until('the first write reaches the server', () => server.seen.length === 1);
    const second = dispatcher.enqueue(requestFor(aPod('waiting', 'ns').uid('uw').obj()));
    assert.ok(second.accepted);
    await until('the second waits for the connection', () => waiting(agent, server.url) === 1);
    termOpen = false; // the elector's fence closes; its lease loop has not run yet
    server.answerHeld();
    const first = await held.done;
    assert.equal(first.result, 'succeeded', JSON.stringify(first));
    const outcome = await second.done;
    assert.equal(outcome.result, 'cancelled');
    assert.match(outcome.message ?? '', /leadership lost.*never sent/);
    assert.deepEqual(
      server.seen.map((s) => s.path.replace(/\?.*/, '')),
      ['/api/v1/namespaces/ns/pods/held'],
    );
  } finally {
    await dispatcher.close({ cancelQueued: true });
    await agent.close();
    await server.close();
  }
});
