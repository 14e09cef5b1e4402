import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  referenceWarnings,
  resourceOfKind,
  shippedClusterRoleRules,
} from '../../../src/cli/reference-warnings.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const onKind = (apiVersion: string, kind: string) =>
  aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(
      aGatePolicy('ready', 'team-a').conditions({
        type: 'ObjectCondition',
        object: { apiVersion, kind, name: 'x' },
        conditionType: 'Ready',
      }),
    )
    .obj();

const shipped = shippedClusterRoleRules() ?? [];

const cases: { name: string; apiVersion: string; kind: string; warned: boolean }[] = [
  {
    name: 'a ConfigMap, which the shipped role grants',
    apiVersion: 'v1',
    kind: 'ConfigMap',
    warned: false,
  },
  {
    name: 'a Node (cluster-scoped), which it grants',
    apiVersion: 'v1',
    kind: 'Node',
    warned: false,
  },
  { name: 'a Secret, which it does not grant', apiVersion: 'v1', kind: 'Secret', warned: true },
  {
    name: 'a custom resource, which it does not grant',
    apiVersion: 'ml.example.com/v1',
    kind: 'Checkpoint',
    warned: true,
  },
  {
    name: 'a kind of another group with a granted resource name',
    apiVersion: 'other.io/v1',
    kind: 'ConfigMap',
    warned: true,
  },
];

for (const c of cases) {
  test(`shipped RBAC: an ObjectCondition on ${c.name} is ${c.warned ? '' : 'not '}warned about`, () => {
    const warnings = referenceWarnings(onKind(c.apiVersion, c.kind), shipped);
    assert.equal(warnings.length, c.warned ? 1 : 0);
    if (c.warned) assert.equal(warnings[0]?.path, 'spec.conditions[0].object');
  });
}

test('a wildcard rule grants every kind', () => {
  const rules = [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }];
  assert.deepEqual(referenceWarnings(onKind('v1', 'Secret'), rules), []);
});

test('list without watch is not enough: the informer needs both', () => {
  const rules = [{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }];
  assert.equal(referenceWarnings(onKind('v1', 'Secret'), rules).length, 1);
});

test('resource names follow the Kubernetes plural of most kinds', () => {
  assert.deepEqual(
    ['ConfigMap', 'Policy', 'Ingress', 'Gateway', 'Checkpoint'].map(resourceOfKind),
    ['configmaps', 'policies', 'ingresses', 'gateways', 'checkpoints'],
  );
});
