/**
 * `tollgate validate` warnings about kinds ObjectConditions reference that tollgate's
 * shipped ClusterRole (deploy/base/rbac.yaml) does not let it list and watch. Such a
 * policy is valid, and at run time only the pods depending on the reference hold
 * ("unreadable: tollgate may not list it"), but the author should know before merging:
 * grant the kind in an overlay, or reference another object.
 *
 * Offline by design (validate reads no cluster): whether the API server serves a kind at
 * all is `tollgate plan`'s warning. The resource name is derived from the kind the way
 * Kubernetes names most resources (lower case, plural); a kind with an irregular plural
 * may be reported although granted, never the reverse.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { PolicyError } from '../policy/errors.ts';
import type { Policy } from '../policy/model.ts';

export interface PolicyRule {
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly verbs?: readonly string[];
}

/** deploy/base/rbac.yaml beside the sources (a checkout, not the container image). */
export const shippedRbacFile = join(
  dirname(fileURLToPath(import.meta.url)),
  '../../deploy/base/rbac.yaml',
);

/**
 * The rules of the ClusterRoles in `file`; undefined when the shipped file is not there
 * (an installed image carries no deploy/), an error when a named file is missing.
 */
export function shippedClusterRoleRules(file?: string): PolicyRule[] | undefined {
  if (file === undefined && !existsSync(shippedRbacFile)) return undefined;
  file ??= shippedRbacFile;
  if (!existsSync(file)) throw new Error(`--rbac ${file}: no such file`);
  const rules: PolicyRule[] = [];
  for (const document of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const object = document.toJS() as { kind?: string; rules?: PolicyRule[] } | null;
    if (object?.kind === 'ClusterRole') rules.push(...(object.rules ?? []));
  }
  return rules;
}

/** The resource name Kubernetes gives most kinds: `ConfigMap` -> `configmaps`, `Policy` -> `policies`. */
export function resourceOfKind(kind: string): string {
  const lower = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(lower)) return `${lower}es`;
  if (/[^aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}

function grants(rules: readonly PolicyRule[], group: string, resource: string): boolean {
  const has = (list: readonly string[] | undefined, value: string) =>
    (list ?? []).includes(value) || (list ?? []).includes('*');
  const verbs = ['list', 'watch'];
  return verbs.every((verb) =>
    rules.some((r) => has(r.apiGroups, group) && has(r.resources, resource) && has(r.verbs, verb)),
  );
}

/** One warning per ObjectCondition whose kind the rules do not let tollgate list and watch. */
export function referenceWarnings(policy: Policy, rules: readonly PolicyRule[]): PolicyError[] {
  const warnings: PolicyError[] = [];
  for (const gp of policy.gatePolicies) {
    gp.conditions.forEach((condition, i) => {
      if (condition.type !== 'ObjectCondition') return;
      const { apiVersion, kind } = condition.object;
      const group = apiVersion.includes('/') ? (apiVersion.split('/')[0] as string) : '';
      const resource = resourceOfKind(kind);
      if (grants(rules, group, resource)) return;
      warnings.push({
        file: gp.source.file,
        document: gp.source.document,
        path: `spec.conditions[${i}].object`,
        message: `tollgate's shipped ClusterRole (deploy/base/rbac.yaml) does not grant list and watch on ${resource} (API group "${group}"): pods of GatePolicy "${gp.name}" will hold as unreadable until an overlay grants it`,
      });
    });
  }
  return warnings;
}
