import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gatePrefixesOverlap, gateUnderPrefix } from '../../../src/policy/gate-prefix.ts';
import { tenantOwnsGate } from '../../../src/decide/gates.ts';
import { loadPolicyFromFiles } from '../../../src/policy/load.ts';
import { aTenant } from '../../builders/policy.ts';

interface PrefixCase {
  readonly name: string;
  readonly prefix: string;
  readonly gate: string;
  readonly under: boolean;
}

const prefixCases: PrefixCase[] = [
  {
    name: 'a domain prefix owns a gate of its domain',
    prefix: 'a.io/',
    gate: 'a.io/ready',
    under: true,
  },
  {
    name: 'a bare domain owns a gate of its domain',
    prefix: 'a.io',
    gate: 'a.io/ready',
    under: true,
  },
  {
    name: 'a bare domain does not own the domain itself',
    prefix: 'a.io',
    gate: 'a.io',
    under: false,
  },
  {
    name: 'a name start owns the names that extend it',
    prefix: 'pt.example.io/team-',
    gate: 'pt.example.io/team-a',
    under: true,
  },
  {
    name: 'a name start does not own a name that only shares the domain',
    prefix: 'pt.example.io/team-',
    gate: 'pt.example.io/other',
    under: false,
  },
  {
    name: 'a name start does not own a gate equal to itself',
    prefix: 'pt.example.io/team-',
    gate: 'pt.example.io/team-',
    under: false,
  },
  {
    name: 'a look-alike domain that extends the domain is not owned',
    prefix: 'a.io',
    gate: 'a.io.evil.com/ready',
    under: false,
  },
  {
    name: 'a look-alike domain with a longer label is not owned',
    prefix: 'a.io',
    gate: 'a.iox/ready',
    under: false,
  },
  {
    name: 'a look-alike domain with a leading label is not owned',
    prefix: 'a.io/',
    gate: 'xa.io/ready',
    under: false,
  },
  { name: 'a subdomain is not owned', prefix: 'a.io/', gate: 'b.a.io/ready', under: false },
  {
    name: 'a name start across the slash is not a domain match',
    prefix: 'a.io/x',
    gate: 'a.io.x/y',
    under: false,
  },
  {
    name: 'names compare case-sensitively',
    prefix: 'a.io/Team-',
    gate: 'a.io/team-a',
    under: false,
  },
  { name: 'domains compare case-sensitively', prefix: 'A.io/', gate: 'a.io/ready', under: false },
  { name: 'a gate without a domain is never owned', prefix: 'a.io/', gate: 'ready', under: false },
];

for (const c of prefixCases) {
  test(`gateUnderPrefix: ${c.name} (${c.prefix} / ${c.gate})`, () => {
    assert.equal(gateUnderPrefix(c.gate, c.prefix), c.under);
  });
}

/** The cases whose prefix and gate the schema accepts, so compile judges them on the prefix alone. */
const schemaValid = prefixCases.filter(
  (c) =>
    /^[a-z0-9.-]+\/[-A-Za-z0-9_.]*$/.test(c.prefix) &&
    /^[a-z0-9.-]+\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(c.gate),
);

function compiled(prefix: string, gate: string) {
  const doc = (kind: string, spec: string) =>
    `apiVersion: tollgate.io/v1alpha1\nkind: ${kind}\nmetadata:\n  name: t\nspec:\n${spec}`;
  return loadPolicyFromFiles([
    {
      path: 'tollgate.yaml',
      content: 'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nspec:\n  cluster: t\n',
    },
    {
      path: 'tenants/t.yaml',
      content: doc('Tenant', `  namespaces: [ns]\n  gatePrefixes: ['${prefix}']\n`),
    },
    { path: 'gates/g.yaml', content: doc('GatePolicy', `  tenant: t\n  gate: '${gate}'\n`) },
  ]);
}

for (const c of schemaValid) {
  test(`compile time and run time agree: ${c.name}`, () => {
    const result = compiled(c.prefix, c.gate);
    const errors = result.ok ? [] : result.errors.map((e) => `${e.file} ${e.path}: ${e.message}`);
    assert.ok(
      errors.every((e) => e.includes('is not under a prefix')),
      errors.join('\n'),
    );
    const compileAccepts = result.ok;
    const tenant = aTenant('t').namespaces('ns').prefixes(c.prefix).obj();
    assert.equal(tenantOwnsGate(tenant, 'ns', c.gate), compileAccepts);
    assert.equal(compileAccepts, c.under);
  });
}

test('the agreement table covers accepted and refused gates', () => {
  assert.ok(schemaValid.some((c) => c.under) && schemaValid.some((c) => !c.under));
});

const overlapCases: [a: string, b: string, overlap: boolean][] = [
  ['a.io/', 'a.io/', true],
  ['a.io/', 'a.io/x-', true],
  ['a.io', 'a.io/x-', true],
  ['a.io/x-', 'a.io/y-', false],
  ['a.io/', 'a.io.evil.com/', false],
  ['a.io/', 'b.a.io/', false],
];

for (const [a, b, overlap] of overlapCases) {
  test(`gatePrefixesOverlap(${a}, ${b}) is ${overlap}`, () => {
    assert.equal(gatePrefixesOverlap(a, b), overlap);
    assert.equal(gatePrefixesOverlap(b, a), overlap);
  });
}
