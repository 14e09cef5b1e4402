/**
 * A TCP proxy that adds a round-trip time in front of a local server (the benches' Git
 * server), as a hosted Git service far from the cluster would have: every chunk, in either
 * direction, arrives half the round trip after it was sent, in order (chunks in flight
 * overlap: a large push is not slowed chunk by chunk), and a new connection carries data
 * one round trip after it opened (the TCP handshake). So each HTTP request and answer
 * exchange takes `rttMs` more, and one on a new connection `2 x rttMs` more.
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface DelayProxy {
  /** The upstream URL with the proxy's host and port (same scheme and path). */
  readonly url: string;
  /** Connections opened through the proxy so far. */
  readonly connections: number;
  /** `url`'s origin put in place of the upstream's in `upstreamUrl` (a repository's URL, say). */
  delayed(upstreamUrl: string): string;
  close(): Promise<void>;
}

export async function startDelayProxy(upstream: string, rttMs: number): Promise<DelayProxy> {
  const target = new URL(upstream);
  const oneWay = rttMs / 2;
  const open = new Set<Socket>();
  let connections = 0;
  const server = createServer((client) => {
    connections += 1;
    const openedAt = performance.now();
    const server = connect(Number(target.port), target.hostname);
    for (const socket of [client, server]) open.add(socket);
    const drop = (): void => {
      for (const socket of [client, server]) {
        open.delete(socket);
        socket.destroy();
      }
    };
    client.on('error', drop).on('close', drop);
    server.on('error', drop).on('close', drop);
    // The client's first bytes wait for the handshake's round trip.
    delayInto(client, server, () => Math.max(0, openedAt + rttMs - performance.now()) + oneWay);
    delayInto(server, client, () => oneWay);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `${target.protocol}//127.0.0.1:${port}`;
  return {
    url: `${origin}${target.pathname === '/' ? '' : target.pathname}`,
    get connections() {
      return connections;
    },
    delayed(upstreamUrl: string): string {
      const url = new URL(upstreamUrl);
      if (url.origin !== target.origin) throw new Error(`${upstreamUrl} is not on ${upstream}`);
      return `${origin}${url.pathname}${url.search}`;
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Every chunk from `from` written to `to` after `delayMs()`, in order: a queue per
 * direction, each entry due no earlier than the one before, served by one timer.
 */
function delayInto(from: Socket, to: Socket, delayMs: () => number): void {
  const queue: { due: number; write: () => void }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const serve = (): void => {
    timer = undefined;
    while (queue.length > 0 && (queue[0] as { due: number }).due <= performance.now())
      (queue.shift() as { write: () => void }).write();
    if (queue.length > 0) arm();
  };
  const arm = (): void => {
    const wait = (queue[0] as { due: number }).due - performance.now();
    timer = setTimeout(serve, Math.max(0, Math.ceil(wait)));
  };
  const later = (write: () => void): void => {
    const last = queue.at(-1)?.due ?? 0;
    queue.push({ due: Math.max(last, performance.now() + delayMs()), write });
    if (timer === undefined) arm();
  };
  from.on('data', (chunk: Buffer) => later(() => void (to.writable && to.write(chunk))));
  from.on('end', () => later(() => void to.end()));
}
