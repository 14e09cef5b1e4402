/**
 * How deploy/ runs tollgate, read from what it ships, and the soak's replica launched the
 * same way: the image's entrypoint and environment (scripts/build-image.sh), the
 * Deployment's args, its ConfigMap (envFrom) and its own variables (which win, as in
 * Kubernetes), the pod fields it reads (name, namespace), its Secrets written as files
 * under the folders standing for their mounts, and its grace period. What the soak sets
 * itself is what an overlay sets (the repositories, the metrics address) and the cluster
 * access of a process outside the cluster (a kubeconfig instead of the service account).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from '../e2e/deploy/tools.ts';

/** Where the image's files live (its WorkingDir); the checkout stands for it. */
const imageApp = '/app';
/** The namespace deploy/base installs into: what the pod's metadata.namespace reads. */
const shippedNamespace = 'tollgate-system';

interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath: string } };
}
interface Mount {
  readonly name: string;
  readonly mountPath: string;
}
interface Volume {
  readonly name: string;
  readonly secret?: { readonly secretName: string; readonly defaultMode?: number };
  readonly emptyDir?: unknown;
}

export interface Shipped {
  /** The image's Entrypoint and Env (scripts/build-image.sh). */
  readonly entrypoint: readonly string[];
  readonly imageEnv: Readonly<Record<string, string>>;
  readonly args: readonly string[];
  readonly configMap: Readonly<Record<string, string>>;
  readonly env: readonly EnvVar[];
  readonly mounts: readonly Mount[];
  readonly volumes: readonly Volume[];
  readonly terminationGraceSeconds: number;
}

export interface ReplicaSite {
  readonly identity: string;
  /** The replica's own folder: each mounted volume is a subfolder of it. */
  readonly folder: string;
  readonly kubeconfig: string;
  /** What the host gives every process (PATH); the image's PATH means nothing here. */
  readonly hostEnv: Readonly<Record<string, string>>;
  /** ConfigMap values an overlay sets (TOLLGATE_* names). */
  readonly overlay: Readonly<Record<string, string>>;
  /** Each Secret's data by name, as `kubectl create secret` would hold it. */
  readonly secrets: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** Whether a file exists on this host (the libraries the image preloads). */
  readonly hostHas?: (path: string) => boolean;
}

export interface ReplicaLaunch {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Files to write before the start: the mounted Secrets' keys. */
  readonly files: readonly {
    readonly path: string;
    readonly content: string;
    readonly mode: number;
  }[];
  /** The folders standing for the mounted volumes, to create before the start. */
  readonly folders: readonly string[];
  readonly terminationGraceMs: number;
}

/** Reads deploy/base and the image's config from the checkout. */
export function shippedRun(root = repoRoot): Shipped {
  const read = (path: string): string => readFileSync(join(root, path), 'utf8');
  const deployment = parse(read('deploy/base/deployment.yaml')) as {
    spec: { template: { spec: PodSpec } };
  };
  const pod = deployment.spec.template.spec;
  const container = pod.containers.find((c) => c.name === 'tollgate') ?? pod.containers[0]!;
  const config = parse(read('deploy/base/config.yaml')) as { data: Record<string, string> };
  const image = imageConfig(read('scripts/build-image.sh'));
  return {
    entrypoint: image.Entrypoint,
    imageEnv: Object.fromEntries(image.Env.map((e) => splitOnce(e, '='))),
    args: container.args ?? [],
    configMap: config.data,
    env: container.env ?? [],
    mounts: container.volumeMounts ?? [],
    volumes: pod.volumes ?? [],
    terminationGraceSeconds: pod.terminationGracePeriodSeconds ?? 30,
  };
}

interface PodSpec {
  readonly terminationGracePeriodSeconds?: number;
  readonly containers: readonly {
    readonly name: string;
    readonly args?: string[];
    readonly env?: EnvVar[];
    readonly volumeMounts?: Mount[];
  }[];
  readonly volumes?: Volume[];
}

/** The image config JSON scripts/build-image.sh writes: its Entrypoint and Env. */
function imageConfig(script: string): { Entrypoint: string[]; Env: string[] } {
  const field = (name: string): string[] => {
    const match = new RegExp(`"${name}":(\\[[^\\]]*\\])`).exec(script);
    if (match === null) throw new Error(`scripts/build-image.sh: no image ${name}`);
    return JSON.parse(match[1]!) as string[];
  };
  return { Entrypoint: field('Entrypoint'), Env: field('Env') };
}

function splitOnce(text: string, separator: string): [string, string] {
  const at = text.indexOf(separator);
  return [text.slice(0, at), text.slice(at + separator.length)];
}

/** The replica's command, environment and files: deploy/ as shipped, on this host. */
export function replicaLaunch(shipped: Shipped, site: ReplicaSite): ReplicaLaunch {
  const local = localPaths(shipped, site);
  const env: Record<string, string> = {
    ...mapValues(shipped.imageEnv, local),
    ...shipped.configMap,
    ...site.overlay,
    ...containerEnv(shipped.env, site, local),
    ...site.hostEnv,
    TOLLGATE_KUBECONFIG: site.kubeconfig,
  };
  assertPreloadsOnHost(env, site.hostHas ?? existsSync);
  return {
    command: process.execPath,
    args: [
      ...shipped.entrypoint.slice(1).map((p) => p.replace(imageApp, repoRoot)),
      ...shipped.args,
    ],
    env,
    files: secretFiles(shipped, site),
    folders: shipped.mounts.map((m) => volumeFolder(site, m.name)),
    terminationGraceMs: shipped.terminationGraceSeconds * 1000,
  };
}

/**
 * The loader only warns about a preload it cannot find and runs on without it: a soak on
 * such a host would judge glibc's malloc as the image's allocator. Refused instead.
 */
function assertPreloadsOnHost(
  env: Readonly<Record<string, string>>,
  hostHas: (path: string) => boolean,
): void {
  const missing = (env.LD_PRELOAD ?? '')
    .split(/[:\s]+/)
    .filter((lib) => lib !== '' && !hostHas(lib));
  if (missing.length > 0)
    throw new Error(
      `the image preloads ${missing.join(', ')} (scripts/build-image.sh, LD_PRELOAD) and this host has no such file: install it (bash scripts/ensure-debian-packages.sh installs libjemalloc2)`,
    );
}

const volumeFolder = (site: ReplicaSite, volume: string): string => join(site.folder, volume);

/** A path under a mount, rewritten to the folder standing for its volume. */
function localPaths(shipped: Shipped, site: ReplicaSite): (value: string) => string {
  return (value) => {
    const mount = shipped.mounts.find(
      (m) => value === m.mountPath || value.startsWith(`${m.mountPath}/`),
    );
    return mount === undefined
      ? value
      : volumeFolder(site, mount.name) + value.slice(mount.mountPath.length);
  };
}

function mapValues(
  values: Readonly<Record<string, string>>,
  map: (value: string) => string,
): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, map(v)]));
}

/** The container's own variables: literal values (mounted paths made local), pod fields. */
function containerEnv(
  vars: readonly EnvVar[],
  site: ReplicaSite,
  local: (value: string) => string,
): Record<string, string> {
  const field = (path: string): string => {
    if (path === 'metadata.name') return site.identity;
    if (path === 'metadata.namespace') return shippedNamespace;
    throw new Error(`deploy/base: the soak cannot stand in for the pod field ${path}`);
  };
  return Object.fromEntries(
    vars.map((v) => [
      v.name,
      v.value !== undefined ? local(v.value) : field(v.valueFrom?.fieldRef?.fieldPath ?? ''),
    ]),
  );
}

/** Every key of every Secret the Deployment mounts, as a file in the volume's folder. */
function secretFiles(shipped: Shipped, site: ReplicaSite): ReplicaLaunch['files'] {
  return shipped.volumes.flatMap((volume) => {
    if (volume.secret === undefined) return [];
    const data = site.secrets[volume.secret.secretName];
    if (data === undefined)
      throw new Error(
        `the soak has no Secret ${volume.secret.secretName}, which deploy/base mounts`,
      );
    return Object.entries(data).map(([key, content]) => ({
      path: join(volumeFolder(site, volume.name), key),
      content,
      mode: volume.secret!.defaultMode ?? 0o644,
    }));
  });
}
