/**
 * An HTTPS proxy in front of kube-apiserver for the replicas only, so the soak can throttle
 * the API server for tollgate the way API Priority and Fairness does when it is
 * overloaded: while throttled, every second request is answered 429 TooManyRequests with
 * Retry-After, the Status body the API server sends; the rest pass through (watches
 * stream). Its serving certificate is self-signed (openssl); the replicas' kubeconfig
 * skips its verification (the token is the one the API server checks).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

export interface ThrottlingProxy {
  readonly url: string;
  throttled: boolean;
  /** Requests answered 429 so far. */
  readonly rejected: number;
  /** A copy of `kubeconfig` pointing at the proxy. */
  kubeconfigFor(kubeconfig: string): string;
  close(): Promise<void>;
}

const tooManyRequests = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: 'Too many requests, please try again later.',
  reason: 'TooManyRequests',
  details: { retryAfterSeconds: 1 },
  code: 429,
});

function selfSignedCert(dir: string): { key: Buffer; cert: Buffer } {
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
      ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1'],
      ...['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    ],
    { stdio: 'ignore' },
  );
  return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
}

export async function startThrottlingProxy(upstream: string): Promise<ThrottlingProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-soak-api-proxy-'));
  const target = new URL(upstream);
  let throttled = false;
  let rejected = 0;
  let turn = 0;
  const server: Server = createServer(selfSignedCert(dir), (req, res) => {
    if (throttled && turn++ % 2 === 0) {
      rejected += 1;
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(tooManyRequests);
      return;
    }
    const forwarded = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
        rejectUnauthorized: false,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        // An answer cut short (kube-apiserver killed mid-watch) cuts the replica's answer
        // too: pipe() alone would leave the replica's watch open and silent.
        answer.on('close', () => {
          if (!answer.complete) res.destroy();
        });
      },
    );
    forwarded.on('error', () => res.destroy());
    res.on('close', () => forwarded.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `https://127.0.0.1:${port}`;
  return {
    url,
    get throttled() {
      return throttled;
    },
    set throttled(on: boolean) {
      throttled = on;
    },
    get rejected() {
      return rejected;
    },
    kubeconfigFor(kubeconfig: string): string {
      const config = parse(readFileSync(kubeconfig, 'utf8')) as {
        clusters: { cluster: Record<string, unknown> }[];
      };
      for (const { cluster } of config.clusters) {
        delete cluster['certificate-authority'];
        cluster.server = url;
        cluster['insecure-skip-tls-verify'] = true;
      }
      const file = join(dir, 'tollgate.kubeconfig');
      writeFileSync(file, stringify(config));
      return file;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
