/**
 * The real deploy tools for tollgate's tests: `kustomize` and `helm` (and `kubectl`, and
 * `argocd-lua`: Argo CD's Lua interpreter), built from the Go module proxy by
 * test/tools/build.sh (cached by version), or taken from TOLLGATE_KUSTOMIZE / TOLLGATE_HELM. Also `tollgate` itself as a process, the way an
 * operator runs it. Everything rendered is parsed into plain objects.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubernetesObject } from '@kubernetes/client-node';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const deployDir = join(repoRoot, 'deploy');
export const chartDir = join(repoRoot, 'chart/tollgate');

export type Manifest = KubernetesObject & Record<string, unknown>;

const built = new Map<string, string>();

/** Path of a tool binary: the environment override, else the cached build. */
export function toolPath(tool: 'kustomize' | 'helm' | 'kubectl' | 'argocd-lua'): string {
  const fromEnv = process.env[`TOLLGATE_${tool.toUpperCase().replace('-', '_')}`];
  if (fromEnv) return fromEnv;
  let path = built.get(tool);
  if (!path) {
    const out = execFileSync('bash', [join(repoRoot, 'test/tools/build.sh'), tool], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    path = out.trim().split('\n').at(-1)!;
    built.set(tool, path);
  }
  return path;
}

/** Parses a multi-document YAML stream; a document that fails to parse is an error. */
export function parseManifests(text: string, origin: string): Manifest[] {
  return parseAllDocuments(text).flatMap((doc, index) => {
    if (doc.errors.length > 0)
      throw new Error(`${origin}: document ${index + 1}: ${doc.errors[0]!.message}`);
    const value = doc.toJS() as Manifest | null;
    return value ? [value] : [];
  });
}

/** `kustomize build DIR` with the real binary. */
export function kustomizeBuild(dir: string): Manifest[] {
  const out = execFileSync(toolPath('kustomize'), ['build', dir], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return parseManifests(out, `kustomize build ${dir}`);
}

/**
 * Writes an overlay of deploy/base into a temp folder and builds it: `components` are
 * folders under deploy/components (e.g. 'monitoring'), `fields` are merged into its
 * kustomization.yaml (namespace, namePrefix, patches, ...).
 */
export function kustomizeOverlay(
  options: { components?: string[]; fields?: Record<string, unknown> } = {},
): Manifest[] {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-overlay-'));
  // kustomize refuses absolute paths to a base or a component folder.
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: [relative(dir, join(deployDir, 'base'))],
    components: (options.components ?? []).map((c) =>
      relative(dir, join(deployDir, 'components', c)),
    ),
    ...options.fields,
  };
  writeFileSync(join(dir, 'kustomization.yaml'), JSON.stringify(kustomization, null, 2));
  return kustomizeBuild(dir);
}

/** deploy/base with every optional component: what the dashboards and alerts tests read. */
export const withMonitoring = (): Manifest[] => kustomizeOverlay({ components: ['monitoring'] });

/** `helm template RELEASE CHART --namespace NS [--set k=v ...]` with the real binary. */
export function helmTemplate(
  options: {
    release?: string;
    namespace?: string;
    set?: string[];
    chart?: string;
    /** Render against this cluster (`--dry-run=server`): the chart's `lookup` sees it. */
    kubeconfig?: string;
  } = {},
): Manifest[] {
  const args = [
    'template',
    options.release ?? 'tollgate',
    options.chart ?? chartDir,
    '--namespace',
    options.namespace ?? 'tollgate-system',
    ...(options.set ?? []).flatMap((s) => ['--set', s]),
    ...(options.kubeconfig ? ['--dry-run=server', '--kubeconfig', options.kubeconfig] : []),
  ];
  const out = execFileSync(toolPath('helm'), args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, HELM_CACHE_HOME: tmpdir(), HELM_CONFIG_HOME: tmpdir() },
  });
  return parseManifests(out, `helm ${args.join(' ')}`);
}

/** Runs `tollgate ARGS` (src/cli/main.ts) and returns its exit code and output. */
export function runTollgate(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { code: number; stdout: string; stderr: string } {
  try {
    const stdout = execFileSync(process.execPath, [join(repoRoot, 'src/cli/main.ts'), ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
      cwd: repoRoot,
    });
    return { code: 0, stdout, stderr: '' };
  } catch (error) {
    const e = error as { status: number | null; stdout: string; stderr: string };
    return { code: e.status ?? -1, stdout: e.stdout, stderr: e.stderr };
  }
}

export function describeObject(object: KubernetesObject): string {
  return `${object.kind}/${object.metadata?.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata?.name}`;
}

/** A loopback port free at the time of asking. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
