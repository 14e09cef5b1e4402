/**
 * The operational HTTP endpoints of `tollgate run`:
 * - `/metrics`: the one prom-client registry (Node process metrics included by the caller
 *   through `collectProcessMetrics`).
 * - `/healthz`: liveness. 200 while the process can answer and no liveness check fails
 *   (`tollgate run`: no loop pass wedged, see watchdog.ts); a kubelet restarts the pod
 *   otherwise. Deliberately NOT tied to the API server or Git being reachable, or an
 *   outage there would restart every replica at once.
 * - `/readyz`: readiness. 200 only when every readiness check passes (caches synced, a
 *   valid policy loaded, ...); otherwise 503 with one line per failing check saying why,
 *   so `kubectl describe` and a curl show the reason instead of a bare status.
 * Both accept `?verbose` to list passing checks too. A check may report `degraded`: a
 * detail line (`[!] name degraded: why`) that does not fail the endpoint.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from './log.ts';

/**
 * Returns undefined when healthy, else the reason (a short sentence); null when the check
 * does not apply right now (not listed, even with `?verbose`; e.g. no loop runs on a
 * standby replica, so none can be wedged); `{ detail }` when healthy with something to
 * say (listed with `?verbose` as `[+] name ok: detail`).
 */
export type HealthCheck = () =>
  string | undefined | null | { readonly degraded: string } | { readonly detail: string };

export interface HealthChecks {
  readonly [name: string]: HealthCheck;
}

export interface ObserveServerOptions {
  readonly registry: Registry;
  readonly readiness: HealthChecks;
  readonly liveness?: HealthChecks;
  readonly logger?: Logger;
}

export interface CheckReport {
  readonly ok: boolean;
  readonly body: string;
}

/** Runs the checks and renders the plain-text body (pure apart from the checks themselves). */
export function runChecks(checks: HealthChecks, verbose: boolean): CheckReport {
  const lines: string[] = [];
  let ok = true;
  for (const [name, check] of Object.entries(checks)) {
    let reason: ReturnType<HealthCheck>;
    try {
      reason = check();
    } catch (error) {
      reason = `check threw: ${error instanceof Error ? error.message : String(error)}`;
    }
    if (reason === null) continue;
    if (typeof reason === 'object' && 'degraded' in reason) {
      // Degraded, not failing: listed always, the replica stays ready.
      lines.push(`[!] ${name} degraded: ${reason.degraded}`);
    } else if (typeof reason === 'string') {
      ok = false;
      lines.push(`[-] ${name} failed: ${reason}`);
    } else if (verbose) {
      lines.push(reason === undefined ? `[+] ${name} ok` : `[+] ${name} ok: ${reason.detail}`);
    }
  }
  lines.push(ok ? 'ok' : 'not ok');
  return { ok, body: `${lines.join('\n')}\n` };
}

export interface ObserveServer {
  /** e.g. http://127.0.0.1:9090 */
  readonly url: string;
  close(): Promise<void>;
}

export async function startObserveServer(
  address: string,
  options: ObserveServerOptions,
): Promise<ObserveServer> {
  const { host, port } = parseListenAddress(address);
  const server: Server = createServer((request, response) => {
    handle(request, response, options).catch((error: unknown) => {
      options.logger?.error({ err: error, path: request.url }, 'observe endpoint failed');
      if (!response.headersSent) response.writeHead(500, { 'content-type': 'text/plain' });
      response.end('internal error\n');
    });
  });
  // Probes and scrapes are short; never let a stuck client pin the shutdown.
  server.keepAliveTimeout = 5_000;
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const shownHost = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return {
    url: `http://${shownHost}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function handle(
  request: IncomingMessage,
  response: ServerResponse,
  options: ObserveServerOptions,
): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://localhost');
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' });
    response.end('method not allowed\n');
    return;
  }
  const verbose = url.searchParams.has('verbose');
  switch (url.pathname) {
    case '/metrics': {
      const body = await options.registry.metrics();
      response.writeHead(200, { 'content-type': options.registry.contentType });
      response.end(request.method === 'HEAD' ? undefined : body);
      return;
    }
    case '/healthz':
    case '/livez':
      return reply(response, runChecks(options.liveness ?? {}, verbose));
    case '/readyz':
      return reply(response, runChecks(options.readiness, verbose));
    default:
      response.writeHead(404, { 'content-type': 'text/plain' });
      response.end('not found: try /metrics, /healthz or /readyz\n');
  }
}

function reply(response: ServerResponse, report: CheckReport): void {
  response.writeHead(report.ok ? 200 : 503, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
  });
  response.end(report.body);
}

/** ":9090", "0.0.0.0:9090", "127.0.0.1:0", "[::]:9090". */
export function parseListenAddress(address: string): { host: string | undefined; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(address.trim());
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || !Number.isInteger(port) || port > 65535) {
    throw new Error(
      `"${address}" is not a listen address (examples: :9090, 0.0.0.0:9090, 127.0.0.1:0, [::]:9090)`,
    );
  }
  const host = match[1] ?? match[2];
  return { host: host === '' ? undefined : host, port };
}
