import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiError, toKubeError } from '../../../src/cluster/errors.ts';
import type { WriteRequest } from '../../../src/dispatch/types.ts';
import {
  createReadBack,
  createWriteExecutor,
  failedPatchTestMessage,
  leanAnswer,
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

/** A stand-in API server over plain HTTP answering every request with `object`; its KubeConfig. */
async function apiServerAnswering(t: TestContext, object: unknown): Promise<KubeConfig> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
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
  return kubeConfig;
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

test("a write's answer reaches the client library's model builder as its resourceVersion alone, not the whole pod", async (t) => {
  const serializerUrl = new URL(
    '../../../node_modules/@kubernetes/client-node/dist/gen/models/ObjectSerializer.js',
    import.meta.url,
  );
  const { ObjectSerializer } = (await import(serializerUrl.href)) as {
    ObjectSerializer: { deserialize(data: unknown, type: string, format: string): unknown };
  };
  const built = t.mock.method(ObjectSerializer, 'deserialize');
  const pod = {
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
  const kubeConfig = await apiServerAnswering(t, pod);
  const execute = createWriteExecutor(kubeConfig);
  const signal = new AbortController().signal;
  const ops: WriteRequest['op'][] = [
    { type: 'removeGate', gate: 'example.com/ready', gateIndex: 0 },
    { type: 'annotate', annotations: { 'tollgate.io/review': 'x' } },
    { type: 'delete', reason: 'expired' },
  ];
  for (const op of ops)
    assert.deepEqual(await execute(writeOf(op), signal), { resourceVersion: '42' }, op.type);
  const podsBuilt = built.mock.calls.filter((call) => call.arguments[1] === 'V1Pod');
  assert.equal(podsBuilt.length, 3);
  for (const call of podsBuilt)
    assert.deepEqual(call.arguments[0], { metadata: { resourceVersion: '42' } });
});

test('an answer without a resourceVersion (a delete answered with a Status) is cut to nothing', () => {
  assert.equal(leanAnswer('{"kind":"Status","metadata":{},"status":"Success"}'), '{}');
  assert.equal(leanAnswer('null'), '{}');
  assert.equal(
    leanAnswer('{"metadata":{"resourceVersion":"7","name":"p"}}'),
    '{"metadata":{"resourceVersion":"7"}}',
  );
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
