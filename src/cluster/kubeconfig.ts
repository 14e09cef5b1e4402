/**
 * Where every `tollgate` command that talks to a cluster finds its kubeconfig, and how it
 * is loaded: kubectl's rules. The order: --kubeconfig, else the files $KUBECONFIG lists
 * (missing ones skipped), else ~/.kube/config, else the pod's service account. Several
 * files are merged as kubectl merges them: the first file to define a cluster, user or
 * context name keeps it, and the current-context is the first one a file sets
 * (@kubernetes/client-node's own merge throws on a repeated name and keeps the first
 * file's current-context even when it is empty). --context picks any context of the
 * merged files; one that is not there is named with where it was looked for.
 */
import { delimiter, join } from 'node:path';
import { homedir } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';

export interface ClusterFlags {
  readonly kubeconfig?: string;
  readonly context?: string;
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
  flags: Pick<ClusterFlags, 'kubeconfig'>,
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

/** "no cluster `why`: ..." with how to give one. */
export function noClusterMessage(podWithoutToken: boolean, why: string): string {
  const pod = podWithoutToken
    ? `; KUBERNETES_SERVICE_HOST is set, but ${serviceAccountTokenFile} does not exist (a pod without a service account token)`
    : '';
  return `no cluster ${why}: give --kubeconfig, set KUBECONFIG, or create ~/.kube/config${pod}`;
}

export type LoadableSource = KubeconfigSource & { kind: 'files' | 'in-cluster' };

/**
 * The configuration of a found source with `context` (if given) made current. Errors
 * name the source: an unreadable file, an unknown context (with those there are), no
 * current context with a cluster.
 */
export function loadKubeconfig(source: LoadableSource, context?: string): KubeConfig {
  const origin = source.kind === 'files' ? source.origin : 'in-cluster service account';
  const kc = new KubeConfig();
  try {
    if (source.kind === 'in-cluster') kc.loadFromCluster();
    else mergeFiles(kc, source.files);
  } catch (error) {
    throw new Error(`${origin}: ${(error as Error).message}`, { cause: error });
  }
  if (context !== undefined) {
    const names = kc.getContexts().map((c) => c.name);
    if (!names.includes(context))
      throw new Error(
        `context "${context}" is not in ${origin} (contexts: ${names.join(', ') || 'none'})`,
      );
    kc.setCurrentContext(context);
  }
  if (!kc.getCurrentCluster())
    throw new Error(
      `${origin}: no current context with a cluster (current-context: ${kc.getCurrentContext() || 'unset'}); give --context`,
    );
  return kc;
}

/** Each file loaded by the library, merged in kubectl's way: the first to set a name wins. */
function mergeFiles(kc: KubeConfig, files: readonly string[]): void {
  kc.loadFromFile(files[0]!);
  for (const file of files.slice(1)) {
    const more = new KubeConfig();
    more.loadFromFile(file);
    kc.mergeConfig(withoutNamesOf(kc, more), Boolean(kc.getCurrentContext()));
  }
}

/** `more` without the clusters, users and contexts `kc` already names. */
function withoutNamesOf(kc: KubeConfig, more: KubeConfig): KubeConfig {
  const known = (items: readonly { name: string }[]) => new Set(items.map((i) => i.name));
  const [clusters, users, contexts] = [known(kc.clusters), known(kc.users), known(kc.contexts)];
  const rest = new KubeConfig();
  rest.loadFromOptions({
    clusters: more.clusters.filter((c) => !clusters.has(c.name)),
    users: more.users.filter((u) => !users.has(u.name)),
    contexts: more.contexts.filter((c) => !contexts.has(c.name)),
    currentContext: more.getCurrentContext(),
  });
  return rest;
}
