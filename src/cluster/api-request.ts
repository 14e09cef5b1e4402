/**
 * tollgate's API writes sent straight through the KubeConfig's connection pool.
 *
 * The client library sends every call of its generated APIs through the fetch API:
 * a Request, Headers and a Response with web streams for each body, a RequestContext, a
 * chain of observable middleware, its serializer both ways. For a write whose answer
 * tollgate reads one field of, that was 127 KB allocated per write (a pods/status patch
 * answered with a 4 KB pod, test/unit/cluster/write-allocation.test.ts; 27 KB here). A
 * leader writing the Released conditions of 10,000 fresh pods sends 10,000 of them in
 * three minutes, and the fetch of those writes was about half of what a busy process
 * promoted to its old generation (docs/BENCHMARKS.md, Memory).
 *
 * Here a write is one `request` of undici, the HTTP client the library itself sends
 * through, on the pool the library picks for the KubeConfig (`KubeConfig.createDispatcher`,
 * one per TLS identity: client.ts), authenticated by the library's own
 * `applySecurityAuthentication` (bearer tokens, exec and OIDC plugins, impersonation,
 * basic auth), so what reaches the API server is what the library would send. A write's
 * answer is read for its resourceVersion alone, so it asks for the object's metadata
 * (`metadataAnswer`: the API server answers a PartialObjectMetadata, 1.2 KB where the
 * pod was 2.2 KB and more, and encodes less; a server that cannot falls back to JSON);
 * the answer is read as text and handed back whole. An HTTP error is thrown in the shape
 * `toKubeError` reads (`statusCode`, the Status `body`, `headers`), a network failure as
 * undici's error with its `code`, an aborted signal as its reason.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { getGlobalDispatcher, type Dispatcher } from 'undici';

export interface ApiCall {
  readonly method: 'PATCH' | 'POST' | 'DELETE';
  /** The path below the cluster's server, already encoded: `/api/v1/namespaces/ns/pods/p`. */
  readonly path: string;
  /** The query string without its `?`, already encoded; empty for none. */
  readonly query: string;
  /** The body's media type (a patch strategy, or JSON). */
  readonly contentType: string;
  readonly body: unknown;
}

/**
 * The Accept header of a write: the written object's metadata (as kubectl asks for tables
 * and metadata-only clients for PartialObjectMetadata), else the object as JSON. A Status
 * (an error, a delete that removed the object at once) comes back as itself.
 */
export const metadataAnswer =
  'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json';

/** Sends one call; resolves to the text of a 2xx answer, rejects otherwise. */
export type ApiCaller = (call: ApiCall, signal: AbortSignal) => Promise<string>;

export interface ApiCallerOptions {
  /**
   * Wraps the pool a call is sent through (the fence at the wire: writer.ts); asked once
   * per pool, its answer kept while the pool lives.
   */
  readonly wrapPool?: (pool: Dispatcher) => Dispatcher;
}

/** What the library's `applySecurityAuthentication` fills in: the request's headers and pool. */
class Authentication {
  readonly headers: Record<string, string> = {};
  dispatcher: Dispatcher | undefined;
  setHeaderParam(name: string, value: string): void {
    this.headers[name] = value;
  }
  setDispatcher(dispatcher: unknown): void {
    this.dispatcher = dispatcher as Dispatcher;
  }
}

interface Authenticating {
  applySecurityAuthentication(context: Authentication): Promise<void>;
}

/** An HTTP answer outside 2xx, as `toKubeError` reads it. */
export class ApiAnswerError extends Error {
  readonly statusCode: number;
  readonly body: string;
  readonly headers: Readonly<Record<string, unknown>>;
  constructor(statusCode: number, body: string, headers: Readonly<Record<string, unknown>>) {
    super(`HTTP ${statusCode}`);
    this.name = 'ApiAnswerError';
    this.statusCode = statusCode;
    this.body = body;
    this.headers = headers;
  }
}

/** A kubeconfig server's origin and path prefix (a prefix as Rancher's `/k8s/clusters/c-x`). */
export interface ServerParts {
  readonly origin: string;
  readonly prefix: string;
}

/** The parts of a kubeconfig's `server`. */
export function serverParts(server: string): ServerParts {
  const url = new URL(server);
  return { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '') };
}

export function createApiCaller(kubeConfig: KubeConfig, options: ApiCallerOptions = {}): ApiCaller {
  const authenticating = kubeConfig as unknown as Authenticating;
  const wrapped = new WeakMap<Dispatcher, Dispatcher>();
  const poolOf = (dispatcher: Dispatcher | undefined): Dispatcher => {
    const pool = dispatcher ?? getGlobalDispatcher();
    if (options.wrapPool === undefined) return pool;
    let view = wrapped.get(pool);
    if (view === undefined) {
      view = options.wrapPool(pool);
      wrapped.set(pool, view);
    }
    return view;
  };
  let server: (ServerParts & { readonly text: string }) | undefined;
  const serverOf = (): ServerParts => {
    const text = kubeConfig.getCurrentCluster()?.server;
    if (!text) throw new Error('the kubeconfig names no current cluster with a server');
    if (server?.text !== text) server = { text, ...serverParts(text) };
    return server;
  };

  return async (call, signal) => {
    const { origin, prefix } = serverOf();
    const authentication = new Authentication();
    await authenticating.applySecurityAuthentication(authentication);
    const answer = await poolOf(authentication.dispatcher).request({
      origin,
      path: `${prefix}${call.path}${call.query ? `?${call.query}` : ''}`,
      method: call.method,
      headers: {
        ...authentication.headers,
        accept: metadataAnswer,
        'content-type': call.contentType,
      },
      body: JSON.stringify(call.body),
      signal,
    });
    const text = await answer.body.text();
    if (answer.statusCode >= 200 && answer.statusCode < 300) return text;
    throw new ApiAnswerError(answer.statusCode, text, answer.headers);
  };
}
