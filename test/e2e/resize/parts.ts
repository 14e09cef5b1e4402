/**
 * Adapters from the resize e2e to the shared parts: the dispatcher (src/dispatch/queue.ts)
 * and the Prometheus harness (test/support/prometheus.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher, WriteExecutor, WriteResult } from '../../../src/dispatch/types.ts';

export interface TestPrometheus {
  /** Base URL of the Prometheus HTTP API. */
  readonly url: string;
  /** Sets a gauge the exporter serves, e.g. set('tollgate_test_queue_length', { namespace, pod }, 120). */
  set(metric: string, labels: Record<string, string>, value: number): void;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function escape(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** Debian's prometheus scraping a small exporter every 500 ms. */
export async function startPrometheusForTest(): Promise<TestPrometheus> {
  const values = new Map<
    string,
    { metric: string; labels: Record<string, string>; value: number }
  >();
  const exporter: Server = createServer((_req, res) => {
    const lines: string[] = [];
    for (const { metric, labels, value } of values.values()) {
      const text = Object.entries(labels)
        .map(([k, v]) => `${k}="${escape(v)}"`)
        .join(',');
      lines.push(`${metric}{${text}} ${value}`);
    }
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(lines.join('\n') + '\n');
  });
  await new Promise<void>((resolve) => exporter.listen(0, '127.0.0.1', resolve));
  const exporterPort = (exporter.address() as AddressInfo).port;
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-resize-prom-'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      '  scrape_interval: 500ms',
      '  scrape_timeout: 400ms',
      'scrape_configs:',
      '  - job_name: exporter',
      '    honor_labels: true',
      '    static_configs:',
      `      - targets: ['127.0.0.1:${exporterPort}']`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i += 1) {
    if (child.exitCode !== null) throw new Error(`prometheus exited: ${stderr}`);
    try {
      const res = await fetch(`${url}/-/ready`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (i > 200) throw new Error(`prometheus not ready after 20 s: ${stderr}`);
    await sleep(100);
  }
  return {
    url,
    set(metric, labels, value) {
      values.set(`${metric}|${JSON.stringify(Object.entries(labels).sort())}`, {
        metric,
        labels,
        value,
      });
    },
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) =>
        child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve),
      );
      await new Promise((resolve) => exporter.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The real dispatcher over the real write executor. Until src/dispatch/queue.ts exists a
 * plain in-order stand-in is used and says so on stderr: the resize e2e is not proof
 * of the dispatcher, only of the resize loop against the real API.
 */
export async function createDispatcherForTest(executor: WriteExecutor): Promise<Dispatcher> {
  let queue: Record<string, unknown> | undefined;
  try {
    queue = (await import('../../../src/dispatch/queue.ts')) as Record<string, unknown>;
  } catch {
    queue = undefined;
  }
  const factory =
    queue &&
    ((queue.createDispatcher ?? queue.startDispatcher) as
      ((options: Record<string, unknown>) => Dispatcher) | undefined);
  if (factory) return factory({ executor, capacity: 1000, concurrency: 4 });
  process.stderr.write(
    '[resize e2e] src/dispatch/queue.ts not available: using an in-order stand-in dispatcher\n',
  );
  return inOrderDispatcher(executor);
}

function inOrderDispatcher(executor: WriteExecutor): Dispatcher {
  let tail: Promise<unknown> = Promise.resolve();
  let closed = false;
  const abort = new AbortController();
  return {
    enqueue(request) {
      if (closed) return { accepted: false, reason: 'closed' };
      const done: Promise<WriteResult> = tail.then(async () => {
        if (Date.now() > request.deadline)
          return { result: 'expired', message: 'deadline passed' } as const;
        try {
          const { resourceVersion } = await executor(request, abort.signal);
          return { result: 'succeeded', resourceVersion } as const;
        } catch (error) {
          const e = error as { conflict?: boolean; statusCode?: number; message?: string };
          if (e.conflict || e.statusCode === 409)
            return { result: 'conflict', message: String(e.message) } as const;
          return {
            result: 'failed',
            ...(e.statusCode ? { code: e.statusCode } : {}),
            message: String(e.message),
          } as const;
        }
      });
      tail = done;
      return { accepted: true, coalesced: false, done };
    },
    whenNotFull: async () => undefined,
    cancel: () => undefined,
    get depth() {
      return 0;
    },
    async close() {
      closed = true;
      await tail.catch(() => undefined);
      abort.abort();
    },
  };
}
