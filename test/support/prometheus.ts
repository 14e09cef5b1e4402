/**
 * A real Prometheus for tests: Debian's `prometheus` binary (apt-get install prometheus)
 * with a temp config and data folder, scraping a small in-process exporter whose
 * per-pod series the test sets:
 *
 *   const prom = await startPrometheus();
 *   prom.exporter.set('queue_length', { namespace: 'team-a', pod: 'api-0' }, 42);
 *   await waitForSeries(prom.url, 'queue_length{pod="api-0"}', 42);
 *
 * `honor_labels` is on, so the exporter's `namespace`/`pod` labels reach queries as set.
 * Failure modes: a missing binary fails with the install command; Prometheus exiting
 * during start-up fails at once with its log tail; the process is killed at exit even
 * when a test throws.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Exporter {
  /** Sets a gauge sample; the next scrape serves it. */
  set(metric: string, labels: Record<string, string>, value: number): void;
  /** Removes one sample (the series goes stale in Prometheus after the next scrape). */
  delete(metric: string, labels: Record<string, string>): void;
  clear(): void;
  /** The exposition text the exporter serves now. */
  text(): string;
  readonly url: string;
}

export interface TestPrometheus {
  /** Base URL of the Prometheus HTTP API, e.g. http://127.0.0.1:PORT. */
  readonly url: string;
  readonly exporter: Exporter;
  stop(): Promise<void>;
}

const metricName = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const labelName = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const escapeValue = (value: string): string =>
  value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function prometheusBinary(): string {
  try {
    return execFileSync('bash', ['-c', 'command -v prometheus'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(
      'prometheus is not installed: run `apt-get install -y prometheus` (Debian package), as .ci/run does',
    );
  }
}

function seriesKey(metric: string, labels: Record<string, string>): string {
  if (!metricName.test(metric)) throw new Error(`exporter: "${metric}" is not a valid metric name`);
  const names = Object.keys(labels).sort();
  for (const name of names)
    if (!labelName.test(name))
      throw new Error(`exporter: "${name}" is not a valid label name (metric ${metric})`);
  return `${metric}{${names.map((name) => `${name}="${escapeValue(labels[name]!)}"`).join(',')}}`;
}

async function startExporter(): Promise<{ exporter: Exporter; server: Server }> {
  const samples = new Map<string, { metric: string; value: number }>();
  const text = (): string => {
    const byMetric = new Map<string, string[]>();
    for (const [key, { metric, value }] of samples) {
      const lines = byMetric.get(metric) ?? [];
      lines.push(`${key} ${value}`);
      byMetric.set(metric, lines);
    }
    return [...byMetric]
      .map(([metric, lines]) => `# TYPE ${metric} gauge\n${lines.join('\n')}\n`)
      .join('');
  };
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    response.end(text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const exporter: Exporter = {
    url: `http://127.0.0.1:${port}/metrics`,
    set(metric, labels, value) {
      samples.set(seriesKey(metric, labels), { metric, value });
    },
    delete(metric, labels) {
      samples.delete(seriesKey(metric, labels));
    },
    clear() {
      samples.clear();
    },
    text,
  };
  return { exporter, server };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startPrometheus(
  options: { scrapeIntervalMs?: number } = {},
): Promise<TestPrometheus> {
  const binary = prometheusBinary();
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const child of running) child.kill('SIGKILL');
    });
  }
  const started = Date.now();
  const { exporter, server } = await startExporter();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-prometheus-'));
  const port = await freePort();
  const interval = options.scrapeIntervalMs ?? 1000;
  const exporterHost = new URL(exporter.url).host;
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      `  scrape_interval: ${interval}ms`,
      `  scrape_timeout: ${Math.max(100, Math.floor(interval * 0.8))}ms`,
      'scrape_configs:',
      '  - job_name: tollgate-test-exporter',
      '    honor_labels: true',
      '    static_configs:',
      `      - targets: ['${exporterHost}']`,
      '',
    ].join('\n'),
  );
  const child = spawn(
    binary,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  running.add(child);
  let log = '';
  child.stderr.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) =>
    child.on('exit', () => (running.delete(child), resolve())),
  );
  const url = `http://127.0.0.1:${port}`;

  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`prometheus exited during start-up (code ${child.exitCode}):\n${log}`);
    }
    try {
      const response = await fetch(`${url}/-/ready`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus not ready after 30s:\n${log}`);
    }
    await sleep(100);
  }
  process.stderr.write(
    `[prometheus] ready in ${Date.now() - started}ms at ${url}, scraping ${exporter.url} every ${interval}ms\n`,
  );
  return { url, exporter, stop };
}

interface QueryAnswer {
  status: string;
  data?: {
    resultType: string;
    result: Array<{ metric: Record<string, string>; value: [number, string] }>;
  };
  error?: string;
}

/** Runs an instant query and returns its vector (throws on a query error). */
export async function queryVector(
  url: string,
  query: string,
): Promise<Array<{ metric: Record<string, string>; value: number }>> {
  const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(query)}`);
  const answer = (await response.json()) as QueryAnswer;
  if (answer.status !== 'success' || !answer.data)
    throw new Error(`prometheus query ${query} failed: ${answer.error ?? response.status}`);
  return answer.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}

/**
 * Waits until `query` returns at least one sample (equal to `value` when given), so a
 * test does not race the scrape interval.
 */
export async function waitForSeries(
  url: string,
  query: string,
  value?: number,
  timeoutMs = 15_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const result = await queryVector(url, query);
    const match = result.find((r) => value === undefined || r.value === value);
    if (match) return match.value;
    last = result.length > 0 ? result.map((r) => r.value) : 'no sample';
    if (Date.now() > deadline)
      throw new Error(
        `prometheus: ${query} did not show ${value ?? 'a sample'} within ${timeoutMs}ms (last: ${JSON.stringify(last)})`,
      );
    await sleep(200);
  }
}
