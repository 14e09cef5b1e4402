import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPolicyFromFiles, type PolicyFile } from '../../../src/policy/load.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';

/**
 * A tenant's ResizePolicy queries Prometheus with tollgate's view of every tenant's
 * series. Each query below tries to read series outside the pod's namespace; every one
 * must be refused when the policy compiles, at the query's field.
 */
const v = 'apiVersion: tollgate.io/v1alpha1\n';

function repoWithSignalQuery(query: string): PolicyFile[] {
  const resize =
    `${v}kind: ResizePolicy\nmetadata:\n  name: web\nspec:\n  tenant: team-a\n` +
    `  containers:\n    app:\n      cpu: { min: 100m, max: "1", step: 100m }\n` +
    `  signals:\n    - name: load\n      query: ${JSON.stringify(query)}\n      scaleUpAbove: 2\n`;
  return [
    { path: 'tollgate.yaml', content: `${v}kind: Settings\nspec:\n  cluster: test\n` },
    {
      path: 'tenants/a.yaml',
      content: `${v}kind: Tenant\nmetadata:\n  name: team-a\nspec:\n  namespaces: [a1, a2]\n  gatePrefixes: [a.tollgate.io/]\n`,
    },
    { path: 'r.yaml', content: resize },
  ];
}

const bypassAttempts: { name: string; query: string }[] = [
  { name: 'a single-quoted regex matcher', query: "up{namespace=~'.*'}" },
  {
    name: 'a single-quoted regex matcher beside a double-quoted right one',
    query: `up{namespace="$namespace"} + on() up{namespace=~'.*'}`,
  },
  {
    name: 'two matchers in one selector, the right one and a single-quoted literal',
    query: `up{namespace="$namespace", pod='x'} or up{pod="$pod", namespace='b1'}`,
  },
  { name: 'a single-quoted literal of another tenant', query: "up{namespace='b1'}" },
  {
    name: 'a backtick-quoted regex matcher',
    query: 'up{namespace=~`.+`}',
  },
  {
    name: 'a second selector without a namespace matcher',
    query: 'up{namespace="$namespace"} + on() group_left sum(secrets_total)',
  },
  {
    name: 'a second selector reading another namespace with `or`',
    query: 'up{namespace="$namespace"} or up{namespace=~"b.*"}',
  },
  {
    name: 'the namespace matcher only inside a string argument',
    query: 'label_replace(up, "x", "$1", "namespace", "$namespace")',
  },
  { name: 'a negative matcher', query: 'up{namespace!="$namespace"}' },
  { name: 'a negative regex matcher', query: 'up{namespace!~"a1"}' },
  {
    name: 'a regex matcher next to the right one (space before the operator)',
    query: 'up{pod="$pod"} * on() up{namespace =~ ".*"}',
  },
  { name: 'a __name__ selector without namespace', query: '{__name__="kube_secret_info"}' },
  {
    name: 'a __name__ regex selector with namespace in a sibling only',
    query: '{__name__=~".+"} and on() up{namespace="$namespace"}',
  },
  {
    name: 'a quoted label name for namespace with a regex',
    query: '{"up", "namespace"=~".*"}',
  },
  {
    name: 'a subquery over an unscoped selector',
    query: 'max_over_time(up{namespace="$namespace"}[5m:1m]) + max_over_time(up[5m:1m])',
  },
  {
    name: 'an offset selector without namespace',
    query: 'rate(up{namespace="$namespace"}[5m]) - rate(up[5m] offset 1h)',
  },
  {
    name: 'nested functions hiding an unscoped selector',
    query: 'abs(clamp_min(sum by (pod) (rate(http_requests_total{code="500"}[5m])), 0))',
  },
  {
    name: 'a comment that holds the only namespace matcher',
    query: 'sum(up) # {namespace="$namespace"}',
  },
  {
    name: 'the placeholder spelled as part of a longer literal',
    query: 'up{namespace="$namespace|b1"}',
  },
  { name: 'a literal of the tenant’s other namespace', query: 'up{namespace="a2"}' },
  { name: 'a query that does not parse', query: 'up{namespace="$namespace"' },
  {
    name: 'an info() call that joins series the query does not name',
    query: 'info(up{namespace="$namespace"})',
  },
];

for (const attempt of bypassAttempts) {
  test(`a signal query with ${attempt.name} is refused at its field`, () => {
    const result = loadPolicyFromFiles(repoWithSignalQuery(attempt.query));
    assert.equal(result.ok, false, `accepted: ${attempt.query}`);
    if (result.ok) return;
    const printed = result.errors.map(formatPolicyError);
    assert.ok(
      printed.some((p) => p.startsWith('r.yaml#0 spec.signals[0].query: ')),
      `expected an error at spec.signals[0].query among:\n${printed.join('\n')}`,
    );
  });
}

const scopedQueries = [
  'sum(api_worker_queue_length{namespace="$namespace",pod="$pod"})',
  "up{namespace='$namespace'}",
  'up{namespace=`$namespace`}',
  '{__name__="up", namespace="$namespace"}',
  'histogram_quantile(0.99, sum by (le) (rate(h_bucket{namespace="$namespace",pod="$pod"}[2m])))',
  'max_over_time(up{namespace="$namespace"}[5m:1m] offset 5m)',
  'up{namespace="$namespace"} / on(pod) group_left up{namespace="$namespace",pod=~"web-.*"}',
];

for (const query of scopedQueries) {
  test(`a signal query scoped to the pod's namespace is accepted: ${query}`, () => {
    const result = loadPolicyFromFiles(repoWithSignalQuery(query));
    assert.equal(result.ok, true, result.ok ? '' : result.errors.map(formatPolicyError).join('\n'));
  });
}
