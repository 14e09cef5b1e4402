import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parser } from '@prometheus-io/lezer-promql';
import { namespaceScopeProblems } from '../../../src/policy/promql.ts';
import { substitute } from '../../../src/signals/prometheus.ts';

const owned = ['a1', 'a2'];

const cases: { name: string; query: string; problems: string[] }[] = [
  {
    name: 'a selector pinned to the placeholder is clean',
    query: 'sum(q{namespace="$namespace",pod="$pod"})',
    problems: [],
  },
  {
    name: 'a selector without a namespace matcher names itself',
    query: 'sum(q{namespace="$namespace"}) / sum(up{job="x"})',
    problems: ['query has no namespace matcher in `up{job="x"}`'],
  },
  {
    name: 'a regex matcher is refused whatever its quotes',
    query: "q{namespace=~'a1|b1'}",
    problems: [`namespace matcher =~'a1|b1' could select other tenants' namespaces`],
  },
  {
    name: 'a negative matcher is refused even beside the placeholder',
    query: 'q{namespace="$namespace", namespace!="a1"}',
    problems: [`namespace matcher !="a1" could select other tenants' namespaces`],
  },
  {
    name: "another tenant's namespace is named as such",
    query: 'q{namespace="b1"}',
    problems: [`namespace "b1" is not one of the tenant's namespaces (a1, a2)`],
  },
  {
    name: "the tenant's own namespace written literally is refused too",
    query: 'q{namespace="a2"}',
    problems: ['namespace "a2" is written literally'],
  },
  {
    name: 'an escape sequence cannot spell the placeholder',
    query: 'q{namespace="\\x24namespace"}',
    problems: ['namespace "\\\\x24namespace" is not one of the tenant\'s namespaces'],
  },
  {
    name: 'an escape sequence cannot spell the label name',
    query: 'q{namespace="$namespace"} + q{"name\\x73pace"=~".*"}',
    problems: ['label name "name\\x73pace" in `q{"name\\x73pace"=~".*"}` uses an escape sequence'],
  },
  {
    name: 'a selector over a subquery at an offset is still checked',
    query: 'max_over_time(rate(q{job="x"}[1m])[10m:1m] offset 1h)',
    problems: ['query has no namespace matcher in `q{job="x"}`'],
  },
  {
    name: 'a comment is refused',
    query: 'q{namespace="$namespace"} # "',
    problems: ['comments are not allowed in a policy query'],
  },
  {
    name: 'info() is refused',
    query: 'info(q{namespace="$namespace"})',
    problems: ['info() joins series the query does not name'],
  },
  {
    name: 'an `or` inside the braces does not parse and is refused',
    query: 'q{namespace="$namespace" or namespace="b1"}',
    problems: ['does not parse as PromQL at column'],
  },
  {
    name: 'an unterminated selector is refused with its column',
    query: 'q{namespace="$namespace"',
    problems: ['does not parse as PromQL at column 25'],
  },
];

for (const c of cases) {
  test(c.name, () => {
    const problems = namespaceScopeProblems(c.query, owned);
    if (c.problems.length === 0) {
      assert.deepEqual(problems, []);
      return;
    }
    for (const fragment of c.problems) {
      assert.ok(
        problems.some((p) => p.includes(fragment)),
        `expected "${fragment}" among:\n${problems.join('\n')}`,
      );
    }
  });
}

// ---------------------------------------------------------------------------------
// Property 1: a model of the rule. Queries are generated from a small grammar whose
// selectors carry random matchers; the checker accepts a query exactly when every
// selector the model built is pinned to namespace="$namespace" and nothing else names
// a namespace.

type Quote = '"' | "'" | '`';
interface ModelMatcher {
  readonly label: string;
  readonly quotedLabel: boolean;
  readonly op: '=' | '!=' | '=~' | '!~';
  readonly value: string;
  readonly quote: Quote;
}
interface ModelSelector {
  readonly form: 'plain' | 'name-matcher' | 'quoted-name';
  readonly metric: string;
  readonly matchers: readonly ModelMatcher[];
}

const matcherArb: fc.Arbitrary<ModelMatcher> = fc.record({
  label: fc.constantFrom('namespace', 'namespace', 'pod', 'job', 'container'),
  quotedLabel: fc.boolean(),
  op: fc.constantFrom('=' as const, '=' as const, '!=' as const, '=~' as const, '!~' as const),
  value: fc.constantFrom('$namespace', '$namespace', '$pod', 'a1', 'b1', '.*', '$namespace|b1'),
  quote: fc.constantFrom('"' as const, "'" as const, '`' as const),
});

const selectorArb: fc.Arbitrary<ModelSelector> = fc.record({
  form: fc.constantFrom('plain' as const, 'name-matcher' as const, 'quoted-name' as const),
  metric: fc.constantFrom('up', 'queue_length', 'namespace', 'rate_total'),
  matchers: fc.array(matcherArb, { maxLength: 3 }),
});

function renderMatcher(m: ModelMatcher): string {
  const label = m.quotedLabel ? `"${m.label}"` : m.label;
  return `${label}${m.op}${m.quote}${m.value}${m.quote}`;
}

function renderSelector(s: ModelSelector): string {
  const matchers = s.matchers.map(renderMatcher);
  if (s.form === 'name-matcher') return `{${[`__name__="${s.metric}"`, ...matchers].join(', ')}}`;
  if (s.form === 'quoted-name') return `{${[`"${s.metric}"`, ...matchers].join(', ')}}`;
  return matchers.length === 0 ? s.metric : `${s.metric}{${matchers.join(', ')}}`;
}

function pinned(s: ModelSelector): boolean {
  const ns = s.matchers.filter((m) => m.label === 'namespace');
  return ns.length > 0 && ns.every((m) => m.op === '=' && m.value === '$namespace');
}

interface ModelQuery {
  readonly text: string;
  readonly selectors: readonly ModelSelector[];
}

const leaf: fc.Arbitrary<ModelQuery> = fc
  .tuple(selectorArb, fc.constantFrom('', '[5m]', ' offset 1h', '[5m] offset 30m', ' @ start()'))
  .map(([s, suffix]) => {
    const text = renderSelector(s) + suffix;
    return { text: suffix.startsWith('[') ? `rate(${text})` : text, selectors: [s] };
  });

const queryArb: fc.Arbitrary<ModelQuery> = fc.letrec<{ q: ModelQuery }>((tie) => ({
  q: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    tie('q').map((q) => ({ ...q, text: `sum by (pod) (${q.text})` })),
    tie('q').map((q) => ({ ...q, text: `abs(clamp_min(${q.text}, 0))` })),
    tie('q').map((q) => ({ ...q, text: `max_over_time((${q.text})[10m:1m])` })),
    tie('q').map((q) => ({
      ...q,
      text: `label_replace(${q.text}, "namespace", "$1", "pod", "(.*)")`,
    })),
    fc
      .tuple(
        tie('q'),
        tie('q'),
        fc.constantFrom('+', 'or', 'and', 'unless', '/ on(pod) group_left()'),
      )
      .map(([a, b, op]) => ({
        text: `(${a.text}) ${op} (${b.text})`,
        selectors: [...a.selectors, ...b.selectors],
      })),
  ),
})).q;

test('a generated query is accepted exactly when every selector in it is pinned to the placeholder', () => {
  fc.assert(
    fc.property(queryArb, (q) => {
      const problems = namespaceScopeProblems(q.text, owned);
      assert.equal(
        problems.length === 0,
        q.selectors.every(pinned),
        `${q.text}\n${problems.join('\n')}`,
      );
    }),
    { numRuns: 2000 },
  );
});

// ---------------------------------------------------------------------------------
// Property 2: whatever a policy author writes (a scoped query with hostile fragments
// spliced in), if the checker accepts it, the query that actually reaches Prometheus
// (after the client substitutes the placeholders) reads only the pod's namespace.
// The oracle parses the substituted query again and looks at every selector.

const podNamespace = 'team-a';

function decodedValue(raw: string): string {
  return raw.startsWith('`') ? raw.slice(1, -1) : (JSON.parse(`"${raw.slice(1, -1)}"`) as string);
}

function everySelectorReadsOnly(query: string, namespace: string): boolean {
  const tree = parser.parse(query);
  let ok = true;
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) ok = false;
      if (ref.name !== 'VectorSelector') return;
      const list = ref.node.getChild('LabelMatchers');
      const matchers = list
        ? [...list.getChildren('UnquotedLabelMatcher'), ...list.getChildren('QuotedLabelMatcher')]
        : [];
      const ns = matchers.filter((m) => {
        const name = m.getChild('LabelName') ?? m.getChild('QuotedLabelName');
        const text = name ? query.slice(name.from, name.to) : '';
        return text === 'namespace' || text.slice(1, -1) === 'namespace';
      });
      const fixed = ns.some((m) => {
        const op = m.getChild('MatchOp');
        const value = m.getChildren('StringLiteral').at(-1);
        if (!op || !value) return false;
        return (
          query.slice(op.from, op.to) === '=' &&
          decodedValue(query.slice(value.from, value.to)) === namespace
        );
      });
      if (!fixed) ok = false;
    },
  });
  return ok;
}

const fragments = [
  'namespace',
  '"namespace"',
  '=~',
  '!=',
  '=',
  "'",
  '"',
  '`',
  '{',
  '}',
  ',',
  ' or ',
  ' # ',
  '$namespace',
  '\\',
  'up',
  '[5m]',
  ' offset 1h',
  '__name__',
  '.*',
  'b1',
  '(',
  ')',
  ' + ',
  'info(',
  '[5m:1m]',
  '\n',
];

const seeds = [
  'sum(q{namespace="$namespace",pod="$pod"})',
  "rate(q{pod='$pod', namespace='$namespace'}[5m])",
  'q{namespace=`$namespace`} / on(pod) r{namespace="$namespace"}',
];

const splicedArb = fc
  .tuple(
    fc.constantFrom(...seeds),
    fc.array(fc.tuple(fc.nat(), fc.constantFrom(...fragments)), { minLength: 1, maxLength: 4 }),
  )
  .map(([seed, edits]) =>
    edits.reduce((q, [at, fragment]) => {
      const i = at % (q.length + 1);
      return q.slice(0, i) + fragment + q.slice(i);
    }, seed),
  );

test('whatever the checker accepts, the substituted query reads only the pod namespace', () => {
  let accepted = 0;
  fc.assert(
    fc.property(fc.oneof(splicedArb, fc.string({ maxLength: 40 })), (query) => {
      if (namespaceScopeProblems(query, owned).length > 0) return;
      let sent: string;
      try {
        sent = substitute(query, { namespace: podNamespace, pod: 'web-0', container: 'app' });
      } catch {
        return; // the client refuses it at query time: nothing is read
      }
      accepted += 1;
      assert.ok(everySelectorReadsOnly(sent, podNamespace), `accepted ${query}\nsent ${sent}`);
    }),
    { numRuns: 3000 },
  );
  // The property must not hold vacuously: some spliced queries stay valid.
  assert.ok(accepted > 0, 'no generated query was accepted');
});
