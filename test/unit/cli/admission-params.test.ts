import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  admissionParams,
  gatePrefixesAnnotation,
  prefixInDomain,
} from '../../../src/cli/admission-params.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';

const annotations = (
  rendered: ReturnType<typeof admissionParams>,
): Record<string, string | undefined> =>
  Object.fromEntries(
    rendered.map((n) => [n.metadata.name, n.metadata.annotations[gatePrefixesAnnotation]]),
  );

describe('admission parameters rendered from the policy', () => {
  it('annotates every tenant namespace with the prefixes of the tenants owning it', () => {
    const policy = aPolicy()
      .tenant(
        aTenant('team-a').namespaces('a-prod', 'shared').prefixes('team-a.tollgate.io/'),
        aTenant('team-b')
          .namespaces('b-prod', 'shared')
          .prefixes('team-b.tollgate.io/', 'batch.team-b.tollgate.io/'),
      )
      .obj();
    assert.deepEqual(annotations(admissionParams(policy)), {
      'a-prod': 'team-a.tollgate.io/',
      'b-prod': 'batch.team-b.tollgate.io/,team-b.tollgate.io/',
      shared: 'batch.team-b.tollgate.io/,team-a.tollgate.io/,team-b.tollgate.io/',
    });
  });

  it('renders Namespaces that carry only that annotation, for a server-side apply', () => {
    const policy = aPolicy().tenant(aTenant('t').namespaces('n').prefixes('t.tollgate.io/')).obj();
    assert.deepEqual(admissionParams(policy), [
      {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'n', annotations: { [gatePrefixesAnnotation]: 't.tollgate.io/' } },
      },
    ]);
  });

  it('refuses a prefix without a trailing slash, which the CEL would match too widely', () => {
    const policy = aPolicy().tenant(aTenant('t').namespaces('n').prefixes('team-a')).obj();
    assert.throws(
      () => admissionParams(policy),
      /Tenant t .*gate prefix "team-a" must end with "\/"/,
    );
  });

  it('refuses a prefix outside the governed domains, which admission would not protect', () => {
    const policy = aPolicy()
      .tenant(aTenant('t').namespaces('n').prefixes('batch.example.com/'))
      .obj();
    assert.throws(
      () => admissionParams(policy),
      /Tenant t .*gate prefix "batch\.example\.com\/" lies outside the governed domains \(tollgate\.io\)/,
    );
    assert.deepEqual(annotations(admissionParams(policy, { governedDomains: ['example.com'] })), {
      n: 'batch.example.com/',
    });
  });
});

describe('a prefix lies in a governed domain', () => {
  const cases: [string, string, boolean][] = [
    ['tollgate.io/', 'tollgate.io', true],
    ['data.tollgate.io/', 'tollgate.io', true],
    ['data.tollgate.io/nightly-', 'tollgate.io', true],
    ['nottollgate.io/', 'tollgate.io', false],
    ['tollgate.io.evil.com/', 'tollgate.io', false],
    ['tollgate.io', 'tollgate.io', false],
  ];
  for (const [prefix, domain, inside] of cases) {
    it(`"${prefix}" ${inside ? 'lies' : 'does not lie'} in ${domain}`, () => {
      assert.equal(prefixInDomain(prefix, domain), inside);
    });
  }
});
