/**
 * A small renderer for the subset of kustomize that deploy/ uses, because this machine
 * has no kubectl or kustomize binary and npm has no maintained kustomize port:
 * `resources` (files, or folders holding a kustomization.yaml), `components` (folders
 * with `kind: Component`) and `configMapGenerator` (files and literals, with
 * `options.disableNameSuffixHash: true` and `options.labels`). Any other field is an
 * error naming the file and the field, so deploy/ can never silently rely on a feature
 * this renderer ignores. Objects come out in kustomization order.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubernetesObject } from '@kubernetes/client-node';

export interface RenderedObject extends KubernetesObject {
  readonly [field: string]: unknown;
}

const supportedFields = new Set([
  'apiVersion',
  'kind',
  'resources',
  'components',
  'configMapGenerator',
]);

export function renderKustomization(
  folder: string,
  extraComponents: string[] = [],
): RenderedObject[] {
  return render(
    resolve(folder),
    'Kustomization',
    extraComponents.map((c) => resolve(c)),
  );
}

function render(
  folder: string,
  expectedKind: 'Kustomization' | 'Component',
  extraComponents: string[],
): RenderedObject[] {
  const file = join(folder, 'kustomization.yaml');
  if (!existsSync(file)) throw new Error(`${folder}: no kustomization.yaml`);
  const spec = readYamlDocuments(file)[0] as Record<string, unknown> | undefined;
  if (!spec) throw new Error(`${file}: empty`);
  for (const field of Object.keys(spec)) {
    if (!supportedFields.has(field))
      throw new Error(`${file}: field "${field}" is not supported by this renderer`);
  }
  if (spec.kind !== expectedKind)
    throw new Error(`${file}: kind must be ${expectedKind}, got ${String(spec.kind)}`);

  const objects: RenderedObject[] = [];
  for (const entry of list(spec.resources, file, 'resources')) {
    const path = join(folder, entry);
    if (!existsSync(path)) throw new Error(`${file}: resources: "${entry}" does not exist`);
    if (statSync(path).isDirectory()) objects.push(...render(path, 'Kustomization', []));
    else objects.push(...(readYamlDocuments(path) as RenderedObject[]));
  }
  for (const [index, generator] of (
    (spec.configMapGenerator as Record<string, unknown>[] | undefined) ?? []
  ).entries()) {
    objects.push(configMapFrom(generator, folder, `${file}: configMapGenerator[${index}]`));
  }
  const components = [
    ...list(spec.components, file, 'components').map((c) => join(folder, c)),
    ...extraComponents,
  ];
  for (const component of components) objects.push(...render(component, 'Component', []));
  return objects;
}

function configMapFrom(
  generator: Record<string, unknown>,
  folder: string,
  where: string,
): RenderedObject {
  const options = (generator.options ?? {}) as {
    disableNameSuffixHash?: boolean;
    labels?: Record<string, string>;
  };
  if (options.disableNameSuffixHash !== true) {
    throw new Error(
      `${where}: only options.disableNameSuffixHash: true is supported (name hashes are not computed)`,
    );
  }
  if (typeof generator.name !== 'string') throw new Error(`${where}: name is required`);
  const data: Record<string, string> = {};
  for (const entry of list(generator.files, where, 'files')) {
    const [key, path] = entry.includes('=')
      ? (entry.split('=', 2) as [string, string])
      : [basename(entry), entry];
    data[key] = readFileSync(join(folder, path), 'utf8');
  }
  for (const literal of list(generator.literals, where, 'literals')) {
    const at = literal.indexOf('=');
    if (at < 1) throw new Error(`${where}: literal "${literal}" is not key=value`);
    data[literal.slice(0, at)] = literal.slice(at + 1);
  }
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: generator.name,
      ...(typeof generator.namespace === 'string' ? { namespace: generator.namespace } : {}),
      ...(options.labels ? { labels: options.labels } : {}),
    },
    data,
  };
}

function list(value: unknown, file: string, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new Error(`${file}: ${field} must be a list of strings`);
  }
  return value;
}

function readYamlDocuments(path: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'));
  return docs.flatMap((doc, index) => {
    if (doc.errors.length > 0)
      throw new Error(`${path}: document ${index + 1}: ${doc.errors[0]!.message}`);
    const value = doc.toJS() as unknown;
    return value == null ? [] : [value];
  });
}

/** The folder of deploy/ in this repository. */
export const deployDir = resolve(dirname(new URL(import.meta.url).pathname), '../../deploy');
