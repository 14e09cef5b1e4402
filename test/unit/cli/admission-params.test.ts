import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admissionParams, prefixInDomain } from '../../../src/cli/admission-params.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';

describe('admission parameters rendered from the policy', () => {
  it('lists, per namespace, the prefixes of the tenants owning it', () => {
    const policy = aPolicy()
      .tenant(
        aTenant('team-a').namespaces('a-prod', 'shared').prefixes('team-a.tollgate.io/'),
        aTenant('team-b')
          .namespaces('b-prod', 'shared')
          .prefixes('team-b.tollgate.io/', 'batch.team-b.tollgate.io/'),
      )
      .obj();
    assert.deepEqual(admissionParams(policy).data, {
      'namespace.a-prod': 'team-a.tollgate.io/',
      'namespace.b-prod': 'batch.team-b.tollgate.io/,team-b.tollgate.io/',
      'namespace.shared': 'batch.team-b.tollgate.io/,team-a.tollgate.io/,team-b.tollgate.io/',
    });
  });

  it('is named after the service account, in the namespace tollgate is installed in', () => {
    const policy = aPolicy().tenant(aTenant('t').namespaces('n').prefixes('t.tollgate.io/')).obj();
    assert.deepEqual(
      admissionParams(policy, { namespace: 'ops', serviceAccount: 'blue-tollgate' }).metadata,
      {
        name: 'blue-tollgate-admission',
        namespace: 'ops',
        labels: { 'app.kubernetes.io/name': 'tollgate' },
      },
    );
  });

  it('names extra controllers only when asked (tollgate itself is always allowed)', () => {
    const policy = aPolicy().tenant(aTenant('t').namespaces('n').prefixes('t.tollgate.io/')).obj();
    assert.equal(admissionParams(policy).data.controllers, undefined);
    assert.equal(
      admissionParams(policy, { controllers: ['ops-oncall', 'system:serviceaccount:x:y'] }).data
        .controllers,
      'ops-oncall,system:serviceaccount:x:y',
    );
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
    assert.equal(
      admissionParams(policy, { governedDomains: ['example.com'] }).data['namespace.n'],
      'batch.example.com/',
    );
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
