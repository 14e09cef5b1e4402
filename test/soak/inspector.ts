/**
 * The live heap of a replica, read through its V8 inspector (the replica is started with
 * `--inspect=127.0.0.1:<port>`): a full collection (`HeapProfiler.collectGarbage`), then
 * `Runtime.getHeapUsage`'s `usedSize`, what stays reachable. nodejs_heap_size_used_bytes
 * counts old-space garbage not yet collected, and after a load peak V8 raises its
 * next-collection limit, so that figure stays high while fewer objects live.
 *
 * Everything runs under one deadline: a replica paused (SIGSTOP) still accepts the TCP
 * connection (the kernel does) but never answers, and the soak's sampler must not hang
 * on it. Any failure is NaN: the replica could not answer.
 */

interface Target {
  readonly webSocketDebuggerUrl?: string;
}

interface Reply {
  readonly id?: number;
  readonly result?: Record<string, unknown>;
  readonly error?: { readonly message: string };
}

/** The protocol's methods, sent in order on one session; the last one's result. */
function converse(
  url: string,
  methods: readonly string[],
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    let next = 0;
    const finish = (error: Error | undefined, result?: Record<string, unknown>): void => {
      signal.removeEventListener('abort', abort);
      socket.close();
      if (error) reject(error);
      else resolve(result!);
    };
    const abort = (): void => finish(new Error(`inspector: no answer (${String(signal.reason)})`));
    const send = (): void => socket.send(JSON.stringify({ id: next + 1, method: methods[next] }));
    signal.addEventListener('abort', abort, { once: true });
    socket.addEventListener('open', send);
    socket.addEventListener('error', () => finish(new Error('inspector: socket error')));
    socket.addEventListener('message', (event: MessageEvent) => {
      const reply = JSON.parse(String(event.data)) as Reply;
      if (reply.id !== next + 1) return; // an event, not the answer
      if (reply.error) return finish(new Error(`inspector: ${reply.error.message}`));
      next += 1;
      if (next === methods.length) finish(undefined, reply.result ?? {});
      else send();
    });
  });
}

/** Bytes live on the heap after a full collection, or NaN when the replica cannot answer. */
export async function liveHeapBytes(port: number, timeoutMs = 5_000): Promise<number> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const list = await fetch(`http://127.0.0.1:${port}/json/list`, { signal });
    const targets = (await list.json()) as Target[];
    const url = targets[0]?.webSocketDebuggerUrl;
    if (url === undefined) return Number.NaN;
    const usage = await converse(
      url,
      ['HeapProfiler.collectGarbage', 'Runtime.getHeapUsage'],
      signal,
    );
    return typeof usage.usedSize === 'number' ? usage.usedSize : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
