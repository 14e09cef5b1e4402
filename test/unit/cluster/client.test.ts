import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs, { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { reuseConnections } from '../../../src/cluster/client.ts';

// A self-signed CA is not needed: the Agent is built, never connected.
const fakeCa = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');

function kubeConfig(certData = 'client-cert-1'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: fakeCa.toString('base64') }],
    users: [
      {
        name: 'u',
        certData: Buffer.from(certData).toString('base64'),
        keyData: Buffer.from('key').toString('base64'),
      },
    ],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

async function dispatcherOf(kc: KubeConfig): Promise<unknown> {
  const context = new RequestContext('https://127.0.0.1:6443/api/v1/namespaces', HttpMethod.GET);
  await kc.applySecurityAuthentication(context);
  return context.getDispatcher();
}

test('without tollgate, the client library builds a new connection pool for every request', async () => {
  // When this starts failing, the library reuses connections itself and reuseConnections can go.
  const kc = kubeConfig();
  const first = await dispatcherOf(kc);
  assert.ok(first !== undefined);
  assert.notEqual(await dispatcherOf(kc), first);
});

test('with reuseConnections, every request of one KubeConfig shares one connection pool', async () => {
  const kc = reuseConnections(kubeConfig());
  const first = await dispatcherOf(kc);
  assert.ok(first !== undefined);
  for (let i = 0; i < 5; i++) assert.equal(await dispatcherOf(kc), first);
});

test('a rotated client certificate gets a new pool; the same one again is served from the cache', async () => {
  const kc = reuseConnections(kubeConfig('client-cert-1'));
  const first = await dispatcherOf(kc);
  const user = kc.getCurrentUser() as { certData?: string };
  user.certData = Buffer.from('client-cert-2').toString('base64');
  const rotated = await dispatcherOf(kc);
  assert.notEqual(rotated, first);
  assert.equal(await dispatcherOf(kc), rotated);
});

test('applying reuseConnections twice is harmless', async () => {
  const kc = reuseConnections(reuseConnections(kubeConfig()));
  assert.equal(await dispatcherOf(kc), await dispatcherOf(kc));
});

/** A kubeconfig whose CA, client certificate and key are files in `dir`, as the test plane's and many users' are. */
function kubeConfigWithFiles(dir: string): KubeConfig {
  writeFileSync(join(dir, 'ca.crt'), fakeCa);
  writeFileSync(join(dir, 'client.crt'), 'client-cert-1');
  writeFileSync(join(dir, 'client.key'), 'key');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caFile: join(dir, 'ca.crt') }],
    users: [{ name: 'u', certFile: join(dir, 'client.crt'), keyFile: join(dir, 'client.key') }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

test('the CA, client certificate and key files are read once a second at most, not for every request', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-credential-files-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const clock = { now: () => 1_000_000 };
  const kc = reuseConnections(kubeConfigWithFiles(dir), { clock });
  const reads = t.mock.method(fs, 'readFileSync');
  const first = await dispatcherOf(kc);
  for (let i = 0; i < 50; i++) assert.equal(await dispatcherOf(kc), first);
  const ofDir = reads.mock.calls.filter((call) => String(call.arguments[0]).startsWith(dir));
  assert.equal(ofDir.length, 3, 'each of the three files read once for 51 requests');
});

test('a rotated client certificate file is in use within a second', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-credential-files-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let now = 1_000_000;
  const kc = reuseConnections(kubeConfigWithFiles(dir), { clock: { now: () => now } });
  const first = await dispatcherOf(kc);
  writeFileSync(join(dir, 'client.crt'), 'client-cert-2');
  now += 999;
  assert.equal(await dispatcherOf(kc), first, 'read again only after a second');
  now += 1;
  const rotated = await dispatcherOf(kc);
  assert.notEqual(rotated, first, 'the new certificate, a new pool');
  assert.equal(await dispatcherOf(kc), rotated);
});

interface HttpsOptions {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  headers?: Record<string, string>;
}

function httpsOptionsOf(kc: KubeConfig): HttpsOptions {
  const opts: HttpsOptions = {};
  (kc as unknown as { applyHTTPSOptions(o: object): void }).applyHTTPSOptions(opts);
  return opts;
}

test('requests within a second are handed the same decoded CA, certificate and key: decoded once, not for every request', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-credential-files-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const kc of [reuseConnections(kubeConfig()), reuseConnections(kubeConfigWithFiles(dir))]) {
    const first = httpsOptionsOf(kc);
    assert.ok(first.ca && first.cert && first.key, 'all three handed to the library');
    const second = httpsOptionsOf(kc);
    assert.equal(second.ca, first.ca);
    assert.equal(second.cert, first.cert);
    assert.equal(second.key, first.key);
    assert.deepEqual(second.cert, Buffer.from('client-cert-1'));
  }
});

test("each request gets headers of its own: one request's Authorization never reaches another's", async () => {
  const kc = reuseConnections(kubeConfig());
  const user = kc.getCurrentUser() as { impersonateUser?: string };
  user.impersonateUser = 'auditor';
  const first = httpsOptionsOf(kc);
  assert.deepEqual(first.headers, { 'Impersonate-User': 'auditor' });
  (first.headers as Record<string, string>).Authorization = 'Bearer one-request';
  const second = httpsOptionsOf(kc);
  assert.deepEqual(second.headers, { 'Impersonate-User': 'auditor' });
  user.impersonateUser = 'operator';
  assert.deepEqual(httpsOptionsOf(kc).headers, { 'Impersonate-User': 'operator' });
});
