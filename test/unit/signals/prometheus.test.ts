import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  PrometheusError,
  batchByPod,
  createPrometheusClient,
  substitute,
} from '../../../src/signals/prometheus.ts';

test('placeholder substitution escapes label values for their quotes', () => {
  const cases: { name: string; query: string; vars: Record<string, string>; want: string }[] = [
    {
      name: 'plain names are substituted inside double quotes',
      query: 'q{namespace="$namespace",pod="$pod"}',
      vars: { namespace: 'team-a', pod: 'web-0' },
      want: 'q{namespace="team-a",pod="web-0"}',
    },
    {
      name: 'a double quote in a value cannot close the literal',
      query: 'q{pod="$pod"}',
      vars: { pod: 'x",evil="1' },
      want: 'q{pod="x\\",evil=\\"1"}',
    },
    {
      name: 'a backslash is doubled',
      query: 'q{pod="$pod"}',
      vars: { pod: 'a\\b' },
      want: 'q{pod="a\\\\b"}',
    },
    {
      name: 'single-quoted literals escape single quotes',
      query: "q{pod='$pod'}",
      vars: { pod: "it's" },
      want: "q{pod='it\\'s'}",
    },
    {
      name: 'a placeholder inside a larger value is substituted',
      query: 'q{pod=~"$pod-.*"}',
      vars: { pod: 'web' },
      want: 'q{pod=~"web-.*"}',
    },
    {
      name: '$podname-like words are not placeholders',
      query: 'q{x="$pods"}',
      vars: { pod: 'p' },
      want: 'q{x="$pods"}',
    },
    {
      name: 'escaped quotes inside a literal do not end it',
      query: 'q{a="x\\"y",pod="$pod"}',
      vars: { pod: 'p' },
      want: 'q{a="x\\"y",pod="p"}',
    },
  ];
  for (const c of cases) assert.equal(substitute(c.query, c.vars), c.want, c.name);
});

test('inside a regex matcher a substituted value is regex-escaped too', () => {
  assert.equal(substitute('q{pod=~"$pod-.*"}', { pod: 'web.1' }), 'q{pod=~"web\\\\.1-.*"}');
  assert.equal(substitute('q{pod!~ "$pod"}', { pod: 'a+b' }), 'q{pod!~ "a\\\\+b"}');
  assert.equal(
    substitute('q{pod="$pod"}', { pod: 'web.1' }),
    'q{pod="web.1"}',
    'an equality matcher is not',
  );
});

test('a placeholder outside a string literal or without a value is an error naming the query', () => {
  assert.throws(
    () => substitute('q{pod=$pod}', { pod: 'p' }),
    (e: unknown) =>
      e instanceof PrometheusError &&
      /q\{pod=\$pod\}/.test(e.message) &&
      /inside a quoted label value/.test(e.message),
  );
  assert.throws(
    () => substitute('q{container="$container"}', { pod: 'p' }),
    /no value for \$container/,
  );
  assert.throws(() => substitute('q{pod="$pod}', { pod: 'p' }), /unterminated string literal/);
});

test('a per-pod query is batched into one regex query when $pod is a plain matcher', () => {
  assert.deepEqual(
    batchByPod('sum by (pod) (q{namespace="$namespace",pod="$pod"})', ['a', 'b.c']),
    {
      query: 'sum by (pod) (q{namespace="$namespace",pod=~"a|b\\\\.c"})',
      podLabel: 'pod',
    },
  );
  assert.equal(
    batchByPod('q{pod=~"$pod-.*"}', ['a']),
    undefined,
    '$pod in a regex matcher is not batched',
  );
  assert.equal(
    batchByPod('q{pod="$pod",x="$pod"}', ['a']),
    undefined,
    '$pod matched by two labels is not batched',
  );
  assert.equal(batchByPod('q{pod="$pod"}', []), undefined, 'no pods, no query');
});

function fakeFetch(
  status: number,
  body: unknown,
  seen: { url?: string; body?: string }[] = [],
): typeof fetch {
  return (async (url: string | URL | Request, init?: RequestInit) => {
    seen.push({ url: String(url), body: String(init?.body) });
    return new Response(typeof body === 'string' ? body : JSON.stringify(body), { status });
  }) as typeof fetch;
}

test('range and instant queries parse matrix, vector and scalar results', async () => {
  const seen: { url?: string; body?: string }[] = [];
  const client = createPrometheusClient({
    url: 'http://prom.test/',
    fetch: fakeFetch(
      200,
      {
        status: 'success',
        data: {
          resultType: 'matrix',
          result: [
            {
              metric: { pod: 'a' },
              values: [
                [1700000000, '1.5'],
                [1700000015, '2'],
              ],
            },
          ],
        },
      },
      seen,
    ),
  });
  const series = await client.range('q', 1_700_000_000_000, 1_700_000_015_000, 15_000);
  assert.deepEqual(series, [
    {
      labels: { pod: 'a' },
      samples: [
        { at: 1_700_000_000_000, value: 1.5 },
        { at: 1_700_000_015_000, value: 2 },
      ],
    },
  ]);
  assert.equal(seen[0]?.url, 'http://prom.test/api/v1/query_range');
  assert.match(seen[0]?.body ?? '', /start=1700000000&end=1700000015&step=15/);

  const vector = createPrometheusClient({
    url: 'http://prom.test',
    fetch: fakeFetch(200, {
      status: 'success',
      data: { resultType: 'vector', result: [{ metric: {}, value: [1700000000, '7'] }] },
    }),
  });
  assert.deepEqual(await vector.instant('q'), [
    { labels: {}, samples: [{ at: 1_700_000_000_000, value: 7 }] },
  ]);
  const scalar = createPrometheusClient({
    url: 'http://prom.test',
    fetch: fakeFetch(200, {
      status: 'success',
      data: { resultType: 'scalar', result: [1700000000, '3'] },
    }),
  });
  assert.deepEqual(await scalar.instant('1+2'), [
    { labels: {}, samples: [{ at: 1_700_000_000_000, value: 3 }] },
  ]);
});

test('errors name the query and the reason', async () => {
  const cases: { name: string; fetch: typeof fetch; match: RegExp }[] = [
    {
      name: 'a PromQL error from Prometheus',
      fetch: fakeFetch(400, { status: 'error', errorType: 'bad_data', error: 'parse error' }),
      match: /"rate\(x\)".*HTTP 400 bad_data: parse error/,
    },
    {
      name: 'a body that is not JSON',
      fetch: fakeFetch(502, '<html>bad gateway</html>'),
      match: /"rate\(x\)".*HTTP 502, body is not JSON/,
    },
    {
      name: 'a network failure',
      fetch: (async () => {
        throw new TypeError('fetch failed');
      }) as typeof fetch,
      match: /"rate\(x\)".*failed: fetch failed/,
    },
    {
      name: 'a timeout',
      fetch: ((_url: unknown, init?: RequestInit) =>
        new Promise((_resolve, reject) =>
          init?.signal?.addEventListener('abort', () =>
            reject(new DOMException('aborted', 'TimeoutError')),
          ),
        )) as typeof fetch,
      match: /"rate\(x\)".*timed out after 50 ms/,
    },
  ];
  for (const c of cases) {
    const client = createPrometheusClient({
      url: 'http://prom.test',
      fetch: c.fetch,
      timeoutMs: 50,
    });
    await assert.rejects(
      client.instant('rate(x)'),
      (e: unknown) => e instanceof PrometheusError && c.match.test(e.message),
      c.name,
    );
  }
});
