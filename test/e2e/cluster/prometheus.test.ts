/**
 * Proof that the Prometheus harness is real: Debian's prometheus scrapes the in-process
 * exporter, and per-pod series the test sets (and changes) come back through the HTTP
 * query API with their labels intact.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  queryVector,
  startPrometheus,
  waitForSeries,
  type TestPrometheus,
} from '../../support/prometheus.ts';

describe('prometheus scraping the test exporter', () => {
  let prom: TestPrometheus;

  before(async () => {
    prom = await startPrometheus();
  });

  after(async () => {
    await prom?.stop();
  });

  test('a per-pod series set on the exporter is visible in prometheus with its labels, and follows changes', async () => {
    prom.exporter.set('queue_length', { namespace: 'team-a', pod: 'api-0' }, 42);
    prom.exporter.set('queue_length', { namespace: 'team-a', pod: 'api-1' }, 7);
    assert.equal(
      await waitForSeries(prom.url, 'queue_length{namespace="team-a",pod="api-0"}', 42),
      42,
    );
    const all = await queryVector(prom.url, 'queue_length');
    assert.deepEqual(all.map((r) => [r.metric.pod, r.value]).sort(), [
      ['api-0', 42],
      ['api-1', 7],
    ]);

    prom.exporter.set('queue_length', { namespace: 'team-a', pod: 'api-0' }, 99);
    assert.equal(await waitForSeries(prom.url, 'queue_length{pod="api-0"}', 99), 99);
  });

  test('a query for a series nobody exports times out with what was last seen', async () => {
    await assert.rejects(
      waitForSeries(prom.url, 'queue_length{pod="nobody"}', undefined, 1500),
      /did not show a sample within 1500ms \(last: "no sample"\)/,
    );
  });

  test('bad metric names are refused by the exporter with the reason', () => {
    assert.throws(
      () => prom.exporter.set('queue-length', { pod: 'x' }, 1),
      /"queue-length" is not a valid metric name/,
    );
    assert.throws(
      () => prom.exporter.set('queue_length', { 'bad-label': 'x' }, 1),
      /"bad-label" is not a valid label name/,
    );
  });
});
