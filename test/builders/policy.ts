/**
 * Builders for compiled `Policy` snapshots, shared by every area's tests. Defaults are
 * permissive so a case states only what it is about: a tenant `t` owns namespace `t` and
 * prefix `t.tollgate.io/`, has no budget and generous pacing (1000 in flight, 1000/s,
 * batch 1000); a GatePolicy gates `<tenant>.tollgate.io/<name>`, selects every pod, has
 * no conditions and no expiry.
 *
 *   const team = aTenant('team-a').budget({ pods: 10, cpu: '4' }).pacing({ maxInFlight: 5 });
 *   const ready = aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' });
 *   const policy = aPolicy().tenant(team).gatePolicy(ready).obj();
 *
 * Quantities in `budget` are Kubernetes strings, stored the way the compiler stores them.
 */
import { toStoredAmount } from '../../src/lib/quantity.ts';
import type {
  Approval,
  ExpiryAction,
  GateCondition,
  GatePolicy,
  LabelSelector,
  Pacing,
  Policy,
  Settings,
  StalenessPolicy,
  Tenant,
} from '../../src/policy/model.ts';

const generous: Pacing = { maxInFlight: 1000, releasesPerSecond: 1000, batchSize: 1000 };

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class TenantBuilder {
  #tenant: Mutable<Tenant>;
  constructor(name: string) {
    this.#tenant = {
      name,
      source: { file: `tenants/${name}.yaml`, document: 0 },
      namespaces: [name],
      gatePrefixes: [`${name}.tollgate.io/`],
      weight: 1,
      budget: { resources: {}, neverGatedPods: 'Charge', unreadyNodeGraceMs: 300_000 },
      pacing: generous,
      orphanedGates: 'Review',
    };
  }
  namespaces(...namespaces: string[]): this {
    this.#tenant.namespaces = namespaces;
    return this;
  }
  prefixes(...prefixes: string[]): this {
    this.#tenant.gatePrefixes = prefixes;
    return this;
  }
  weight(weight: number): this {
    this.#tenant.weight = weight;
    return this;
  }
  /** `pods` is a count; every other key is a resource quantity such as "4", "8Gi", "2". */
  budget(budget: { pods?: number } & Record<string, string | number | undefined>): this {
    const resources: Record<string, number> = {};
    for (const [key, value] of Object.entries(budget)) {
      if (key !== 'pods' && value !== undefined) resources[key] = toStoredAmount(key, value);
    }
    const { neverGatedPods, unreadyNodeGraceMs } = this.#tenant.budget;
    this.#tenant.budget =
      budget.pods !== undefined
        ? { pods: budget.pods, resources, neverGatedPods, unreadyNodeGraceMs }
        : { resources, neverGatedPods, unreadyNodeGraceMs };
    return this;
  }
  /** Whether pods tollgate never released count toward the budget (default Charge). */
  neverGatedPods(choice: Tenant['budget']['neverGatedPods']): this {
    this.#tenant.budget = { ...this.#tenant.budget, neverGatedPods: choice };
    return this;
  }
  /** How long a node may be not Ready before the pods on it stop being charged (default 5m). */
  unreadyNodeGrace(ms: number): this {
    this.#tenant.budget = { ...this.#tenant.budget, unreadyNodeGraceMs: ms };
    return this;
  }
  pacing(pacing: Partial<Pacing>): this {
    this.#tenant.pacing = { ...this.#tenant.pacing, ...pacing };
    return this;
  }
  orphanedGates(action: Tenant['orphanedGates']): this {
    this.#tenant.orphanedGates = action;
    return this;
  }
  get name(): string {
    return this.#tenant.name;
  }
  obj(): Tenant {
    return structuredClone(this.#tenant);
  }
}

export class GatePolicyBuilder {
  #policy: Mutable<GatePolicy>;
  constructor(name: string, tenant: string) {
    this.#policy = {
      name,
      source: { file: `gates/${name}.yaml`, document: 0 },
      tenant,
      gate: `${tenant}.tollgate.io/${name}`,
      selector: { matchLabels: {}, matchExpressions: [] },
      priority: 0,
      conditions: [],
      recheck: { initialMs: 1000, maxMs: 60_000, maxAttempts: 5 },
    };
  }
  gate(gate: string): this {
    this.#policy.gate = gate;
    return this;
  }
  selector(selector: Partial<LabelSelector>): this {
    this.#policy.selector = { matchLabels: {}, matchExpressions: [], ...selector };
    return this;
  }
  priority(priority: number): this {
    this.#policy.priority = priority;
    return this;
  }
  conditions(...conditions: GateCondition[]): this {
    this.#policy.conditions = conditions;
    return this;
  }
  /** One GangComplete condition: members share `groupLabel`, their size in `sizeAnnotation`. */
  gangComplete(groupLabel = 'gang', sizeAnnotation = 'gang-size'): this {
    return this.conditions({ type: 'GangComplete', groupLabel, sizeAnnotation });
  }
  expiry(afterMs: number, action: ExpiryAction): this {
    this.#policy.expiry = { afterMs, action };
    return this;
  }
  /** spec.suspend: hold every pod this policy gates. */
  suspended(): this {
    this.#policy.suspend = true;
    return this;
  }
  /** spec.drain: cancel every pod this policy still gates; released pods run on. */
  drained(): this {
    this.#policy.drain = true;
    return this;
  }

  recheck(recheck: GatePolicy['recheck']): this {
    this.#policy.recheck = recheck;
    return this;
  }
  pacing(pacing: Partial<Pacing>): this {
    this.#policy.pacing = pacing;
    return this;
  }
  get gateName(): string {
    return this.#policy.gate;
  }
  obj(): GatePolicy {
    return structuredClone(this.#policy);
  }
}

export class PolicyBuilder {
  #commit = '0000000000000000000000000000000000000001';
  #tenants: Tenant[] = [];
  #gatePolicies: GatePolicy[] = [];
  #approvals: Approval[] = [];
  #pacing: Pacing = generous;
  commit(sha: string): this {
    this.#commit = sha;
    return this;
  }
  tenant(...tenants: (TenantBuilder | Tenant)[]): this {
    this.#tenants.push(...tenants.map((t) => (t instanceof TenantBuilder ? t.obj() : t)));
    return this;
  }
  gatePolicy(...policies: (GatePolicyBuilder | GatePolicy)[]): this {
    this.#gatePolicies.push(...policies.map((p) => (p instanceof GatePolicyBuilder ? p.obj() : p)));
    return this;
  }
  /** Global pacing across all tenants (settings.pacing). */
  pacing(pacing: Partial<Pacing>): this {
    this.#pacing = { ...this.#pacing, ...pacing };
    return this;
  }
  /** Approvals built with `anApproval`. */
  approval(...approvals: Approval[]): this {
    this.#approvals.push(...approvals);
    return this;
  }
  /** An approval for a pod: `approve('Release', 'ns', 'pod')`. */
  approve(action: 'Release' | 'Cancel', namespace: string, pod: string, expiresAt?: number): this {
    this.#approvals.push({
      name: `${action.toLowerCase()}-${namespace}-${pod}`,
      source: { file: `approvals/${namespace}-${pod}.yaml`, document: 0 },
      action,
      target: { kind: 'Pod', namespace, name: pod },
      approvedBy: 'alice@example.com',
      reason: 'checked by hand',
      ...(expiresAt !== undefined ? { expiresAt } : {}),
    });
    return this;
  }
  obj(): Policy {
    const settings: Settings = {
      cluster: 'test',
      audit: {
        branch: 'tollgate/audit',
        mode: 'strict',
        batch: { maxDecisions: 500, maxDelayMs: 200 },
        windowHours: 24,
      },
      pacing: this.#pacing,
    };
    const staleness: StalenessPolicy = {
      name: 'default',
      source: { file: 'staleness.yaml', document: 0 },
      maxCacheLagMs: 5000,
      destructive: ['Cancel'],
      requeue: { baseMs: 100, maxMs: 5000 },
      liveReads: { qps: 20, burst: 40, breaker: { failureThreshold: 5, openMs: 10_000 } },
    };
    return {
      commit: this.#commit,
      settings,
      tenants: new Map(this.#tenants.map((t) => [t.name, t])),
      gatePolicies: [...this.#gatePolicies],
      resizePolicies: [],
      staleness,
      approvals: [...this.#approvals],
    };
  }
}

export function aTenant(name: string): TenantBuilder {
  return new TenantBuilder(name);
}
export function aGatePolicy(name: string, tenant: string): GatePolicyBuilder {
  return new GatePolicyBuilder(name, tenant);
}
export function aPolicy(): PolicyBuilder {
  return new PolicyBuilder();
}

/**
 * An Approval of any target: `anApproval('Cancel', { kind: 'Pod', namespace, name })`,
 * merged at `mergedAt` (epoch ms; omit it for an approval whose merge time is unknown).
 */
export function anApproval(
  action: Approval['action'],
  target: Approval['target'],
  mergedAt?: number,
): Approval {
  const name = `${action.toLowerCase()}-${target.kind.toLowerCase()}`;
  return {
    name,
    source: { file: `approvals/${name}.yaml`, document: 0 },
    action,
    target,
    approvedBy: 'alice@example.com',
    reason: 'checked by hand',
    ...(mergedAt !== undefined ? { mergedAt } : {}),
  };
}
