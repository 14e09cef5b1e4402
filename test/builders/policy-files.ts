/**
 * A small policy repository as files, in tollgate's own policy format: Settings, one
 * tenant owning one namespace, and one GatePolicy, for e2e files that run `tollgate run`
 * against a real Git server.
 *
 *   pushTree(git, url, oneGatePolicy({ cluster: 'c', tenant: 't', namespace: 'ns', gate: 't.tollgate.io/ready', ... }))
 */

export interface OneGatePolicy {
  readonly cluster: string;
  readonly tenant: string;
  readonly namespace: string;
  /** The gate; the tenant's prefix is its part up to and with the first '/'. */
  readonly gate: string;
  /** Settings' audit: strict, batches of 500 decisions or 100ms unless told otherwise. */
  readonly audit?: {
    readonly mode?: 'strict' | 'async';
    readonly maxDecisions?: number;
    readonly maxDelay?: string;
  };
  /** For Settings and the tenant alike; without it, neither has a pacing line. */
  readonly pacing?: {
    readonly maxInFlight: number;
    readonly releasesPerSecond: number;
    readonly batchSize: number;
  };
  /** The GatePolicy's priority line, when given. */
  readonly priority?: number;
  /** The GatePolicy's conditions, as YAML: `[{ type: Budget }]` unless told otherwise (`[]`). */
  readonly conditions?: string;
}

/** tollgate.yaml, tenants/<tenant>.yaml and gates/ready.yaml. */
export function oneGatePolicy(o: OneGatePolicy): Record<string, string> {
  const pacing = o.pacing
    ? [
        `  pacing: { maxInFlight: ${o.pacing.maxInFlight}, releasesPerSecond: ${o.pacing.releasesPerSecond}, batchSize: ${o.pacing.batchSize} }`,
      ]
    : [];
  const audit = { mode: 'strict', maxDecisions: 500, maxDelay: '100ms', ...o.audit };
  return {
    'tollgate.yaml': lines([
      'apiVersion: tollgate.io/v1alpha1',
      'kind: Settings',
      'metadata: { name: settings }',
      'spec:',
      `  cluster: ${o.cluster}`,
      `  audit: { mode: ${audit.mode}, batch: { maxDecisions: ${audit.maxDecisions}, maxDelay: ${audit.maxDelay} } }`,
      ...pacing,
    ]),
    [`tenants/${o.tenant}.yaml`]: lines([
      'apiVersion: tollgate.io/v1alpha1',
      'kind: Tenant',
      `metadata: { name: ${o.tenant} }`,
      'spec:',
      `  namespaces: [${o.namespace}]`,
      `  gatePrefixes: [${o.gate.slice(0, o.gate.indexOf('/') + 1)}]`,
      ...pacing,
    ]),
    'gates/ready.yaml': lines([
      'apiVersion: tollgate.io/v1alpha1',
      'kind: GatePolicy',
      'metadata: { name: ready }',
      'spec:',
      `  tenant: ${o.tenant}`,
      `  gate: ${o.gate}`,
      ...(o.priority === undefined ? [] : [`  priority: ${o.priority}`]),
      `  conditions: ${o.conditions ?? '[{ type: Budget }]'}`,
    ]),
  };
}

const lines = (text: readonly string[]): string => [...text, ''].join('\n');
