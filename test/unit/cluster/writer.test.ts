import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig, V1MicroTime } from '@kubernetes/client-node';
import { metadataAnswer } from '../../../src/cluster/api-request.ts';
import { KubeApiError, toKubeError } from '../../../src/cluster/errors.ts';
import type { WriteRequest } from '../../../src/dispatch/types.ts';
import {
  createReadBack,
  createWriteExecutor,
  failedPatchTestMessage,
  answeredResourceVersion,
  isFailedPatchTest,
  removeGatePatch,
  resizePatch,
} from '../../../src/cluster/writer.ts';

test('the removeGate patch tests the resourceVersion and the gate at its index before removing that index', () => {
  assert.deepEqual(removeGatePatch('42', 'tollgate.io/gate', 1), [
    { op: 'test', path: '/metadata/resourceVersion', value: '42' },
    { op: 'test', path: '/spec/schedulingGates/1/name', value: 'tollgate.io/gate' },
    { op: 'remove', path: '/spec/schedulingGates/1' },
  ]);
  assert.throws(() => removeGatePatch('42', 'g', -1), /gateIndex must be a non-negative integer/);
});

test('the removeGate patch marks the pod released: into its annotations, or as its annotations when it has none', () => {
  const removal = removeGatePatch('42', 'tollgate.io/gate', 0).slice(0, 3);
  assert.deepEqual(removeGatePatch('42', 'tollgate.io/gate', 0, { annotationsPresent: true }), [
    ...removal,
    { op: 'add', path: '/metadata/annotations/tollgate.io~1released', value: 'tollgate.io/gate' },
  ]);
  assert.deepEqual(removeGatePatch('42', 'tollgate.io/gate', 0, { annotationsPresent: false }), [
    ...removal,
    {
      op: 'add',
      path: '/metadata/annotations',
      value: { 'tollgate.io/released': 'tollgate.io/gate' },
    },
  ]);
});

test('the resize patch carries the resourceVersion precondition, containers by name and pod-level resources', () => {
  assert.deepEqual(
    resizePatch('7', {
      type: 'resize',
      containers: [{ name: 'app', resources: { requests: { cpu: '250m' } } }],
      pod: { limits: { memory: '1Gi' } },
    }),
    {
      metadata: { resourceVersion: '7' },
      spec: {
        containers: [{ name: 'app', resources: { requests: { cpu: '250m' } } }],
        resources: { limits: { memory: '1Gi' } },
      },
    },
  );
});

test('only a causeless generic 422 counts as a JSON Patch that did not apply', () => {
  const cases: { name: string; error: unknown; expected: boolean }[] = [
    {
      name: 'the generic 422 the API server sends for a failed test is one',
      error: new KubeApiError(
        422,
        `x: 422 ${failedPatchTestMessage}`,
        'Invalid',
        failedPatchTestMessage,
      ),
      expected: true,
    },
    {
      name: 'a validation error with causes is not',
      error: new KubeApiError(422, 'x', 'Invalid', 'Pod "p" is invalid', [
        { reason: 'FieldValueForbidden', field: 'spec.schedulingGates[1].name' },
      ]),
      expected: false,
    },
    {
      name: 'a 409 is a conflict but not a failed patch test',
      error: new KubeApiError(409, 'x', 'Conflict', 'modified'),
      expected: false,
    },
    {
      name: 'a network error is not',
      error: Object.assign(new Error('fetch failed'), { code: 'ECONNREFUSED' }),
      expected: false,
    },
  ];
  for (const { name, error, expected } of cases)
    assert.equal(isFailedPatchTest(error), expected, name);
});

test('client errors are normalised: HTTP code and API message kept, network code lifted from the cause', () => {
  const api = toKubeError(
    Object.assign(new Error('HTTP-Code: 409\nMessage: Unsuccessful HTTP Request'), {
      code: 409,
      body: JSON.stringify({
        kind: 'Status',
        message: 'the object has been modified',
        reason: 'Conflict',
        details: {},
      }),
    }),
    'patch pod a/b',
  ) as KubeApiError;
  assert.equal(api.statusCode, 409);
  assert.equal(api.reason, 'Conflict');
  assert.equal(api.message, 'patch pod a/b: 409 the object has been modified');
  const network = toKubeError(
    new TypeError('fetch failed', {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
    }),
    'list pods',
  ) as Error & { code?: string };
  assert.equal(network.code, 'ECONNREFUSED');
  assert.equal((network as { statusCode?: number }).statusCode, undefined);
  const throttled = toKubeError(
    Object.assign(new Error('HTTP-Code: 429'), {
      code: 429,
      headers: { 'retry-after': '3' },
      body: {
        kind: 'Status',
        message: 'too many requests',
        reason: 'TooManyRequests',
        details: {},
      },
    }),
    'patch pod a/b',
  ) as KubeApiError;
  assert.equal(throttled.retryAfterSeconds, 3);
  const abort = new DOMException('stop', 'AbortError');
  assert.equal(toKubeError(abort, 'x'), abort);
});

interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/**
 * A stand-in API server over plain HTTP answering every request with `object` (and
 * `status`); its KubeConfig (token `token`), and what it received.
 */
async function apiServerAnswering(
  t: TestContext,
  object: unknown,
  status = 200,
  headers: Readonly<Record<string, string>> = {},
): Promise<KubeConfig & { received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      res.statusCode = status;
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(object));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return Object.assign(kubeConfig, { received });
}

/** A write of `op` on pod ns/p, decided at resourceVersion 41. */
const writeOf = (op: WriteRequest['op']): WriteRequest => ({
  key: 'ns/p',
  target: { namespace: 'ns', name: 'p', uid: 'uid-p', resourceVersion: '41' },
  op,
  priority: 0,
  tenant: 't',
  deadline: Number.MAX_SAFE_INTEGER,
  decisionId: 'd-p',
});

/** The error a write through this KubeConfig fails with (the test fails if it succeeds). */
async function failureOf<E>(kubeConfig: KubeConfig, request: WriteRequest): Promise<E> {
  return createWriteExecutor(kubeConfig)(request, new AbortController().signal).then(
    () => assert.fail(`the ${request.op.type} write fails`),
    (e: unknown) => e as E,
  );
}

const answeredPod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: 'p',
    namespace: 'ns',
    uid: 'uid-p',
    resourceVersion: '42',
    labels: { app: 'trainer' },
    managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1' }],
  },
  spec: { containers: [{ name: 'worker', image: 'trainer:1' }], schedulingGates: [] },
  status: { phase: 'Pending' },
};

const condition = {
  type: 'tollgate.io/Released',
  status: 'False',
  reason: 'BudgetExhausted',
  message: 'held by its budget',
  lastTransitionTime: '2026-01-01T00:00:00Z',
} as const;

/** An Event's fields besides its time (a MicroTime, sent with microseconds). */
const heldEvent = {
  metadata: { name: 'p.1', namespace: 'ns' },
  reason: 'Held',
  note: 'held by its budget',
  action: 'Hold',
  reportingController: 'tollgate.io/tollgate',
  reportingInstance: 'tollgate-0',
  type: 'Normal',
};

/** Each write as the API server receives it: method, path and query, media type, body. */
const writesAsReceived: readonly {
  readonly op: WriteRequest['op'];
  readonly method: string;
  readonly url: string;
  readonly contentType: string;
  readonly body: unknown;
}[] = [
  {
    op: { type: 'removeGate', gate: 'example.com/ready', gateIndex: 0 },
    method: 'PATCH',
    url: '/api/v1/namespaces/ns/pods/p?fieldManager=tollgate',
    contentType: 'application/json-patch+json',
    body: removeGatePatch('41', 'example.com/ready', 0),
  },
  {
    op: { type: 'annotate', annotations: { 'tollgate.io/review': 'x' } },
    method: 'PATCH',
    url: '/api/v1/namespaces/ns/pods/p?fieldManager=tollgate',
    contentType: 'application/merge-patch+json',
    body: { metadata: { resourceVersion: '41', annotations: { 'tollgate.io/review': 'x' } } },
  },
  {
    op: { type: 'resize', containers: [{ name: 'worker', resources: { requests: { cpu: '2' } } }] },
    method: 'PATCH',
    url: '/api/v1/namespaces/ns/pods/p/resize?fieldManager=tollgate',
    contentType: 'application/strategic-merge-patch+json',
    body: {
      metadata: { resourceVersion: '41' },
      spec: { containers: [{ name: 'worker', resources: { requests: { cpu: '2' } } }] },
    },
  },
  {
    op: { type: 'podCondition', condition },
    method: 'PATCH',
    url: '/api/v1/namespaces/ns/pods/p/status?fieldManager=tollgate',
    contentType: 'application/strategic-merge-patch+json',
    body: { status: { conditions: [condition] } },
  },
  {
    op: { type: 'delete', reason: 'expired' },
    method: 'DELETE',
    url: '/api/v1/namespaces/ns/pods/p',
    contentType: 'application/json',
    body: { preconditions: { uid: 'uid-p', resourceVersion: '41' } },
  },
  {
    op: {
      type: 'event',
      event: {
        action: 'create',
        body: { ...heldEvent, eventTime: new V1MicroTime('2026-01-01T00:00:05.250Z') },
      },
    },
    method: 'POST',
    url: '/apis/events.k8s.io/v1/namespaces/ns/events?fieldManager=tollgate',
    contentType: 'application/json',
    body: { ...heldEvent, eventTime: '2026-01-01T00:00:05.250000Z' },
  },
  {
    op: {
      type: 'event',
      event: { action: 'series', count: 3, lastObservedTime: '2026-01-01T00:00:05.250000Z' },
    },
    method: 'PATCH',
    url: '/apis/events.k8s.io/v1/namespaces/ns/events/p?fieldManager=tollgate',
    contentType: 'application/merge-patch+json',
    body: { series: { count: 3, lastObservedTime: '2026-01-01T00:00:05.250000Z' } },
  },
];

test('each write reaches the API server as one request: its method, path, media type, body and the credentials of the kubeconfig', async (t) => {
  const kubeConfig = await apiServerAnswering(t, answeredPod);
  const execute = createWriteExecutor(kubeConfig);
  const signal = new AbortController().signal;
  for (const expected of writesAsReceived) {
    assert.deepEqual(await execute(writeOf(expected.op), signal), { resourceVersion: '42' });
    const request = kubeConfig.received.at(-1)!;
    assert.equal(request.method, expected.method, expected.op.type);
    assert.equal(request.url, expected.url, expected.op.type);
    assert.equal(request.headers['content-type'], expected.contentType, expected.op.type);
    assert.equal(request.headers.authorization, 'Bearer token', expected.op.type);
    assert.equal(request.headers.accept, metadataAnswer, 'the metadata of the written object');
    assert.deepEqual(JSON.parse(request.body), expected.body, expected.op.type);
  }
  assert.equal(kubeConfig.received.length, writesAsReceived.length);
});

test("a write's answer is read for its resourceVersion alone: the client library builds no model of it", async (t) => {
  const serializerUrl = new URL(
    '../../../node_modules/@kubernetes/client-node/dist/gen/models/ObjectSerializer.js',
    import.meta.url,
  );
  const { ObjectSerializer } = (await import(serializerUrl.href)) as {
    ObjectSerializer: { deserialize(data: unknown, type: string, format: string): unknown };
  };
  const built = t.mock.method(ObjectSerializer, 'deserialize');
  const kubeConfig = await apiServerAnswering(t, answeredPod);
  const execute = createWriteExecutor(kubeConfig);
  for (const { op } of writesAsReceived) await execute(writeOf(op), new AbortController().signal);
  assert.equal(built.mock.callCount(), 0);
});

test('an answer without a resourceVersion (a delete answered with a Status) reads as none', () => {
  assert.equal(
    answeredResourceVersion('{"kind":"Status","metadata":{},"status":"Success"}'),
    undefined,
  );
  assert.equal(answeredResourceVersion('null'), undefined);
  assert.equal(answeredResourceVersion('{"metadata":{"resourceVersion":"7","name":"p"}}'), '7');
});

test('a delete answered with a Status succeeds without a resourceVersion; another write answered so fails, naming the pod', async (t) => {
  const kubeConfig = await apiServerAnswering(t, {
    kind: 'Status',
    status: 'Success',
    metadata: {},
  });
  const execute = createWriteExecutor(kubeConfig);
  const signal = new AbortController().signal;
  assert.deepEqual(await execute(writeOf({ type: 'delete', reason: 'expired' }), signal), {
    resourceVersion: '',
  });
  await assert.rejects(
    execute(writeOf({ type: 'annotate', annotations: { a: 'b' } }), signal),
    /annotate pod ns\/p: the API answered without metadata.resourceVersion/,
  );
});

test("an API server's refusal is thrown as a KubeApiError naming the write: status, reason, message, causes, Retry-After", async (t) => {
  const refusal = {
    kind: 'Status',
    status: 'Failure',
    message: 'too many requests',
    reason: 'TooManyRequests',
    code: 429,
    details: { causes: [{ reason: 'Throttled', message: 'slow down' }] },
  };
  const kubeConfig = await apiServerAnswering(t, refusal, 429, { 'retry-after': '4' });
  const error = await failureOf<unknown>(kubeConfig, writeOf({ type: 'podCondition', condition }));
  assert.ok(error instanceof KubeApiError, String(error));
  assert.equal(error.statusCode, 429);
  assert.equal(error.reason, 'TooManyRequests');
  assert.equal(error.apiMessage, 'too many requests');
  assert.equal(error.message, 'podCondition pod ns/p: 429 too many requests');
  assert.deepEqual(error.causes, [{ reason: 'Throttled', message: 'slow down' }]);
  assert.equal(error.retryAfterSeconds, 4);
  assert.equal((error as KubeApiError & { conflict: boolean }).conflict, false);
});

test('a JSON Patch whose test fails is a conflict; a 409 to any write is too', async (t) => {
  const failedTest = {
    kind: 'Status',
    status: 'Failure',
    message: failedPatchTestMessage,
    reason: 'Invalid',
    code: 422,
    details: {},
  };
  const patchRefused = await apiServerAnswering(t, failedTest, 422);
  const removal = await failureOf<KubeApiError & { conflict: boolean }>(
    patchRefused,
    writeOf({ type: 'removeGate', gate: 'example.com/ready', gateIndex: 0 }),
  );
  assert.equal(removal.statusCode, 422);
  assert.equal(removal.conflict, true);
  const conflicted = await apiServerAnswering(
    t,
    {
      kind: 'Status',
      status: 'Failure',
      message: 'the object has been modified',
      reason: 'Conflict',
      code: 409,
    },
    409,
  );
  const resize = await failureOf<KubeApiError & { conflict: boolean }>(
    conflicted,
    writeOf({
      type: 'resize',
      containers: [{ name: 'worker', resources: { requests: { cpu: '2' } } }],
    }),
  );
  assert.equal(resize.statusCode, 409);
  assert.equal(resize.conflict, true);
});

test('a server that cannot be reached fails the write with the network code; an aborted write with its reason', async (t) => {
  const kubeConfig = await apiServerAnswering(t, answeredPod);
  const reachable = kubeConfig.getCurrentCluster()!.server;
  const closed = new KubeConfig();
  closed.loadFromOptions({
    clusters: [{ name: 'c', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  const unreachable = await failureOf<Error & { code?: string }>(
    closed,
    writeOf({ type: 'podCondition', condition }),
  );
  assert.equal(unreachable.code, 'ECONNREFUSED');
  assert.match(unreachable.message, /^podCondition pod ns\/p: /);
  const controller = new AbortController();
  const reason = new Error('deadline passed');
  controller.abort(reason);
  await assert.rejects(
    createWriteExecutor(kubeConfig)(
      writeOf({ type: 'podCondition', condition }),
      controller.signal,
    ),
    (error) => error === reason,
  );
  assert.ok(reachable.startsWith('http://127.0.0.1:'));
});

test("the read-back judges the whole pod it reads, not a write's cut answer", async (t) => {
  const released = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'ns', uid: 'uid-p', resourceVersion: '43' },
    spec: { containers: [{ name: 'worker', image: 'trainer:1' }], schedulingGates: [] },
  };
  const kubeConfig = await apiServerAnswering(t, released);
  const verdict = await createReadBack(kubeConfig)(
    writeOf({ type: 'removeGate', gate: 'example.com/ready', gateIndex: 0 }),
    new AbortController().signal,
  );
  assert.deepEqual(verdict, { state: 'applied', resourceVersion: '43' });
});
