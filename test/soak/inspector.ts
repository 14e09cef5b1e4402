/**
 * The live heap of a replica, read through its V8 inspector (the replica is started with
 * `--inspect=127.0.0.1:<port>`): a full collection (`HeapProfiler.collectGarbage`), then
 * `Runtime.getHeapUsage`'s `usedSize`, what stays reachable. nodejs_heap_size_used_bytes
 * counts old-space garbage not yet collected, and after a load peak V8 raises its
 * next-collection limit, so that figure stays high while fewer objects live.
 *
 * The same reading tells how much of it is V8's compiled code: the used size of the
 * heap spaces that hold bytecode and machine code (`codeSpaces`), read from
 * `v8.getHeapSpaceStatistics()` in the replica right after the collection.
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

interface Call {
  readonly method: string;
  readonly params?: Record<string, unknown>;
}

/** The protocol's calls, sent in order on one session; the last one's result. */
function converse(
  url: string,
  methods: readonly (string | Call)[],
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
    const send = (): void => {
      const call = methods[next]!;
      socket.send(
        JSON.stringify({ id: next + 1, ...(typeof call === 'string' ? { method: call } : call) }),
      );
    };
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

/**
 * The heap spaces of V8's compiled code: machine code, and bytecode with the other trusted
 * objects that describe code. They grow as a process runs code paths for the first time
 * (a first term start, a first leftover rebuild, a function optimized again), bounded by
 * the program: tollgate generates no code at run time (its schema validators are
 * compiled at build time, src/policy/generated).
 */
export const codeSpaces = [
  'code_space',
  'code_large_object_space',
  'trusted_space',
  'trusted_large_object_space',
] as const;

/** What a reading after a full collection found (NaN: the replica could not answer). */
export interface LiveHeap {
  /** Bytes live on the whole heap (`Runtime.getHeapUsage`'s usedSize). */
  readonly liveBytes: number;
  /** Of them, bytes in the heap spaces of compiled code (`codeSpaces`). */
  readonly codeBytes: number;
}

const unanswered: LiveHeap = { liveBytes: Number.NaN, codeBytes: Number.NaN };

/** The code spaces' used bytes, from the JSON of `[space_name, space_used_size]` pairs. */
export function codeBytesOf(spacesJson: unknown): number {
  if (typeof spacesJson !== 'string') return Number.NaN;
  const spaces = new Map(JSON.parse(spacesJson) as [string, number][]);
  return codeSpaces.reduce((sum, name) => sum + (spaces.get(name) ?? 0), 0);
}

const spacesExpression =
  "JSON.stringify(process.getBuiltinModule('node:v8').getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]))";

/**
 * Bytes live on the heap after a full collection and how many of them are compiled code,
 * or NaN when the replica cannot answer.
 */
export async function liveHeap(port: number, timeoutMs = 5_000): Promise<LiveHeap> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const list = await fetch(`http://127.0.0.1:${port}/json/list`, { signal });
    const targets = (await list.json()) as Target[];
    const url = targets[0]?.webSocketDebuggerUrl;
    if (url === undefined) return unanswered;
    const usage = await converse(
      url,
      ['HeapProfiler.collectGarbage', 'Runtime.getHeapUsage'],
      signal,
    );
    const spaces = await converse(
      url,
      [
        {
          method: 'Runtime.evaluate',
          params: { expression: spacesExpression, returnByValue: true },
        },
      ],
      signal,
    );
    const value = (spaces.result as { value?: unknown } | undefined)?.value;
    return {
      liveBytes: typeof usage.usedSize === 'number' ? usage.usedSize : Number.NaN,
      codeBytes: codeBytesOf(value),
    };
  } catch {
    return unanswered;
  }
}
