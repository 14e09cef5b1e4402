import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Registry } from 'prom-client';
import { parseListenAddress, runChecks, startObserveServer } from '../../../src/observe/http.ts';

describe('health checks', () => {
  it('all passing checks give ok', () => {
    assert.deepEqual(runChecks({ cache: () => undefined }, false), { ok: true, body: 'ok\n' });
  });

  it('a failing check names itself and says why', () => {
    const report = runChecks(
      { cache: () => 'pods informer has not finished its first list', policy: () => undefined },
      false,
    );
    assert.equal(report.ok, false);
    assert.equal(
      report.body,
      '[-] cache failed: pods informer has not finished its first list\nnot ok\n',
    );
  });

  it('a check that throws counts as failing', () => {
    const report = runChecks(
      {
        broken: () => {
          throw new Error('boom');
        },
      },
      false,
    );
    assert.equal(report.ok, false);
    assert.match(report.body, /broken failed: check threw: boom/);
  });

  it('verbose lists passing checks too', () => {
    assert.equal(runChecks({ cache: () => undefined }, true).body, '[+] cache ok\nok\n');
  });
});

describe('listen addresses', () => {
  const valid: [string, string | undefined, number][] = [
    [':9090', undefined, 9090],
    ['0.0.0.0:8080', '0.0.0.0', 8080],
    ['127.0.0.1:0', '127.0.0.1', 0],
    ['[::]:9090', '::', 9090],
  ];
  for (const [text, host, port] of valid) {
    it(`"${text}" listens on ${host ?? 'all interfaces'} port ${port}`, () => {
      assert.deepEqual(parseListenAddress(text), { host, port });
    });
  }
  for (const text of ['9090', 'localhost', ':99999', 'host:port']) {
    it(`"${text}" is refused with examples`, () => {
      assert.throws(() => parseListenAddress(text), /is not a listen address \(examples/);
    });
  }
});

describe('the observe server on loopback', () => {
  it('serves metrics, liveness and readiness with reasons', async () => {
    const registry = new Registry();
    new Counter({ name: 'tollgate_test_total', help: 'test', registers: [registry] }).inc(3);
    let synced = false;
    const server = await startObserveServer('127.0.0.1:0', {
      registry,
      readiness: { caches: () => (synced ? undefined : 'informers not synced yet') },
    });
    try {
      const metrics = await fetch(`${server.url}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^tollgate_test_total 3$/m);

      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);

      const notReady = await fetch(`${server.url}/readyz`);
      assert.equal(notReady.status, 503);
      assert.match(await notReady.text(), /caches failed: informers not synced yet/);

      synced = true;
      const ready = await fetch(`${server.url}/readyz?verbose`);
      assert.equal(ready.status, 200);
      assert.equal(await ready.text(), '[+] caches ok\nok\n');

      assert.equal((await fetch(`${server.url}/nope`)).status, 404);
      assert.equal((await fetch(`${server.url}/metrics`, { method: 'POST' })).status, 405);
    } finally {
      await server.close();
    }
  });
});
