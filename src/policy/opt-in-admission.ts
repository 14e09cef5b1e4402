/**
 * Opting in with a label: the admission objects that let a workload join a GatePolicy by
 * carrying `tollgate.io/gate-policy: <GatePolicy name>` on its pods, with the gate added
 * by the API server itself (CEL admission policies: no webhook server, no certificates).
 * Rendered from the policy by `tollgate admission-params --opt-in`, so they change in the
 * same commit as the GatePolicies they follow.
 *
 * Per GatePolicy, in its tenant's namespaces, for pods created with the opt-in label
 * naming it:
 * - a MutatingAdmissionPolicy adds the policy's gate when the pod's labels also match the
 *   GatePolicy's selector (an apply configuration: a gate already there stays once);
 * - a ValidatingAdmissionPolicy refuses such a pod if it still lacks the gate after
 *   mutation: its labels do not match the selector (tollgate would never release it, so
 *   it is refused at once with the reason rather than held forever), or the mutating
 *   policy is missing. Nothing that opted in can skip budget, pacing and audit.
 * And one ValidatingAdmissionPolicy for the label itself: a value that names no GatePolicy
 * of the namespace's tenant (a typo, a namespace no tenant owns) is refused, naming the
 * policies the namespace may opt in to.
 *
 * Only CREATE is matched: scheduling gates can only be removed after creation, so a label
 * added to an existing pod cannot gate it (and is not refused either). Every policy fails
 * closed (`failurePolicy: Fail`): a CEL error refuses the pod instead of admitting it
 * ungated.
 */
import { byCodeUnits } from '../lib/compare.ts';
import type { GatePolicy, LabelSelector, Policy } from './model.ts';

export const optInLabel = 'tollgate.io/gate-policy';
const group = 'admissionregistration.k8s.io/v1';
const namePrefix = 'tollgate-opt-in';

export interface AdmissionObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels: Record<string, string> };
  readonly spec: Record<string, unknown>;
}

const managedBy = { 'app.kubernetes.io/managed-by': 'tollgate-admission-params' };

/** A CEL string literal (JSON's escapes are CEL's for the characters names may hold). */
const celString = (text: string): string => JSON.stringify(text);

const podCreate = [
  { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] },
];

function namespaceSelector(namespaces: readonly string[]): Record<string, unknown> {
  return {
    matchExpressions: [
      { key: 'kubernetes.io/metadata.name', operator: 'In', values: [...namespaces].sort() },
    ],
  };
}

/** The pods that opted in to `gatePolicy` and that its selector selects. */
function selectedObjects(gatePolicy: GatePolicy): Record<string, unknown> {
  const { matchLabels, matchExpressions } = gatePolicy.selector;
  return {
    matchLabels: { ...matchLabels, [optInLabel]: gatePolicy.name },
    ...(matchExpressions.length > 0
      ? {
          matchExpressions: matchExpressions.map((e) => ({
            key: e.key,
            operator: e.operator,
            ...(e.values.length > 0 ? { values: [...e.values] } : {}),
          })),
        }
      : {}),
  };
}

/** The selector as kubectl writes one (`app=x,tier in (a,b),!skip`), for messages. */
export function describeSelector(selector: LabelSelector): string {
  const parts = Object.entries(selector.matchLabels).map(([k, v]) => `${k}=${v}`);
  for (const e of selector.matchExpressions) {
    if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
    else parts.push(`${e.key} ${e.operator === 'In' ? 'in' : 'notin'} (${e.values.join(',')})`);
  }
  return parts.length > 0 ? parts.join(',') : '(every pod)';
}

/** A policy and its binding share one name; a validating one denies. */
function admissionObject(
  kind: string,
  name: string,
  spec: Record<string, unknown>,
): AdmissionObject {
  return { apiVersion: group, kind, metadata: { name, labels: managedBy }, spec };
}

/** Every opt-in policy fails closed: a CEL error refuses the pod instead of admitting it. */
const failClosed = (kind: string, name: string, spec: Record<string, unknown>): AdmissionObject =>
  admissionObject(kind, name, { failurePolicy: 'Fail', ...spec });

const denyBinding = (name: string): AdmissionObject =>
  admissionObject('ValidatingAdmissionPolicyBinding', name, {
    policyName: name,
    validationActions: ['Deny'],
  });

const policyName = (gatePolicy: GatePolicy): string => `${namePrefix}-${gatePolicy.name}`;

function mutatingPolicy(gatePolicy: GatePolicy, namespaces: readonly string[]): AdmissionObject[] {
  const name = policyName(gatePolicy);
  const gate = `Object.spec.schedulingGates{name: ${celString(gatePolicy.gate)}}`;
  return [
    failClosed('MutatingAdmissionPolicy', name, {
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: {
        namespaceSelector: namespaceSelector(namespaces),
        objectSelector: selectedObjects(gatePolicy),
        resourceRules: podCreate,
      },
      mutations: [
        {
          patchType: 'ApplyConfiguration',
          applyConfiguration: {
            expression: `Object{spec: Object.spec{schedulingGates: [${gate}]}}`,
          },
        },
      ],
    }),
    {
      apiVersion: group,
      kind: 'MutatingAdmissionPolicyBinding',
      metadata: { name, labels: managedBy },
      spec: { policyName: name },
    },
  ];
}

function gateRequired(gatePolicy: GatePolicy, namespaces: readonly string[]): AdmissionObject[] {
  const name = policyName(gatePolicy);
  const gate = celString(gatePolicy.gate);
  return [
    failClosed('ValidatingAdmissionPolicy', name, {
      matchConstraints: {
        namespaceSelector: namespaceSelector(namespaces),
        objectSelector: { matchLabels: { [optInLabel]: gatePolicy.name } },
        resourceRules: podCreate,
      },
      validations: [
        {
          expression: `has(object.spec.schedulingGates) && object.spec.schedulingGates.exists(g, g.name == ${gate})`,
          message:
            `pod opts in to GatePolicy ${gatePolicy.name} (label ${optInLabel}) but lacks its gate ${gatePolicy.gate}: ` +
            `its labels do not match the policy's selector ${describeSelector(gatePolicy.selector)}, ` +
            `or the MutatingAdmissionPolicy ${name} is not installed (tollgate admission-params --opt-in)`,
          reason: 'Forbidden',
        },
      ],
    }),
    denyBinding(name),
  ];
}

/** GatePolicy names per namespace, from the tenants owning each namespace. */
function policiesByNamespace(policy: Policy): Map<string, string[]> {
  const byNamespace = new Map<string, Set<string>>();
  for (const gatePolicy of policy.gatePolicies) {
    for (const namespace of policy.tenants.get(gatePolicy.tenant)?.namespaces ?? []) {
      const names = byNamespace.get(namespace) ?? new Set<string>();
      names.add(gatePolicy.name);
      byNamespace.set(namespace, names);
    }
  }
  return new Map(
    [...byNamespace].sort(([a], [b]) => byCodeUnits(a, b)).map(([n, s]) => [n, [...s].sort()]),
  );
}

function knownPolicies(policy: Policy): AdmissionObject[] {
  const name = `${namePrefix}-known`;
  const entries = [...policiesByNamespace(policy)].map(
    ([namespace, names]) => `${celString(namespace)}: [${names.map(celString).join(', ')}]`,
  );
  const label = `object.metadata.labels[${celString(optInLabel)}]`;
  return [
    failClosed('ValidatingAdmissionPolicy', name, {
      matchConstraints: {
        objectSelector: { matchExpressions: [{ key: optInLabel, operator: 'Exists' }] },
        resourceRules: podCreate,
      },
      variables: [
        // Typed as map(string, list(string)) even when empty.
        { name: 'allowed', expression: `{${entries.join(', ')}}` },
        { name: 'owned', expression: 'request.namespace in variables.allowed' },
      ],
      validations: [
        {
          expression: 'variables.owned',
          messageExpression: `'pod opts in to GatePolicy "' + ${label} + '" (label ${optInLabel}) but no tenant owns namespace ' + request.namespace`,
          reason: 'Forbidden',
        },
        {
          expression: `!variables.owned || ${label} in variables.allowed[request.namespace]`,
          messageExpression: `'pod opts in to GatePolicy "' + ${label} + '" (label ${optInLabel}), which no tenant of namespace ' + request.namespace + ' has; it may opt in to: ' + variables.allowed[request.namespace].join(', ')`,
          reason: 'Forbidden',
        },
      ],
    }),
    denyBinding(name),
  ];
}

/**
 * Every opt-in admission object for `policy`, in a stable order (the known-label policy,
 * then per GatePolicy by name: mutating, then validating, each followed by its binding).
 */
export function optInAdmission(policy: Policy): AdmissionObject[] {
  const gatePolicies = [...policy.gatePolicies].sort((a, b) => byCodeUnits(a.name, b.name));
  const objects = knownPolicies(policy);
  for (const gatePolicy of gatePolicies) {
    const namespaces = policy.tenants.get(gatePolicy.tenant)?.namespaces ?? [];
    if (namespaces.length === 0) continue;
    objects.push(
      ...mutatingPolicy(gatePolicy, namespaces),
      ...gateRequired(gatePolicy, namespaces),
    );
  }
  return objects;
}
