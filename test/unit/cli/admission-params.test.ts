import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admissionParams } from '../../../src/cli/admission-params.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';

describe('admission parameters rendered from the policy', () => {
  it('lists every governed prefix and, per namespace, the prefixes of the tenants owning it', () => {
    const policy = aPolicy()
      .tenant(
        aTenant('team-a').namespaces('a-prod', 'shared').prefixes('team-a.tollgate.io/'),
        aTenant('team-b')
          .namespaces('b-prod', 'shared')
          .prefixes('team-b.tollgate.io/', 'batch.team-b.io/'),
      )
      .obj();
    assert.deepEqual(admissionParams(policy).data, {
      controllers: 'system:serviceaccount:tollgate-system:tollgate',
      prefixes: 'batch.team-b.io/,team-a.tollgate.io/,team-b.tollgate.io/',
      'namespace.a-prod': 'team-a.tollgate.io/',
      'namespace.b-prod': 'batch.team-b.io/,team-b.tollgate.io/',
      'namespace.shared': 'batch.team-b.io/,team-a.tollgate.io/,team-b.tollgate.io/',
    });
  });

  it('names extra controllers, e.g. a test identity', () => {
    const policy = aPolicy().tenant(aTenant('t').namespaces('n').prefixes('t.io/')).obj();
    assert.equal(
      admissionParams(policy, ['system:serviceaccount:tollgate-system:tollgate', 'tollgate']).data
        .controllers,
      'system:serviceaccount:tollgate-system:tollgate,tollgate',
    );
  });

  it('refuses a prefix without a trailing slash, which the CEL would match too widely', () => {
    const policy = aPolicy().tenant(aTenant('t').namespaces('n').prefixes('team-a')).obj();
    assert.throws(
      () => admissionParams(policy),
      /Tenant t .*gate prefix "team-a" must end with "\/"/,
    );
  });
});
