/**
 * tollgate's API connections: one connection pool per TLS identity, and the live reads
 * of the stale-guard. (Where the kubeconfig comes from: kubeconfig.ts.)
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../lib/clock.ts';
import { LiveReader, type FreshnessHealth, type StaleGuardPolicy } from './stale-guard.ts';

type DispatcherFactory = (cluster: unknown, agentOptions: Record<string, unknown>) => unknown;
const reusing = new WeakSet<KubeConfig>();
/** Distinct TLS identities kept per KubeConfig; a rotated client certificate is a new one. */
const maxAgents = 8;

/**
 * Makes every API request of this KubeConfig share one connection pool.
 *
 * @kubernetes/client-node 2.0 builds a new undici Agent for every request
 * (`KubeConfig.createDispatcher`, called from `applySecurityAuthentication`), so each
 * request opens its own connection with a full TLS handshake, and idle sockets pile up
 * until their keep-alive ends: at hundreds of writes per second most of tollgate's and
 * the apiserver's CPU went to handshakes. Here the Agent is kept per TLS identity
 * (server, CA, client certificate and key, verification settings, proxy), hashed (the
 * map keys hold no key material; the last options are kept to spare the hash while
 * they stay the same); a changed certificate file gives a new Agent and the
 * oldest beyond `maxAgents` is closed gracefully (its requests in flight finish).
 * Bearer tokens travel in headers, not in the Agent, so token refresh is unaffected.
 *
 * The hook is a private method of the library; if a release renames it, this leaves
 * the KubeConfig as it was (correct, only slower) instead of failing.
 */
export function reuseConnections(
  kubeConfig: KubeConfig,
  options: { readonly clock?: Clock } = {},
): KubeConfig {
  const target = kubeConfig as unknown as { createDispatcher?: DispatcherFactory };
  const original = target.createDispatcher;
  if (typeof original !== 'function' || reusing.has(kubeConfig)) return kubeConfig;
  reusing.add(kubeConfig);
  readCredentialFilesOncePerSecond(kubeConfig, options.clock ?? systemClock);
  const agents = new Map<string, unknown>();
  target.createDispatcher = function (cluster, agentOptions) {
    const key = tlsIdentity(cluster, agentOptions);
    if (agents.has(key)) return agents.get(key);
    const agent: unknown = original.call(this, cluster, agentOptions);
    if (agents.size >= maxAgents) {
      const [oldestKey, oldest] = agents.entries().next().value as [string, unknown];
      agents.delete(oldestKey);
      void (oldest as { close?: () => Promise<void> } | undefined)
        ?.close?.()
        .catch(() => undefined);
    }
    agents.set(key, agent);
    return agent;
  };
  return kubeConfig;
}

/** A credential file is read again at most this often: a rotated one is in use within it. */
export const credentialFileRecheckMs = 1_000;

interface ClusterLike {
  readonly caFile?: string;
  readonly caData?: string;
  readonly skipTLSVerify?: boolean;
  readonly tlsServerName?: string;
}
interface UserLike {
  readonly certFile?: string;
  readonly certData?: string;
  readonly keyFile?: string;
  readonly keyData?: string;
  readonly impersonateUser?: string;
}
interface TlsOptionsSource {
  applyHTTPSOptions?: (opts: object) => void;
  getCurrentCluster(): ClusterLike | null;
  getCurrentUser(): UserLike | null;
}

/**
 * The library reads the kubeconfig's CA, client certificate and key files
 * (`caFile`, `certFile`, `keyFile`; in a pod, the service account's CA) synchronously for
 * every request (`applyHTTPSOptions`): three file reads per write, 7% of the process in a
 * 10,000-pod release wave. Here each file is read once and again only after
 * `credentialFileRecheckMs`, so a rotated file is in use within a second; the library is
 * handed the contents as the `*Data` fields it also accepts. (The service account's
 * token is the library's own business: it reads it again once a minute, as client-go.)
 *
 * The library also decodes the CA, certificate and key from base64 into new Buffers for
 * every request (1.3 s of a 10,000-pod release wave's CPU). Its answer is kept while
 * what it is read from stays the same (the cluster and user, and the values of the
 * fields it reads: data, file contents, TLS settings, impersonation), so requests share
 * one decoding, and `tlsIdentity` finds their pool by reference. Each request gets
 * headers of its own. If a release renames the method, the KubeConfig is left as it was.
 */
function readCredentialFilesOncePerSecond(kubeConfig: KubeConfig, clock: Clock): void {
  const target = kubeConfig as unknown as TlsOptionsSource;
  const original = target.applyHTTPSOptions;
  if (typeof original !== 'function') return;
  const read = new Map<string, { readonly base64: string; readonly at: number }>();
  const contents = (file: string): string => {
    const now = clock.now();
    const kept = read.get(file);
    if (kept !== undefined && now - kept.at < credentialFileRecheckMs) return kept.base64;
    const base64 = fs.readFileSync(file).toString('base64');
    read.set(file, { base64, at: now });
    return base64;
  };
  let last: { readonly inputs: readonly unknown[]; readonly options: HttpsOptions } | undefined;
  target.applyHTTPSOptions = function (this: TlsOptionsSource, opts: object) {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    const ca = cluster?.caFile ? contents(cluster.caFile) : cluster?.caData;
    const cert = user?.certFile ? contents(user.certFile) : user?.certData;
    const key = user?.keyFile ? contents(user.keyFile) : user?.keyData;
    const inputs = [
      cluster,
      user,
      ca,
      cert,
      key,
      cluster?.skipTLSVerify,
      cluster?.tlsServerName,
      user?.impersonateUser,
    ];
    if (last === undefined || !inputs.every((value, i) => value === last?.inputs[i])) {
      const view = Object.create(this) as TlsOptionsSource;
      view.getCurrentCluster = () =>
        cluster ? { ...cluster, caFile: undefined, caData: ca } : cluster;
      view.getCurrentUser = () =>
        user
          ? { ...user, certFile: undefined, keyFile: undefined, certData: cert, keyData: key }
          : user;
      const options: HttpsOptions = {};
      original.call(view, options);
      last = { inputs, options };
    }
    copyHttpsOptions(last.options, opts as HttpsOptions);
  };
}

/** What `applyHTTPSOptions` sets: TLS material and settings, and (impersonation) headers. */
type HttpsOptions = Record<string, unknown> & { headers?: Record<string, string> };

/** `from` into a request's own `to`; headers into a new object, never shared between two. */
function copyHttpsOptions(from: HttpsOptions, to: HttpsOptions): void {
  for (const [name, value] of Object.entries(from)) {
    if (name === 'headers') to.headers = { ...to.headers, ...(value as Record<string, string>) };
    else to[name] = value;
  }
}

/**
 * The last identity hashed and the values it was hashed from: the library builds the
 * options again for every request (new Buffers of the same certificates), so comparing
 * them with the last ones (a memcmp) spares a SHA-256 of every PEM per request.
 */
let lastIdentity: { readonly values: readonly unknown[]; readonly key: string } | undefined;

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  return Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b);
}

function tlsIdentity(cluster: unknown, agentOptions: Record<string, unknown>): string {
  const c = (cluster ?? {}) as Record<string, unknown>;
  const values = [
    c.server,
    c.proxyUrl,
    c.skipTLSVerify,
    c.tlsServerName,
    ...['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'].map(
      (name) => agentOptions[name],
    ),
  ];
  const last = lastIdentity;
  if (last && values.every((value, i) => sameValue(value, last.values[i]))) return last.key;
  const key = hashIdentity(values);
  lastIdentity = { values, key };
  return key;
}

function hashIdentity(values: readonly unknown[]): string {
  const hash = createHash('sha256');
  for (const value of values) {
    hash.update(
      value === undefined
        ? '\u0000undefined'
        : Buffer.isBuffer(value)
          ? value
          : JSON.stringify(value),
    );
    hash.update('\u0000|');
  }
  return hash.digest('hex');
}

/** A live read of one pod (the stale-guard's and the loops' bounded reads); undefined once it is gone. */
export function podReader(
  kubeConfig: KubeConfig,
): (namespace: string, name: string) => Promise<V1Pod | undefined> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return async (namespace, name) => {
    try {
      return await core.readNamespacedPod({ namespace, name });
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  };
}

/** One live read of a pod; undefined once it is gone. */
export type PodRead = (namespace: string, name: string) => Promise<V1Pod | undefined>;

/** Thrown when a bounded live read was refused or failed; `retryAfterMs` says when to try again. */
export class LiveReadRefused extends Error {
  readonly retryAfterMs: number;
  constructor(reason: string, retryAfterMs: number) {
    super(reason);
    this.name = 'LiveReadRefused';
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * The loops' live reads, spent from the policy's budget (StalenessPolicy `liveReads`:
 * QPS, burst) behind its circuit breaker (LiveReader in stale-guard.ts), so a struggling
 * API server is not hammered by reads. A refused or failed read rejects with
 * `LiveReadRefused` naming the reason (budget spent, breaker open, the read's error);
 * the loop records it on the write it guarded and decides again later. A new policy
 * with other `liveReads` settings takes effect at once (with a fresh breaker).
 */
export function boundedPodReader(
  read: PodRead,
  liveReads: () => StaleGuardPolicy['liveReads'],
  clock?: Clock,
  health?: FreshnessHealth,
): PodRead {
  let settings = liveReads();
  let reader = new LiveReader<V1Pod>({ read, policy: settings, clock, health });
  return async (namespace, name) => {
    const current = liveReads();
    if (JSON.stringify(current) !== JSON.stringify(settings)) {
      settings = current;
      reader = new LiveReader<V1Pod>({ read, policy: settings, clock, health });
    }
    const outcome = await reader.read(namespace, name);
    if (outcome.ok) return outcome.object;
    throw new LiveReadRefused(outcome.reason, outcome.retryAfterMs);
  };
}

/**
 * The API server's current revision, from a one-item pod list (a consistent read from
 * etcd, taken now): what a new leader's view must reach before it trusts its cache for
 * destructive acts (StaleGuard.beginCatchUp).
 */
export async function freshPodRevision(kubeConfig: KubeConfig): Promise<string | undefined> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const list = await core.listPodForAllNamespaces({ limit: 1 });
  return list.metadata?.resourceVersion;
}
