/**
 * An HTTPS proxy in front of kube-apiserver that can hold a write in flight, so an e2e
 * decides by count, not by timing, what is in flight when something else happens:
 *
 * - `request`: the write is taken and never forwarded (in flight, not sent);
 * - `answer`: the write is forwarded and applied by the API server, its answer kept from
 *   the client (in flight, applied, answer lost);
 * - `pass`: forwarded and answered.
 *
 * Each write (any method but GET) takes the next mode of its plan, in arrival order;
 * reads always pass (read-backs, lists). A held write stays held until its client gives
 * up on it; it is never released late. The proxy serves the API server's own serving
 * certificate (control-plane.ts writes it to `<root>/certs`), so a kubeconfig of the
 * control plane verifies it unchanged but for the server address.
 */
import { readFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

export type HoldMode = 'pass' | 'request' | 'answer';

export interface ProxiedWrite {
  readonly method: string;
  readonly path: string;
  readonly mode: HoldMode;
  /** The API server's status code, once it answered (never for `request`). */
  upstreamStatus?: number;
  /** The client gave up on it (aborted) before it was answered. */
  abandoned: boolean;
}

export interface HoldingProxy {
  readonly url: string;
  /** Every write that reached the proxy, in arrival order. */
  readonly writes: readonly ProxiedWrite[];
  /** The modes of the next writes, in order; after them, `then`. */
  plan(modes: readonly HoldMode[], then?: HoldMode): void;
  /** A copy of `kubeConfig` (of this control plane) that talks through the proxy. */
  kubeConfigFor(kubeConfig: KubeConfig): KubeConfig;
  close(): Promise<void>;
}

/** `kubeconfigPath`: any kubeconfig the control plane wrote (its folder holds `certs/`). */
export async function startHoldingProxy(
  upstream: string,
  kubeconfigPath: string,
): Promise<HoldingProxy> {
  const certs = join(dirname(kubeconfigPath), 'certs');
  const ca = readFileSync(join(certs, 'apiserver.crt'));
  const target = new URL(upstream);
  const writes: ProxiedWrite[] = [];
  let planned: HoldMode[] = [];
  let then: HoldMode = 'pass';
  const server: Server = createServer(
    { cert: ca, key: readFileSync(join(certs, 'apiserver.key')) },
    (req, res) => {
      const write: ProxiedWrite | undefined =
        req.method === 'GET'
          ? undefined
          : {
              method: req.method ?? '',
              path: req.url ?? '',
              mode: planned.shift() ?? then,
              abandoned: false,
            };
      if (write) writes.push(write);
      res.on('close', () => {
        if (write && !res.writableEnded) write.abandoned = true;
      });
      if (write?.mode === 'request') return; // taken, never forwarded
      const forwarded = request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: target.host },
          ca,
        },
        (answer) => {
          if (write) write.upstreamStatus = answer.statusCode;
          if (write?.mode === 'answer') {
            answer.resume(); // applied; the answer never reaches the client
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forwarded.on('error', () => res.destroy());
      req.pipe(forwarded);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    writes,
    plan(modes, next = 'pass') {
      planned = [...modes];
      then = next;
    },
    kubeConfigFor(kubeConfig) {
      const proxied = new KubeConfig();
      proxied.loadFromOptions({
        clusters: kubeConfig.clusters.map((cluster) => ({ ...cluster, server: url })),
        users: kubeConfig.users,
        contexts: kubeConfig.contexts,
        currentContext: kubeConfig.currentContext,
      });
      return proxied;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
