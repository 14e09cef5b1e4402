/**
 * A TCP proxy in front of a real server that a test can take down and bring back on the
 * same port: down, connections are refused (ECONNREFUSED, as for a server that is not
 * running) and open ones are cut; up, it forwards again. What a client sees of a Git
 * server (or any server) that goes away and comes back, without touching the server.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface SwitchableProxy {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  via(url: string): string;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startSwitchableProxy(target: string): Promise<SwitchableProxy> {
  const to = new URL(target);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async (): Promise<void> => {
    const next = createServer((client) => {
      const upstream = connect(Number(to.port), to.hostname);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => next.listen(port, '127.0.0.1', resolve));
    port = (next.address() as { port: number }).port;
    server = next;
  };
  const down = async (): Promise<void> => {
    const closing = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
  };
  await listen();
  return {
    get port() {
      return port;
    },
    via: (url) => {
      const parsed = new URL(url);
      parsed.host = `127.0.0.1:${port}`;
      return parsed.toString();
    },
    down,
    up: async () => {
      if (!server) await listen();
    },
    close: down,
  };
}
