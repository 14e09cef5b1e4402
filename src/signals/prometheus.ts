/**
 * A small client for the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`).
 *
 * Policy queries carry `$namespace`, `$pod` and `$container` placeholders. They are
 * substituted here, inside PromQL string literals only, with the value escaped for the
 * literal's quote style: a pod name can never close the string and inject a selector.
 * A placeholder outside a string literal is an error naming the query, because raw
 * substitution there would let a label value become PromQL.
 *
 * Every failure (timeout, HTTP status, a Prometheus `status: error`, a malformed body)
 * is a `PrometheusError` whose message names the query, so a broken signal in a policy
 * can be found from one log line.
 */

export type QueryVariables = Readonly<Partial<Record<'namespace' | 'pod' | 'container', string>>>;

export interface Sample {
  /** Epoch milliseconds. */
  readonly at: number;
  readonly value: number;
}

export interface Series {
  readonly labels: Readonly<Record<string, string>>;
  readonly samples: readonly Sample[];
}

export class PrometheusError extends Error {
  readonly query: string;
  constructor(query: string, message: string, options?: { cause?: unknown }) {
    super(`prometheus query ${JSON.stringify(query)}: ${message}`, options);
    this.name = 'PrometheusError';
    this.query = query;
  }
}

export interface PrometheusClient {
  /** Instant query: one sample per series, at `atMs` (default: Prometheus' now). */
  instant(query: string, options?: { atMs?: number; signal?: AbortSignal }): Promise<Series[]>;
  /** Range query over [startMs, endMs] at `stepMs` resolution. */
  range(
    query: string,
    startMs: number,
    endMs: number,
    stepMs: number,
    options?: { signal?: AbortSignal },
  ): Promise<Series[]>;
}

export interface PrometheusClientOptions {
  readonly url: string;
  /** Per request; a slow Prometheus must not stall a loop pass. Default 5 s. */
  readonly timeoutMs?: number;
  readonly fetch?: typeof fetch;
  readonly headers?: Readonly<Record<string, string>>;
}

const placeholder = /\$(namespace|pod|container)\b/g;

/** Escapes a value for a PromQL string literal quoted with `quote` (Go string escapes). */
export function escapeLabelValue(value: string, quote: '"' | "'" = '"'): string {
  let out = '';
  for (const char of value) {
    if (char === '\\') out += '\\\\';
    else if (char === quote) out += `\\${quote}`;
    else if (char === '\n') out += '\\n';
    else if (char === '\r') out += '\\r';
    else if (char === '\t') out += '\\t';
    else out += char;
  }
  return out;
}

/** Escapes a value so a RE2 regular expression matches it literally. */
export function escapeRegex(value: string): string {
  return value.replace(/[\\.^$|?*+()[\]{}]/g, '\\$&');
}

interface Segment {
  readonly text: string;
  /** The quote of the string literal this segment is inside, or null for PromQL code. */
  readonly quote: '"' | "'" | '`' | null;
}

/** Splits a query into PromQL code and string-literal contents (quotes excluded). */
function segments(query: string): Segment[] {
  const parts: Segment[] = [];
  let index = 0;
  let code = '';
  while (index < query.length) {
    const char = query[index] as string;
    if (char === '"' || char === "'" || char === '`') {
      parts.push({ text: code + char, quote: null });
      let body = '';
      index += 1;
      while (index < query.length && query[index] !== char) {
        if (char !== '`' && query[index] === '\\' && index + 1 < query.length) {
          body += query.slice(index, index + 2);
          index += 2;
        } else {
          body += query[index];
          index += 1;
        }
      }
      if (index >= query.length) throw new PrometheusError(query, 'unterminated string literal');
      parts.push({ text: body, quote: char });
      code = char; // the closing quote starts the next code segment
      index += 1;
    } else {
      code += char;
      index += 1;
    }
  }
  parts.push({ text: code, quote: null });
  return parts;
}

/**
 * Replaces `$namespace`, `$pod` and `$container` inside string literals with the
 * escaped values. Throws when a placeholder is outside a literal or has no value.
 */
export function substitute(query: string, variables: QueryVariables): string {
  const parts = segments(query);
  return parts
    .map((part, index) => {
      if (part.quote === null) {
        const stray = part.text.match(placeholder);
        if (stray) {
          throw new PrometheusError(
            query,
            `${stray[0]} must be inside a quoted label value, e.g. pod="${stray[0]}"`,
          );
        }
        return part.text;
      }
      const quote = part.quote;
      // In a regex matcher (`=~`, `!~`) a value is also regex-escaped, so a pod named
      // `web.1` matches only itself, not `web-1` too.
      const regex = /[=!]~\s*["'`]$/.test(parts[index - 1]?.text ?? '');
      return part.text.replace(placeholder, (_match, name: keyof QueryVariables) => {
        const raw = variables[name];
        if (raw === undefined) throw new PrometheusError(query, `no value for $${name}`);
        const value = regex ? escapeRegex(raw) : raw;
        if (quote === '`') {
          if (value.includes('`')) {
            throw new PrometheusError(query, `$${name} value contains a backtick`);
          }
          return value;
        }
        return escapeLabelValue(value, quote);
      });
    })
    .join('');
}

/** The placeholders a query uses. */
export function placeholdersOf(query: string): Set<'namespace' | 'pod' | 'container'> {
  const found = new Set<'namespace' | 'pod' | 'container'>();
  for (const match of query.matchAll(placeholder)) {
    found.add(match[1] as 'namespace' | 'pod' | 'container');
  }
  return found;
}

/**
 * Rewrites a per-pod query into one query for many pods: every matcher
 * `label="$pod"` becomes `label=~"a|b|c"` (Prometheus anchors regex matchers; each name is regex-escaped),
 * and returns the label that carries the pod name in the result. Returns undefined
 * when `$pod` appears anywhere else (inside a larger string, in a regex matcher),
 * because then the rewrite could change what the query means; the caller then asks
 * per pod.
 */
export function batchByPod(
  query: string,
  pods: readonly string[],
): { query: string; podLabel: string } | undefined {
  if (pods.length === 0) return undefined;
  const matcher = /([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"\$pod"/g;
  const labels = new Set<string>();
  const rewritten = query.replace(matcher, (_m, label: string) => {
    labels.add(label);
    const alternation = pods.map((pod) => escapeLabelValue(escapeRegex(pod))).join('|');
    return `${label}=~"${alternation}"`;
  });
  if (labels.size !== 1 || rewritten.includes('$pod')) return undefined;
  const [podLabel] = labels;
  return { query: rewritten, podLabel: podLabel as string };
}

interface ApiResponse {
  status?: string;
  errorType?: string;
  error?: string;
  data?: { resultType?: string; result?: unknown };
}

function parseValue(query: string, pair: unknown): Sample {
  if (!Array.isArray(pair) || pair.length !== 2) {
    throw new PrometheusError(query, `malformed sample ${JSON.stringify(pair)}`);
  }
  const [seconds, text] = pair as [unknown, unknown];
  const value = Number(text);
  if (typeof seconds !== 'number' || typeof text !== 'string' || Number.isNaN(Number(text))) {
    if (text === 'NaN') return { at: Math.round(Number(seconds) * 1000), value: Number.NaN };
    throw new PrometheusError(query, `malformed sample ${JSON.stringify(pair)}`);
  }
  return { at: Math.round(seconds * 1000), value };
}

function parseResult(query: string, body: ApiResponse): Series[] {
  const data = body.data;
  if (!data || !Array.isArray(data.result)) {
    if (data?.resultType === 'scalar' && Array.isArray(data.result)) {
      return [{ labels: {}, samples: [parseValue(query, data.result)] }];
    }
    throw new PrometheusError(query, 'response has no data.result');
  }
  if (data.resultType === 'scalar') {
    return [{ labels: {}, samples: [parseValue(query, data.result)] }];
  }
  return data.result.map((item: unknown) => {
    const entry = item as { metric?: Record<string, string>; value?: unknown; values?: unknown };
    const labels = entry.metric ?? {};
    if (Array.isArray(entry.values)) {
      return { labels, samples: entry.values.map((pair) => parseValue(query, pair)) };
    }
    if (entry.value !== undefined) return { labels, samples: [parseValue(query, entry.value)] };
    throw new PrometheusError(query, `series without value(s): ${JSON.stringify(item)}`);
  });
}

export function createPrometheusClient(options: PrometheusClientOptions): PrometheusClient {
  const base = options.url.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 5000;
  const doFetch = options.fetch ?? fetch;

  async function call(
    query: string,
    path: string,
    params: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<Series[]> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let response: Response;
    try {
      response = await doFetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...options.headers },
        body: new URLSearchParams({ query, ...params }).toString(),
        signal: combined,
      });
    } catch (error) {
      if (timeout.aborted) {
        throw new PrometheusError(query, `timed out after ${timeoutMs} ms`, { cause: error });
      }
      const reason = error instanceof Error ? error.message : String(error);
      throw new PrometheusError(query, `request to ${base}${path} failed: ${reason}`, {
        cause: error,
      });
    }
    let body: ApiResponse;
    const text = await response.text();
    try {
      body = JSON.parse(text) as ApiResponse;
    } catch {
      throw new PrometheusError(
        query,
        `HTTP ${response.status}, body is not JSON: ${text.slice(0, 200)}`,
      );
    }
    if (!response.ok || body.status !== 'success') {
      throw new PrometheusError(
        query,
        `HTTP ${response.status} ${body.errorType ?? ''}: ${body.error ?? 'status ' + body.status}`.trim(),
      );
    }
    return parseResult(query, body);
  }

  return {
    instant(query, opts = {}) {
      const params: Record<string, string> = {};
      if (opts.atMs !== undefined) params.time = String(opts.atMs / 1000);
      return call(query, '/api/v1/query', params, opts.signal);
    },
    range(query, startMs, endMs, stepMs, opts = {}) {
      return call(
        query,
        '/api/v1/query_range',
        { start: String(startMs / 1000), end: String(endMs / 1000), step: String(stepMs / 1000) },
        opts.signal,
      );
    },
  };
}
