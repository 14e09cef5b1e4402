/**
 * A TCP proxy in front of a real server (the Git server, Prometheus), so the soak can take
 * the server away from tollgate without touching it: `down` resets every open connection
 * and every new one (a server that died), `slow` holds each chunk the client sends for
 * `delayMs` before passing it on (seconds per push), `up` passes everything through.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export type ProxyMode = { kind: 'up' } | { kind: 'down' } | { kind: 'slow'; delayMs: number };

export interface FaultyProxy {
  /** http://127.0.0.1:PORT: the upstream's URL with the proxy's host. */
  readonly url: string;
  mode: ProxyMode;
  /** Connections refused or reset while down. */
  readonly refused: number;
  close(): Promise<void>;
}

export async function startProxy(upstream: string): Promise<FaultyProxy> {
  const target = new URL(upstream);
  const open = new Set<Socket>();
  let refused = 0;
  const proxy = {
    mode: { kind: 'up' } as ProxyMode,
  };
  const server: Server = createServer((client) => {
    if (proxy.mode.kind === 'down') {
      refused += 1;
      client.resetAndDestroy();
      return;
    }
    const upstreamSocket = connect(Number(target.port), target.hostname);
    open.add(client);
    open.add(upstreamSocket);
    const drop = (): void => {
      open.delete(client);
      open.delete(upstreamSocket);
      client.destroy();
      upstreamSocket.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstreamSocket.on('error', drop).on('close', drop);
    upstreamSocket.pipe(client);
    void forward(client, upstreamSocket, () => proxy.mode);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${target.protocol}//127.0.0.1:${port}`,
    get mode() {
      return proxy.mode;
    },
    set mode(mode: ProxyMode) {
      proxy.mode = mode;
      if (mode.kind === 'down')
        for (const socket of open) {
          refused += 1;
          socket.destroy();
        }
    },
    get refused() {
      return refused;
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Client to upstream, chunk by chunk, each held back while the proxy is slow. */
async function forward(client: Socket, upstream: Socket, mode: () => ProxyMode): Promise<void> {
  try {
    for await (const chunk of client) {
      const now = mode();
      if (now.kind === 'slow') await sleep(now.delayMs);
      if (!upstream.write(chunk as Buffer))
        await new Promise((resolve) => upstream.once('drain', resolve));
    }
    upstream.end();
  } catch {
    upstream.destroy();
  }
}
