/**
 * The API side of one informer: paginated list and watch of one resource, raw JSON
 * as the API server sends it. Built on @kubernetes/client-node's request plumbing
 * (KubeConfig authentication and TLS, discovery through `KubernetesObjectApi`, the
 * `Watch` class for the stream) without its `ListWatch`, which stops on unknown
 * errors and cannot paginate, bookmark or trim (see the informer).
 *
 * Objects stay raw JSON (timestamps are RFC 3339 strings, not Date): the library's
 * typed deserialiser would turn list items into class instances with Date fields
 * while watch events arrive as plain JSON, and it silently drops fields its
 * generated models do not know yet.
 */
import {
  HttpMethod,
  KubernetesObjectApi,
  Watch,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { toKubeError } from './errors.ts';

export interface ResourceTarget {
  readonly apiVersion: string;
  readonly kind: string;
  /** Watch one namespace through the namespaced endpoint; absent = all namespaces (or cluster-scoped). */
  readonly namespace?: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

export interface ListPage {
  readonly items: KubernetesObject[];
  readonly resourceVersion: string;
  readonly continueToken: string | undefined;
}

export interface WatchStart {
  readonly resourceVersion: string;
  readonly timeoutSeconds: number;
}

export type RawEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchHandle {
  stop(): void;
}

/** What an informer needs from the API server. The real one is `createResourceSource`; unit tests use a scripted one. */
export interface ResourceSource {
  readonly description: string;
  list(options: { limit: number; continueToken?: string; signal: AbortSignal }): Promise<ListPage>;
  /**
   * Opens a watch. `onEvent` gets every decoded event; `onDone` is called exactly once
   * with null on a clean close or the error that ended the stream (HTTP errors carry
   * `statusCode`).
   */
  watch(
    start: WatchStart,
    onEvent: (type: RawEventType, object: KubernetesObject) => void,
    onDone: (error: Error | null) => void,
  ): WatchHandle;
}

interface ResolvedResource {
  readonly plural: string;
  readonly namespaced: boolean;
}

/** `KubernetesObjectApi` with its discovery cache and request pipeline opened up for raw lists. */
class RawObjectApi extends KubernetesObjectApi {
  async resolve(apiVersion: string, kind: string): Promise<ResolvedResource> {
    const resource = await this.resource(apiVersion, kind);
    if (!resource) {
      throw new Error(
        `the API server does not serve kind ${kind} in ${apiVersion} (discovery found no such resource)`,
      );
    }
    return { plural: resource.name, namespaced: resource.namespaced };
  }

  /**
   * GET with the configuration's authentication and TLS, parsing the body ourselves:
   * the library's response path (`requestPromise`) picks a generated model from the
   * body's apiVersion/kind even when asked for 'any', so a list comes back typed with
   * `metadata._continue` instead of `continue` (found against kube-apiserver 1.37:
   * pagination silently stopped after the first page) and Date timestamps.
   */
  async getRaw<T>(
    path: string,
    query: Record<string, string | undefined>,
    signal: AbortSignal,
  ): Promise<T> {
    const config = this.configuration;
    let context = config.baseServer.makeRequestContext(path, HttpMethod.GET);
    context.setHeaderParam('Accept', 'application/json');
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined) context.setQueryParam(name, value);
    }
    context.setSignal(signal);
    await config.authMethods.BearerToken?.applySecurityAuthentication(context);
    await config.authMethods.default?.applySecurityAuthentication(context);
    for (const middleware of config.middleware) context = await middleware.pre(context).toPromise();
    const response = await config.httpApi.send(context).toPromise();
    const text = await response.body.text();
    if (response.httpStatusCode < 200 || response.httpStatusCode > 299) {
      // The same shape the generated clients throw, so toKubeError reads it the same way.
      throw Object.assign(new Error(`HTTP-Code: ${response.httpStatusCode}`), {
        code: response.httpStatusCode,
        body: text,
      });
    }
    return JSON.parse(text) as T;
  }
}

function apiPrefix(apiVersion: string): string {
  return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

export interface SourceOptions {
  /** Inactivity limit of the watch stream; must exceed the API server's bookmark interval (about 1 min). */
  readonly watchInactivityMs?: number;
}

export function createResourceSource(
  kubeConfig: KubeConfig,
  target: ResourceTarget,
  options: SourceOptions = {},
): ResourceSource {
  const api = kubeConfig.makeApiClient(RawObjectApi);
  const watcher = new Watch(kubeConfig);
  // Declared private in the typings but a plain field: the connect timeout and, once
  // streaming, the inactivity limit. The default 30 s is shorter than the API
  // server's bookmark interval and would cut every quiet watch.
  (watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs =
    options.watchInactivityMs ?? 90_000;
  let path: string | undefined;
  const description = `${target.kind}.${target.apiVersion}${target.namespace ? ` in ${target.namespace}` : ''}`;

  async function resourcePath(): Promise<string> {
    if (path) return path;
    const resolved = await api.resolve(target.apiVersion, target.kind);
    const scope =
      resolved.namespaced && target.namespace
        ? `/namespaces/${encodeURIComponent(target.namespace)}`
        : '';
    path = `${apiPrefix(target.apiVersion)}${scope}/${resolved.plural}`;
    return path;
  }

  return {
    description,
    async list({ limit, continueToken, signal }) {
      try {
        const list = await api.getRaw<{
          items?: KubernetesObject[];
          metadata?: { resourceVersion?: string; continue?: string };
        }>(
          await resourcePath(),
          {
            limit: String(limit),
            continue: continueToken,
            labelSelector: target.labelSelector,
            fieldSelector: target.fieldSelector,
          },
          signal,
        );
        const resourceVersion = list.metadata?.resourceVersion;
        if (!resourceVersion)
          throw new Error(`list of ${description} returned no metadata.resourceVersion`);
        return {
          items: list.items ?? [],
          resourceVersion,
          continueToken: list.metadata?.continue || undefined,
        };
      } catch (error) {
        throw toKubeError(error, `list ${description}`);
      }
    },
    watch(start, onEvent, onDone) {
      let stopped = false;
      let controller: AbortController | undefined;
      let finished = false;
      const finish = (error: Error | null): void => {
        if (finished) return;
        finished = true;
        onDone(error);
      };
      resourcePath()
        .then((resolvedPath) =>
          watcher.watch(
            resolvedPath,
            {
              resourceVersion: start.resourceVersion,
              allowWatchBookmarks: true,
              timeoutSeconds: start.timeoutSeconds,
              labelSelector: target.labelSelector,
              fieldSelector: target.fieldSelector,
            },
            (type: string, object: KubernetesObject) => {
              if (!stopped) onEvent(type as RawEventType, object);
            },
            (error: unknown) => finish(error ? toKubeError(error, `watch ${description}`) : null),
          ),
        )
        .then(
          (abortController) => {
            controller = abortController;
            if (stopped) abortController.abort();
          },
          (error: unknown) => finish(toKubeError(error, `watch ${description}`)),
        );
      return {
        stop() {
          stopped = true;
          controller?.abort();
        },
      };
    },
  };
}
