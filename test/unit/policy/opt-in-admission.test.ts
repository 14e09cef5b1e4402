import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  describeSelector,
  optInAdmission,
  optInLabel,
  type AdmissionObject,
} from '../../../src/policy/opt-in-admission.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const policy = aPolicy()
  .tenant(
    aTenant('batch').namespaces('batch-b', 'batch-a').prefixes('batch.tollgate.io/'),
    aTenant('ml').namespaces('ml').prefixes('ml.tollgate.io/'),
  )
  .gatePolicy(
    aGatePolicy('nightly', 'batch').gate('batch.tollgate.io/nightly'),
    aGatePolicy('gpu', 'batch')
      .gate('batch.tollgate.io/gpu')
      .selector({
        matchLabels: { accelerator: 'gpu' },
        matchExpressions: [{ key: 'gang', operator: 'Exists', values: [] }],
      }),
    aGatePolicy('train', 'ml').gate('ml.tollgate.io/train'),
  )
  .obj();

const rendered = optInAdmission(policy);
const find = (kind: string, name: string): AdmissionObject => {
  const found = rendered.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found, `${kind}/${name} rendered`);
  return found;
};
const spec = (o: AdmissionObject): any => o.spec; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('opt-in admission rendered from the policy', () => {
  it('renders, in a stable order, the known-label policy, then per GatePolicy its mutating and validating policies with bindings', () => {
    assert.deepEqual(
      rendered.map((o) => `${o.kind}/${o.metadata.name}`),
      [
        'ValidatingAdmissionPolicy/tollgate-opt-in-known',
        'ValidatingAdmissionPolicyBinding/tollgate-opt-in-known',
        ...['gpu', 'nightly', 'train'].flatMap((n) => [
          `MutatingAdmissionPolicy/tollgate-opt-in-${n}`,
          `MutatingAdmissionPolicyBinding/tollgate-opt-in-${n}`,
          `ValidatingAdmissionPolicy/tollgate-opt-in-${n}`,
          `ValidatingAdmissionPolicyBinding/tollgate-opt-in-${n}`,
        ]),
      ],
    );
    assert.ok(rendered.every((o) => o.apiVersion === 'admissionregistration.k8s.io/v1'));
  });

  it("adds the gate only to created pods in the tenant's namespaces that opt in and match the selector", () => {
    const mutating = spec(find('MutatingAdmissionPolicy', 'tollgate-opt-in-gpu'));
    assert.equal(mutating.failurePolicy, 'Fail');
    assert.deepEqual(mutating.matchConstraints.namespaceSelector.matchExpressions, [
      { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['batch-a', 'batch-b'] },
    ]);
    assert.deepEqual(mutating.matchConstraints.objectSelector, {
      matchLabels: { accelerator: 'gpu', [optInLabel]: 'gpu' },
      matchExpressions: [{ key: 'gang', operator: 'Exists' }],
    });
    assert.deepEqual(mutating.matchConstraints.resourceRules[0].operations, ['CREATE']);
    assert.equal(
      mutating.mutations[0].applyConfiguration.expression,
      'Object{spec: Object.spec{schedulingGates: [Object.spec.schedulingGates{name: "batch.tollgate.io/gpu"}]}}',
    );
    assert.equal(
      spec(find('MutatingAdmissionPolicyBinding', 'tollgate-opt-in-gpu')).policyName,
      'tollgate-opt-in-gpu',
    );
  });

  it('refuses a pod that opted in but lacks the gate, saying which selector it missed', () => {
    const validating = spec(find('ValidatingAdmissionPolicy', 'tollgate-opt-in-gpu'));
    assert.deepEqual(validating.matchConstraints.objectSelector, {
      matchLabels: { [optInLabel]: 'gpu' },
    });
    assert.equal(
      validating.validations[0].expression,
      'has(object.spec.schedulingGates) && object.spec.schedulingGates.exists(g, g.name == "batch.tollgate.io/gpu")',
    );
    assert.match(validating.validations[0].message, /selector accelerator=gpu,gang/);
    assert.deepEqual(
      spec(find('ValidatingAdmissionPolicyBinding', 'tollgate-opt-in-gpu')).validationActions,
      ['Deny'],
    );
  });

  it('knows which GatePolicies each namespace may opt in to', () => {
    const known = spec(find('ValidatingAdmissionPolicy', 'tollgate-opt-in-known'));
    assert.equal(
      known.variables[0].expression,
      '{"batch-a": ["gpu", "nightly"], "batch-b": ["gpu", "nightly"], "ml": ["train"]}',
    );
  });
});

describe('a selector described as kubectl writes it', () => {
  const cases: [string, Parameters<typeof describeSelector>[0], string][] = [
    [
      'an empty selector selects every pod',
      { matchLabels: {}, matchExpressions: [] },
      '(every pod)',
    ],
    [
      'labels and every operator',
      {
        matchLabels: { app: 'x' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['a', 'b'] },
          { key: 'zone', operator: 'NotIn', values: ['c'] },
          { key: 'gang', operator: 'Exists', values: [] },
          { key: 'skip', operator: 'DoesNotExist', values: [] },
        ],
      },
      'app=x,tier in (a,b),zone notin (c),gang,!skip',
    ],
  ];
  for (const [name, selector, text] of cases) {
    it(name, () => assert.equal(describeSelector(selector), text));
  }
});
