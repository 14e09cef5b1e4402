/**
 * The e2e's policy repository as YAML files in tollgate's own policy format (schemas/),
 * so the controller under test loads it with the real policy source (src/policy/), from
 * the real Git server. `budgets` and `approvals` change between commits.
 */
import { stringify } from 'yaml';

export interface RepoState {
  alphaPods: number;
  alphaCpu: string;
  approvals?: [action: 'Release' | 'Cancel', namespace: string, pod: string][];
}

export const ns = { alpha: 'gr-alpha', beta: 'gr-beta', gamma: 'gr-gamma' };
export const gates = {
  alpha: 'alpha.tollgate.io/ready',
  beta: 'beta.tollgate.io/ready',
  gang: 'beta.tollgate.io/gang',
  warm: 'gamma.tollgate.io/warm',
  review: 'gamma.tollgate.io/review',
};

/** Pacing in force, shared with the test's independent watcher. */
export const limitsInForce = {
  globalMaxInFlight: 150,
  alpha: { maxInFlight: 100, releasesPerSecond: 100, batchSize: 80 },
  beta: { maxInFlight: 10, releasesPerSecond: 60, batchSize: 50, pods: 60 },
};

const doc = (kind: string, name: string, spec: unknown): string =>
  stringify({ apiVersion: 'tollgate.io/v1alpha1', kind, metadata: { name }, spec });

export function policyFiles(state: RepoState): Record<string, string | null> {
  const files: Record<string, string | null> = {
    'tollgate.yaml': doc('Settings', 'tollgate', {
      cluster: 'e2e',
      audit: {
        branch: 'tollgate/audit',
        mode: 'strict',
        batch: { maxDecisions: 1000, maxDelay: '200ms' },
      },
      pacing: {
        maxInFlight: limitsInForce.globalMaxInFlight,
        releasesPerSecond: 150,
        batchSize: 120,
      },
    }),
    'staleness.yaml': doc('StalenessPolicy', 'default', {
      maxCacheLag: '5s',
      destructive: ['Cancel'],
      requeue: { base: '200ms', max: '5s' },
      liveReads: { qps: 20, burst: 40, breaker: { failureThreshold: 5, open: '10s' } },
    }),
    'tenants/alpha.yaml': doc('Tenant', 'alpha', {
      namespaces: [ns.alpha],
      gatePrefixes: ['alpha.tollgate.io/'],
      weight: 2,
      budget: { pods: state.alphaPods, resources: { cpu: state.alphaCpu } },
      pacing: limitsInForce.alpha,
    }),
    'tenants/beta.yaml': doc('Tenant', 'beta', {
      namespaces: [ns.beta],
      gatePrefixes: ['beta.tollgate.io/'],
      budget: { pods: limitsInForce.beta.pods },
      pacing: {
        maxInFlight: limitsInForce.beta.maxInFlight,
        releasesPerSecond: limitsInForce.beta.releasesPerSecond,
        batchSize: limitsInForce.beta.batchSize,
      },
    }),
    'tenants/gamma.yaml': doc('Tenant', 'gamma', {
      namespaces: [ns.gamma],
      gatePrefixes: ['gamma.tollgate.io/'],
    }),
    'gates/alpha.yaml': doc('GatePolicy', 'alpha-ready', {
      tenant: 'alpha',
      gate: gates.alpha,
      conditions: [{ type: 'Budget' }],
    }),
    'gates/beta.yaml': [
      doc('GatePolicy', 'beta-ready', {
        tenant: 'beta',
        gate: gates.beta,
        conditions: [{ type: 'Budget' }],
      }),
      doc('GatePolicy', 'beta-gang', {
        tenant: 'beta',
        gate: gates.gang,
        priority: 5,
        conditions: [
          { type: 'Budget' },
          { type: 'GangComplete', groupLabel: 'gang', sizeAnnotation: 'tollgate.io/gang-size' },
        ],
      }),
    ].join('---\n'),
    'gates/gamma.yaml': [
      doc('GatePolicy', 'gamma-warm', {
        tenant: 'gamma',
        gate: gates.warm,
        conditions: [{ type: 'ImagePresent', minNodes: 1 }],
      }),
      doc('GatePolicy', 'gamma-review', {
        tenant: 'gamma',
        gate: gates.review,
        conditions: [
          {
            type: 'ObjectCondition',
            object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'dataset-ready' },
            field: 'data.ready',
            equals: 'true',
          },
        ],
        expiry: { after: '4s', action: 'Review' },
        recheck: { initial: '500ms', max: '2s', maxAttempts: 20 },
      }),
    ].join('---\n'),
  };
  for (const [action, namespace, pod] of state.approvals ?? []) {
    files[`approvals/${namespace}-${pod}.yaml`] = doc(
      'Approval',
      `${action.toLowerCase()}-${namespace}-${pod}`,
      {
        action,
        target: { kind: 'Pod', namespace, name: pod },
        approvedBy: 'reviewer@example.com',
        reason: 'checked by hand in the e2e',
      },
    );
  }
  return files;
}
