/**
 * A stand-in API server over plain HTTP that holds its answer to pod `held` until told,
 * and a KubeConfig whose requests share one pool of a single connection: a second write
 * then waits in the pool for that connection, not yet written to it, for as long as the
 * test decides (test/unit/cluster/write-fence.test.ts, test/unit/dispatch/run-writes.test.ts).
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { Agent } from 'undici';

export interface Seen {
  readonly method: string;
  readonly path: string;
}

export async function holdingApiServer(): Promise<{
  url: string;
  seen: Seen[];
  /** Answers the requests held so far (those for pod `held`). */
  answerHeld: () => void;
  close: () => Promise<void>;
}> {
  const seen: Seen[] = [];
  const held: ServerResponse[] = [];
  const pod = (name: string): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'ns', resourceVersion: '2' },
    });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '' });
      res.setHeader('content-type', 'application/json');
      const name = /pods\/([^/?]+)/.exec(req.url ?? '')?.[1] ?? '?';
      if (name === 'held') held.push(res);
      else res.end(pod(name));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    answerHeld: () => {
      for (const res of held.splice(0)) res.end(pod('held'));
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A KubeConfig of that server whose requests share one pool of a single connection. */
export function oneConnection(url: string): { kubeConfig: KubeConfig; agent: Agent } {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  const agent = new Agent({ connections: 1 });
  (kubeConfig as unknown as { createDispatcher: () => unknown }).createDispatcher = () => agent;
  return { kubeConfig, agent };
}

/** Requests of this origin waiting in the pool for a connection (queued, not written). */
export function waiting(agent: Agent, url: string): number {
  const stats = (agent.stats as Record<string, { queued?: number; pending?: number }>)[url];
  return stats?.queued ?? stats?.pending ?? 0;
}

/** Turns of the event loop until `condition` holds (a count, never a wall-clock wait). */
export async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++)
    await new Promise((resolve) => setImmediate(resolve));
  assert.ok(condition(), `never: ${what}`);
}
