/**
 * `--kubeconfig` and `--context` on every `tollgate` subcommand that reads a cluster,
 * found in kubectl's order: --kubeconfig, else $KUBECONFIG (a list of files, merged;
 * missing ones skipped), else ~/.kube/config, else the pod's service account. No cluster
 * at all is an error that says how to give one, never the client library's fallback to
 * http://localhost:8080 (which fails later with a TLS or connection message), and an
 * unreachable one is named with its context, server and cause. (`tollgate run` has its
 * own, pure settings parser: run-config.ts.)
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { Command } from 'commander';
import { KubeConfig, VersionApi } from '@kubernetes/client-node';
import { reuseConnections } from '../cluster/client.ts';

export interface ClusterFlags {
  readonly kubeconfig?: string;
  readonly context?: string;
}

/** Adds `--kubeconfig <path>` and `--context <name>`, kubectl's names and meaning. */
export function withCluster(command: Command): Command {
  return command
    .option(
      '--kubeconfig <path>',
      'kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod service account)',
    )
    .option('--context <name>', 'kubeconfig context (default: its current-context)');
}

export const serviceAccountTokenFile = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** Where a command's cluster comes from. */
export type KubeconfigSource =
  | { readonly kind: 'files'; readonly files: readonly string[]; readonly origin: string }
  | { readonly kind: 'in-cluster' }
  /** No kubeconfig anywhere; `podWithoutToken`: KUBERNETES_SERVICE_HOST set, no token. */
  | { readonly kind: 'absent'; readonly podWithoutToken: boolean }
  | { readonly kind: 'missing'; readonly reason: string };

/** kubectl's order, decided from the flags, the environment and which files exist. */
export function kubeconfigSource(
  flags: ClusterFlags,
  env: NodeJS.ProcessEnv,
  exists: (path: string) => boolean,
): KubeconfigSource {
  if (flags.kubeconfig !== undefined) {
    if (!exists(flags.kubeconfig))
      return { kind: 'missing', reason: `kubeconfig ${flags.kubeconfig}: file does not exist` };
    return { kind: 'files', files: [flags.kubeconfig], origin: `kubeconfig ${flags.kubeconfig}` };
  }
  const listed = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  if (listed.length > 0) {
    const files = listed.filter(exists);
    if (files.length === 0)
      return { kind: 'missing', reason: `KUBECONFIG=${env.KUBECONFIG}: no such file` };
    return { kind: 'files', files, origin: `KUBECONFIG=${env.KUBECONFIG}` };
  }
  const home = join(env.HOME ?? homedir(), '.kube', 'config');
  if (exists(home)) return { kind: 'files', files: [home], origin: `kubeconfig ${home}` };
  if (!env.KUBERNETES_SERVICE_HOST) return { kind: 'absent', podWithoutToken: false };
  if (!exists(serviceAccountTokenFile)) return { kind: 'absent', podWithoutToken: true };
  return { kind: 'in-cluster' };
}

function noCluster(source: KubeconfigSource & { kind: 'absent' }, why: string): string {
  const pod = source.podWithoutToken
    ? `; KUBERNETES_SERVICE_HOST is set, but ${serviceAccountTokenFile} does not exist (a pod without a service account token)`
    : '';
  return `no cluster ${why}: give --kubeconfig, set KUBECONFIG, or create ~/.kube/config${pod}`;
}

/**
 * A cluster to read from, chosen like kubectl. `why` completes "no cluster ...", e.g.
 * "to compare with".
 */
export function clusterConfig(
  flags: ClusterFlags,
  env: NodeJS.ProcessEnv,
  why: string,
  exists: (path: string) => boolean = existsSync,
): KubeConfig {
  const source = kubeconfigSource(flags, env, exists);
  if (source.kind === 'absent') throw new Error(noCluster(source, why));
  if (source.kind === 'missing') throw new Error(source.reason);
  const kc = new KubeConfig();
  const origin = source.kind === 'files' ? source.origin : 'in-cluster service account';
  try {
    if (source.kind === 'in-cluster') kc.loadFromCluster();
    else loadFiles(kc, source.files);
  } catch (error) {
    throw new Error(`${origin}: ${(error as Error).message}`, { cause: error });
  }
  if (flags.context !== undefined) {
    const names = kc.getContexts().map((c) => c.name);
    if (!names.includes(flags.context))
      throw new Error(
        `context "${flags.context}" is not in ${origin} (contexts: ${names.join(', ') || 'none'})`,
      );
    kc.setCurrentContext(flags.context);
  }
  if (!kc.getCurrentCluster())
    throw new Error(
      `${origin}: no current context with a cluster (current-context: ${kc.getCurrentContext() || 'unset'}); give --context`,
    );
  return reuseConnections(kc);
}

/** The first file, then each further one merged in, as kubectl merges $KUBECONFIG. */
function loadFiles(kc: KubeConfig, files: readonly string[]): void {
  kc.loadFromFile(files[0]!);
  for (const file of files.slice(1)) {
    const more = new KubeConfig();
    more.loadFromFile(file);
    kc.mergeConfig(more, true);
  }
}

/**
 * One request that any authenticated user may make (/version), so a command that would
 * otherwise wait for informers to sync fails at once, naming context, server and cause.
 */
export async function reachCluster(kc: KubeConfig): Promise<void> {
  try {
    await kc.makeApiClient(VersionApi).getCode();
  } catch (error) {
    throw new Error(unreachable(kc, error), { cause: error });
  }
}

export function unreachable(kc: KubeConfig, error: unknown): string {
  return `cannot reach the cluster of context "${kc.getCurrentContext()}" at ${kc.getCurrentCluster()?.server}: ${rootCause(error)}`;
}

/** The innermost cause's code and message: `fetch failed` alone does not say why. */
export function rootCause(error: unknown): string {
  const parts: string[] = [];
  let e: unknown = error;
  for (let depth = 0; e && depth < 4; depth += 1) {
    const err = e as { message?: string; code?: string; cause?: unknown };
    const text = err.code ? `${err.message} (${err.code})` : err.message;
    // A wrapper often repeats its cause's message; say each thing once.
    if (text && !parts.some((p) => p.includes(text))) parts.push(text);
    e = err.cause;
  }
  return parts.join(': ') || String(error);
}
