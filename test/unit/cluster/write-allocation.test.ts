// What one API write allocates: a leader that holds 10,000 fresh pods writes each one's
// tollgate.io/Released condition within minutes, and with the image's small young
// generation what a write keeps alive until its answer is read is promoted to the old
// generation and resident until a memory-reducing collection. Bytes, not time: counted by
// V8's sampling heap profiler over a thousand writes after a thousand warm ones, answered
// by a stand-in API server in a child process (so its own allocations are not counted)
// with a pod of about 4 KB, as the API server answers a pods/status patch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { reuseConnections } from '../../../src/cluster/client.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import type { WriteRequest } from '../../../src/dispatch/types.ts';
import { bytesAllocatedBy } from '../../support/allocated-bytes.ts';

/**
 * Per write: the answer's text and what reads its resourceVersion are about 6 KB of it
 * (26 to 28 KB measured in all; 90 KB when each write went through the client library's
 * generated API and the fetch API).
 */
const bytesPerWriteLimit = 40_000;

const server = `
const pod = JSON.stringify({
  apiVersion: 'v1', kind: 'Pod',
  metadata: { name: 'p', namespace: 'ns', uid: 'u', resourceVersion: '42',
    labels: { app: 'a'.repeat(40) }, annotations: { note: 'n'.repeat(800) } },
  spec: { containers: [{ name: 'c', image: 'i'.repeat(60), resources: { requests: { cpu: '1' } } }] },
  status: { phase: 'Pending', conditions: [{ type: 'tollgate.io/Released', status: 'False', reason: 'Held', message: 'm'.repeat(120) }] },
}) + ' '.repeat(3000);
const s = require('node:http').createServer((q, r) => {
  q.resume();
  q.on('end', () => { r.setHeader('content-type', 'application/json'); r.end(pod); });
});
s.listen(0, '127.0.0.1', () => console.log(s.address().port));
`;

const conditionWrite = (i: number): WriteRequest => ({
  key: `ns/p${i}#tollgate.io/Released`,
  target: { namespace: 'ns', name: `p${i}`, uid: `u${i}`, resourceVersion: '41' },
  op: {
    type: 'podCondition',
    condition: {
      type: 'tollgate.io/Released',
      status: 'False',
      reason: 'BudgetExhausted',
      message: 'held by its budget',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    },
  },
  priority: -1_000_001,
  band: 'background',
  tenant: 'ns',
  deadline: Number.MAX_SAFE_INTEGER,
  decisionId: `d${i}`,
});

test(`a pods/status write allocates under ${bytesPerWriteLimit / 1000} KB`, async (t) => {
  const child = spawn(process.execPath, ['-e', server], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.kill());
  const [portLine] = (await once(child.stdout, 'data')) as [Buffer];
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [
      { name: 'c', server: `http://127.0.0.1:${String(portLine).trim()}`, skipTLSVerify: true },
    ],
    users: [{ name: 'u', token: 'token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  reuseConnections(kubeConfig);
  const execute = createWriteExecutor(kubeConfig, { fence: () => true });
  const signal = new AbortController().signal;
  /** Writes from..from+count, four at a time, as the Released conditions are sent. */
  const writes = async (from: number, count: number): Promise<void> => {
    for (let i = from; i < from + count; i += 4)
      await Promise.all([0, 1, 2, 3].map((k) => execute(conditionWrite(i + k), signal)));
  };
  await writes(0, 1000);
  const bytes = await bytesAllocatedBy(() => writes(1000, 1000));
  const perWrite = bytes / 1000;
  assert.ok(perWrite < bytesPerWriteLimit, `${perWrite.toFixed(0)} bytes per write`);
});
