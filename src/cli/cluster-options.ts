/**
 * `--kubeconfig` and `--context` on every `tollgate` subcommand that reads a cluster,
 * found in kubectl's order: --kubeconfig, else $KUBECONFIG (a list of files, merged;
 * missing ones skipped), else ~/.kube/config, else the pod's service account. No cluster
 * at all is an error that says how to give one, never the client library's fallback to
 * http://localhost:8080 (which fails later with a TLS or connection message), and an
 * unreachable one is named with its context, server and cause. The rules themselves
 * (order, merge, --context) are src/cluster/kubeconfig.ts, which `tollgate run` uses too.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { VersionApi, type KubeConfig } from '@kubernetes/client-node';
import { reuseConnections } from '../cluster/client.ts';
import {
  kubeconfigSource,
  loadKubeconfig,
  noClusterMessage,
  type ClusterFlags,
} from '../cluster/kubeconfig.ts';

export type { ClusterFlags } from '../cluster/kubeconfig.ts';

/** Adds `--kubeconfig <path>` and `--context <name>`, kubectl's names and meaning. */
export function withCluster(command: Command): Command {
  return command
    .option(
      '--kubeconfig <path>',
      'kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod service account)',
    )
    .option('--context <name>', 'kubeconfig context (default: its current-context)');
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
  if (source.kind === 'absent') throw new Error(noClusterMessage(source.podWithoutToken, why));
  if (source.kind === 'missing') throw new Error(source.reason);
  return reuseConnections(loadKubeconfig(source, flags.context));
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
