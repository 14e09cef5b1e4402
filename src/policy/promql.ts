/**
 * The namespace boundary of a policy's PromQL queries.
 *
 * tollgate queries Prometheus with a view of every tenant's series, so a ResizePolicy
 * query must read only the series of the pod it sizes. The rule, checked on the syntax
 * tree that the Prometheus project's own grammar (`@prometheus-io/lezer-promql`) gives:
 *
 * - every vector selector (plain, in a range, a subquery, behind `offset` or `@`, inside
 *   any function or aggregation) carries `namespace="$namespace"`, the placeholder that
 *   the Prometheus client substitutes with the pod's namespace (quoted with `"`, `'` or
 *   a backtick; the literal's raw text must be exactly `$namespace`, so no escape can
 *   spell it);
 * - no other `namespace` matcher: a regex or negative matcher could reach any tenant,
 *   and a literal names a namespace other than the pod's;
 * - a quoted label name with an escape sequence is refused rather than decoded, so
 *   `"name\x73pace"` cannot hide a matcher;
 * - no `info()`: it joins series the query does not name;
 * - no comments: the client's placeholder substitution reads quotes, and a quote in a
 *   comment would make it see a different query than Prometheus does;
 * - anything the grammar does not parse is refused (the parser recovers from errors;
 *   tollgate never acts on the recovered tree).
 *
 * Queries are refused, never rewritten: the author sees the exact reason in `tollgate
 * validate` and the query that runs is the query that was reviewed.
 */
import { createRequire } from 'node:module';
import type { parser as PromqlParser } from '@prometheus-io/lezer-promql';
import type { SyntaxNode } from '@lezer/common';

let loadedParser: typeof PromqlParser | undefined;

/**
 * The grammar, loaded at the first query read: a process whose policy has none never
 * holds it (0.4 MB of source with its parsing libraries, which V8 keeps for the life of
 * the process).
 */
function promqlParser(): typeof PromqlParser {
  loadedParser ??= (
    createRequire(import.meta.url)('@prometheus-io/lezer-promql') as {
      parser: typeof PromqlParser;
    }
  ).parser;
  return loadedParser;
}

/** The one namespace matcher value a query may use. */
export const namespacePlaceholder = '$namespace';

const maxShownChars = 60;

/**
 * The reasons `query` could read series outside the pod's namespace; empty when every
 * selector is pinned to `namespace="$namespace"`. `owned` (the tenant's namespaces) only
 * sharpens the message for a literal namespace.
 */
export function namespaceScopeProblems(query: string, owned: readonly string[]): string[] {
  const problems: string[] = [];
  const tree = promqlParser().parse(query);
  tree.iterate({
    enter(ref) {
      const node = ref.node;
      if (node.type.isError) {
        problems.push(parseProblem(query, node));
        return false;
      }
      if (node.name === 'LineComment') {
        problems.push('comments are not allowed in a policy query; remove the "#" comment');
      } else if (node.name === 'FunctionCall' && isInfoCall(node)) {
        problems.push(
          `info() joins series the query does not name and cannot be scoped to the pod's namespace; select the info metric with namespace="${namespacePlaceholder}" instead`,
        );
      } else if (node.name === 'VectorSelector') {
        problems.push(...selectorProblems(query, node, owned));
      }
      return undefined;
    },
  });
  return [...new Set(problems)];
}

function parseProblem(query: string, node: SyntaxNode): string {
  const column = node.from + 1;
  const near = query.slice(node.from, node.from + 20);
  return `does not parse as PromQL at column ${column}${near ? ` near ${JSON.stringify(near)}` : ''}`;
}

function isInfoCall(call: SyntaxNode): boolean {
  return call.getChild('FunctionIdentifier')?.getChild('Info') != null;
}

interface Matcher {
  /** The label name, or undefined when a quoted name holds an escape sequence. */
  readonly label: string | undefined;
  readonly rawLabel: string;
  readonly op: string;
  /** The value literal as written, quotes included. */
  readonly rawValue: string;
}

function selectorProblems(query: string, selector: SyntaxNode, owned: readonly string[]): string[] {
  const text = (node: SyntaxNode) => query.slice(node.from, node.to);
  const shown = shorten(text(selector));
  const matchers = matchersOf(selector, text);
  const problems: string[] = [];
  for (const m of matchers) {
    if (m.label === undefined) {
      problems.push(
        `label name ${m.rawLabel} in ${shown} uses an escape sequence; write label names plainly`,
      );
    }
  }
  const namespaceMatchers = matchers.filter((m) => m.label === 'namespace');
  if (namespaceMatchers.length === 0) {
    problems.push(
      `query has no namespace matcher in ${shown}; scope every selector with namespace="${namespacePlaceholder}" so it reads only the pod's namespace`,
    );
  }
  for (const m of namespaceMatchers) problems.push(...namespaceMatcherProblems(m, owned));
  return problems;
}

function namespaceMatcherProblems(m: Matcher, owned: readonly string[]): string[] {
  if (m.op !== '=') {
    return [
      `namespace matcher ${m.op}${m.rawValue} could select other tenants' namespaces; use namespace="${namespacePlaceholder}"`,
    ];
  }
  const value = m.rawValue.slice(1, -1);
  if (value === namespacePlaceholder) return [];
  if (!owned.includes(value)) {
    return [
      `namespace ${JSON.stringify(value)} is not one of the tenant's namespaces (${owned.join(', ')}); use namespace="${namespacePlaceholder}"`,
    ];
  }
  return [
    `namespace ${JSON.stringify(value)} is written literally; use namespace="${namespacePlaceholder}" so the query reads only the pod's own namespace`,
  ];
}

/** The label matchers of a vector selector, in order (the bare `{"metric"}` name excluded). */
function matchersOf(selector: SyntaxNode, text: (node: SyntaxNode) => string): Matcher[] {
  const list = selector.getChild('LabelMatchers');
  if (!list) return [];
  const matchers: Matcher[] = [];
  for (let child = list.firstChild; child; child = child.nextSibling) {
    const op = child.getChild('MatchOp');
    const literals = child.getChildren('StringLiteral');
    if (child.name === 'UnquotedLabelMatcher') {
      const name = child.getChild('LabelName');
      const value = literals[0];
      if (!name || !op || !value) continue; // a parse error, reported on its own
      matchers.push({
        label: text(name),
        rawLabel: text(name),
        op: text(op),
        rawValue: text(value),
      });
    } else if (child.name === 'QuotedLabelMatcher') {
      const name = child.getChild('QuotedLabelName')?.getChild('StringLiteral');
      const value = literals[0];
      if (!name || !op || !value) continue;
      const raw = text(name);
      const label = raw.includes('\\') ? undefined : raw.slice(1, -1);
      matchers.push({ label, rawLabel: raw, op: text(op), rawValue: text(value) });
    }
  }
  return matchers;
}

function shorten(selector: string): string {
  const flat = selector.replace(/\s+/g, ' ');
  return `\`${flat.length > maxShownChars ? `${flat.slice(0, maxShownChars - 3)}...` : flat}\``;
}
