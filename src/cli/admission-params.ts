/**
 * Renders the parameters of tollgate's admission policies (deploy/base/admission.yaml)
 * from a compiled policy, so the ConfigMap tollgate-system/tollgate-admission never
 * drifts from the Tenant files it mirrors: regenerate it in the same pull request that
 * changes a Tenant's namespaces or gate prefixes.
 *
 * Layout (read by the CEL in deploy/base/admission.yaml):
 *   controllers       comma-separated usernames allowed to remove governed gates
 *   prefixes          every tenant's gate prefixes (what the policies govern)
 *   namespace.<ns>    the prefixes of the tenant(s) owning namespace <ns>
 */
import type { Policy } from '../policy/model.ts';

export const defaultControllers = ['system:serviceaccount:tollgate-system:tollgate'];

export interface AdmissionParams {
  readonly apiVersion: 'v1';
  readonly kind: 'ConfigMap';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Record<string, string>;
  };
  readonly data: Record<string, string>;
}

export function admissionParams(
  policy: Policy,
  controllers: readonly string[] = defaultControllers,
): AdmissionParams {
  const problems: string[] = [];
  const governed = new Set<string>();
  const byNamespace = new Map<string, Set<string>>();
  for (const tenant of policy.tenants.values()) {
    for (const prefix of tenant.gatePrefixes) {
      // The CEL matches with startsWith: "team-a" would also govern "team-ab.io/x".
      if (!prefix.endsWith('/'))
        problems.push(
          `Tenant ${tenant.name} (${tenant.source.file}): gate prefix "${prefix}" must end with "/"`,
        );
      if (prefix.includes(','))
        problems.push(
          `Tenant ${tenant.name} (${tenant.source.file}): gate prefix "${prefix}" must not contain ","`,
        );
      governed.add(prefix);
    }
    for (const namespace of tenant.namespaces) {
      const prefixes = byNamespace.get(namespace) ?? new Set<string>();
      for (const prefix of tenant.gatePrefixes) prefixes.add(prefix);
      byNamespace.set(namespace, prefixes);
    }
  }
  for (const controller of controllers) {
    if (controller.trim() === '' || controller.includes(','))
      problems.push(`controller "${controller}" must be a non-empty username without ","`);
  }
  if (problems.length > 0)
    throw new Error(`cannot render admission parameters:\n  ${problems.join('\n  ')}`);
  const data: Record<string, string> = {
    controllers: controllers.join(','),
    prefixes: [...governed].sort().join(','),
  };
  for (const namespace of [...byNamespace.keys()].sort()) {
    data[`namespace.${namespace}`] = [...byNamespace.get(namespace)!].sort().join(',');
  }
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'tollgate-admission',
      namespace: 'tollgate-system',
      labels: { 'app.kubernetes.io/name': 'tollgate' },
    },
    data,
  };
}
