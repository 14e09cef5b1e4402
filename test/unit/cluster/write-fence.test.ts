/**
 * The fence at the wire: a write the dispatcher let through while the term was open must
 * not reach the API server if the term has closed by the time its request is written to
 * a connection. Between the dispatcher's fence check and the socket, a request waits for
 * a connection (the pool's, a TCP connect, a TLS handshake); a leader paused there
 * (SIGSTOP, CPU starvation) and resumed past its lease runs that I/O before its lease
 * loop notices the term is over, so only a check at the moment of writing keeps it out.
 *
 * Here the wait is the pool's: one connection, held by a first request the server has not
 * answered; the second write waits for it, its fence closes, then the server answers the
 * first. A plain HTTP server stands in for the API server (what matters is what reaches it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWriteExecutor, isFencedBeforeSend } from '../../../src/cluster/writer.ts';
import type { WriteRequest } from '../../../src/dispatch/types.ts';
import { holdingApiServer, oneConnection, until, waiting } from '../../support/held-connection.ts';

const removeGate = (name: string): WriteRequest => ({
  key: `ns/${name}`,
  target: { namespace: 'ns', name, uid: `uid-${name}`, resourceVersion: '1' },
  op: { type: 'removeGate', gate: 'example.com/ready', gateIndex: 0 },
  priority: 0,
  tenant: 't',
  deadline: Number.MAX_SAFE_INTEGER,
  decisionId: `d-${name}`,
});

test('a write waiting for a connection when its fence closes is never sent, and says so', async () => {
  const server = await holdingApiServer();
  const { kubeConfig, agent } = oneConnection(server.url);
  let termOpen = true;
  const execute = createWriteExecutor(kubeConfig, { fence: () => termOpen });
  const signal = new AbortController().signal;
  try {
    const first = execute(removeGate('held'), signal);
    await until('the first write reaches the server', () => server.seen.length === 1);
    const second = execute(removeGate('waiting'), signal).then(
      () => undefined,
      (error: unknown) => error,
    );
    await until('the second waits for the connection', () => waiting(agent, server.url) === 1);
    termOpen = false; // the term ends while the second waits for the connection
    server.answerHeld();
    await first; // sent while the term was open: it stands
    const error = await second;
    assert.deepEqual(
      server.seen.map((s) => s.path.replace(/\?.*/, '')),
      ['/api/v1/namespaces/ns/pods/held'],
      'only the write sent while the term was open reached the server',
    );
    assert.ok(error instanceof Error, 'the fenced write fails');
    assert.ok(isFencedBeforeSend(error), `named as fenced before send: ${String(error)}`);
    assert.match(error.message, /leadership lost.*never sent/);
  } finally {
    await agent.close();
    await server.close();
  }
});

test('with the fence open, writes queued for the one connection are all sent', async () => {
  const server = await holdingApiServer();
  const { kubeConfig, agent } = oneConnection(server.url);
  const execute = createWriteExecutor(kubeConfig, { fence: () => true });
  const signal = new AbortController().signal;
  try {
    const first = execute(removeGate('held'), signal);
    await until('the first write reaches the server', () => server.seen.length === 1);
    const second = execute(removeGate('waiting'), signal);
    await until('the second waits for the connection', () => waiting(agent, server.url) === 1);
    server.answerHeld();
    await Promise.all([first, second]);
    assert.equal(server.seen.length, 2);
  } finally {
    await agent.close();
    await server.close();
  }
});
