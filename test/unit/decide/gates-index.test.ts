// gates.ts answers "which gates on this pod are tollgate's" from an index built once per
// policy snapshot. Here its answers are compared, on generated policies and pods, with the
// rules written out straightforwardly (a scan of the policy per question, as the comments
// of gates.ts state them): overlapping namespaces, gates under no prefix, policies of
// unknown tenants, priority ties, selectors, foreign and orphaned gates, several gates.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  matchesSelector,
  orphanedGate,
  ownedGate,
  ownedGates,
  tenantOfNamespace,
  type OwnedGate,
} from '../../../src/decide/gates.ts';
import type { PodLike } from '../../../src/decide/objects.ts';
import { gateUnderPrefix } from '../../../src/policy/gate-prefix.ts';
import type { GatePolicy, Policy, Tenant } from '../../../src/policy/model.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

/** A small seeded generator (mulberry32): the same tables on every run. */
function generator(seed: number): <T>(items: readonly T[]) => T {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return (items) => items[Math.floor(next() * items.length)] as (typeof items)[number];
}

const namespaces = ['ns-a', 'ns-b', 'ns-c', 'shared'];
const gateNames = [
  'a.io/ready',
  'a.io/gpu',
  'a.io/gone',
  'b.io/ready',
  'b.io/team-x',
  'b.io/other',
  'kueue.x-k8s.io/admission',
  'nodomain',
];
const labelSets = [{}, { accel: 'gpu' }, { accel: 'cpu' }, { accel: 'gpu', tier: 'low' }];
const selectors = [
  {},
  { matchLabels: { accel: 'tpu' } },
  { matchLabels: { accel: 'gpu' } },
  { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' as const, values: [] }] },
  { matchExpressions: [{ key: 'accel', operator: 'In' as const, values: ['gpu', 'cpu'] }] },
];

function generatedPolicy(pick: ReturnType<typeof generator>): Policy {
  const tenants = [
    aTenant('a')
      .namespaces(pick(namespaces), pick(namespaces))
      .prefixes('a.io/', pick(['b.io/team-', 'a.io/g'])),
    aTenant('b')
      .namespaces(pick(namespaces), 'shared')
      .prefixes(pick(['b.io/', 'b.io/team-'])),
    aTenant('c').namespaces('shared').prefixes('b.io/team-'),
  ];
  const gatePolicies = Array.from({ length: 6 }, (_, i) =>
    aGatePolicy(pick([`p${i}`, 'same-name']), pick(['a', 'b', 'c', 'missing']))
      .gate(pick([...gateNames, 'b.io/team-x', 'b.io/team-x']))
      .priority(pick([0, 0, 5, 10]))
      .selector(pick(selectors)),
  );
  return aPolicy()
    .tenant(...tenants)
    .gatePolicy(...gatePolicies)
    .obj();
}

function generatedPod(pick: ReturnType<typeof generator>, i: number): PodLike {
  const pod = aPod(`pod-${i}`, pick(namespaces)).gated(
    ...Array.from({ length: pick([0, 1, 1, 2, 3]) }, () => pick(gateNames)),
  );
  for (const [key, value] of Object.entries(pick(labelSets))) pod.label(key, value);
  return pod.obj();
}

// The rules written out: a scan of the policy for every question.
function tenantOwnsGate(tenant: Tenant, namespace: string, gate: string): boolean {
  return (
    tenant.namespaces.includes(namespace) &&
    tenant.gatePrefixes.some((p) => gateUnderPrefix(gate, p))
  );
}

function scannedTenantOf(policy: Policy, namespace: string): Tenant | undefined {
  for (const tenant of policy.tenants.values())
    if (tenant.namespaces.includes(namespace)) return tenant;
  return undefined;
}

function scannedOwnedGates(pod: PodLike, policy: Policy): OwnedGate[] {
  const namespace = pod.metadata?.namespace ?? '';
  const labels = pod.metadata?.labels ?? {};
  const gates = pod.spec?.schedulingGates ?? [];
  const owned: OwnedGate[] = [];
  for (let index = 0; index < gates.length; index++) {
    const gate = (gates[index] as { name: string }).name;
    const named = policy.gatePolicies.filter((gp) => {
      const tenant = policy.tenants.get(gp.tenant);
      return gp.gate === gate && tenant !== undefined && tenantOwnsGate(tenant, namespace, gate);
    });
    if (named.length === 0) continue;
    const selecting = named
      .filter((gp) => matchesSelector(labels, gp.selector))
      .sort((a, b) => b.priority - a.priority || a.name.localeCompare(b.name));
    const gatePolicy = selecting[0];
    const tenant = policy.tenants.get((gatePolicy ?? (named[0] as GatePolicy)).tenant) as Tenant;
    owned.push(gatePolicy ? { gate, index, tenant, gatePolicy } : { gate, index, tenant });
  }
  return owned;
}

function scannedOrphanedGate(pod: PodLike, policy: Policy) {
  const namespace = pod.metadata?.namespace ?? '';
  const tenant = scannedTenantOf(policy, namespace);
  if (!tenant) return undefined;
  const gates = pod.spec?.schedulingGates ?? [];
  for (let index = 0; index < gates.length; index++) {
    const gate = (gates[index] as { name: string }).name;
    if (!tenantOwnsGate(tenant, namespace, gate)) continue;
    if (policy.gatePolicies.some((gp) => gp.tenant === tenant.name && gp.gate === gate)) continue;
    return { gate, index, tenant };
  }
  return undefined;
}

describe('the gate index answers as the rules written out do', () => {
  const tables = Array.from({ length: 200 }, (_, seed) => {
    const pick = generator(seed + 1);
    return {
      seed,
      policy: generatedPolicy(pick),
      pods: Array.from({ length: 40 }, (_, i) => generatedPod(pick, i)),
    };
  });

  it('finds the same owned gates, in the same order, with the same policy and tenant', () => {
    let owning = 0;
    for (const { seed, policy, pods } of tables)
      for (const pod of pods) {
        const want = scannedOwnedGates(pod, policy);
        assert.deepEqual(ownedGates(pod, policy), want, `seed ${seed}, ${pod.metadata?.name}`);
        assert.deepEqual(ownedGate(pod, policy), want[0], `seed ${seed}, ${pod.metadata?.name}`);
        if (want.length > 0) owning += 1;
      }
    assert.ok(owning > 500, `the tables reach owned gates (${owning} pods)`);
  });

  it('finds the same orphaned gate and the same tenant of each namespace', () => {
    let orphaned = 0;
    for (const { seed, policy, pods } of tables) {
      for (const namespace of [...namespaces, 'elsewhere'])
        assert.equal(tenantOfNamespace(policy, namespace), scannedTenantOf(policy, namespace));
      for (const pod of pods) {
        const want = scannedOrphanedGate(pod, policy);
        assert.deepEqual(orphanedGate(pod, policy), want, `seed ${seed}, ${pod.metadata?.name}`);
        if (want) orphaned += 1;
      }
    }
    assert.ok(orphaned > 100, `the tables reach orphaned gates (${orphaned} pods)`);
  });
});
