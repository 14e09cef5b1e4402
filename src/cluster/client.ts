/**
 * Where tollgate's API credentials come from: an explicit kubeconfig path, the
 * in-cluster service account, or the default chain ($KUBECONFIG, ~/.kube/config).
 */
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

export type KubeConfigSource =
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'in-cluster' }
  | { readonly kind: 'default' };

const serviceAccountToken = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** Loads a KubeConfig and checks it names a current cluster; errors say which source failed and why. */
export function loadKubeConfig(source: KubeConfigSource = { kind: 'default' }): KubeConfig {
  const kubeConfig = new KubeConfig();
  let origin: string;
  switch (source.kind) {
    case 'file':
      if (!existsSync(source.path))
        throw new Error(`kubeconfig ${source.path}: file does not exist`);
      try {
        kubeConfig.loadFromFile(source.path);
      } catch (error) {
        throw new Error(`kubeconfig ${source.path}: ${(error as Error).message}`, { cause: error });
      }
      origin = `kubeconfig ${source.path}`;
      break;
    case 'in-cluster':
      if (!process.env.KUBERNETES_SERVICE_HOST || !existsSync(serviceAccountToken)) {
        throw new Error(
          `in-cluster config: KUBERNETES_SERVICE_HOST is ${process.env.KUBERNETES_SERVICE_HOST ? 'set' : 'not set'} and ${serviceAccountToken} ${existsSync(serviceAccountToken) ? 'exists' : 'does not exist'}; not running in a pod?`,
        );
      }
      kubeConfig.loadFromCluster();
      origin = 'in-cluster service account';
      break;
    case 'default':
      kubeConfig.loadFromDefault();
      origin = process.env.KUBECONFIG
        ? `KUBECONFIG=${process.env.KUBECONFIG}`
        : 'default kubeconfig';
      break;
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster)
    throw new Error(
      `${origin}: no current context with a cluster (current-context: ${kubeConfig.getCurrentContext() || 'unset'})`,
    );
  return kubeConfig;
}
