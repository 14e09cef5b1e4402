import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RunConfig } from '../../../src/cli/run-config.ts';
import { runChecks } from '../../../src/observe/http.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { auditTarget } from '../../../src/run/audit.ts';
import { livenessChecks, readinessChecks, type StartedParts } from '../../../src/run/observe.ts';
import { readToken } from '../../../src/run/policy.ts';
import { createStaleGuards, managedNamespaces, referencedObjects } from '../../../src/run/view.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const gitPolicy: RunConfig['policy'] = {
  source: 'git',
  url: 'https://git.example/policy.git',
  ref: 'main',
  path: '',
};
const dirPolicy: RunConfig['policy'] = { source: 'dir', dir: '/policy', path: '' };

function withAuditSettings(policy: Policy, audit: { repo?: string; branch?: string }): Policy {
  return {
    ...policy,
    settings: { ...policy.settings, audit: { ...policy.settings.audit, ...audit } },
  };
}

describe('tollgate run, part by part', () => {
  describe('observe: /readyz says which part is not ready and why', () => {
    const cases: { name: string; parts: StartedParts; failed: string[] }[] = [
      {
        name: 'before anything started, both the policy and the view are reported',
        parts: {},
        failed: [
          'policy failed: no valid policy loaded yet',
          'cluster-view failed: cluster view not started',
        ],
      },
      {
        name: 'a loaded policy and an unsynced view: only the view',
        parts: { policies: { current: () => aPolicy().obj() }, view: { synced: false } },
        failed: [
          'cluster-view failed: cluster view has not listed pods, nodes and quotas of the managed namespaces yet (referenced objects are judged per reference)',
        ],
      },
      {
        name: 'a loaded policy and a synced view: ready',
        parts: { policies: { current: () => aPolicy().obj() }, view: { synced: true } },
        failed: [],
      },
      {
        name: 'a wedged loop: not ready, saying which loop and for how long',
        parts: {
          policies: { current: () => aPolicy().obj() },
          view: { synced: true },
          watchdog: { wedged: () => 'wedged: gate-release pass running for 400s (limit 300s)' },
        },
        failed: ['loops failed: wedged: gate-release pass running for 400s (limit 300s)'],
      },
    ];
    for (const { name, parts, failed } of cases) {
      it(name, () => {
        const report = runChecks(readinessChecks(parts), false);
        assert.equal(report.ok, failed.length === 0);
        assert.deepEqual(
          report.body
            .split('\n')
            .filter((line) => line.startsWith('[-] '))
            .map((line) => line.slice(4)),
          failed,
        );
      });
    }
    it('/healthz fails only when a loop is wedged, with the reason', () => {
      const parts: StartedParts = {};
      assert.ok(runChecks(livenessChecks(parts), false).ok, 'nothing started is still alive');
      parts.watchdog = { wedged: () => 'wedged: resize pass running for 301s (limit 300s)' };
      const report = runChecks(livenessChecks(parts), false);
      assert.equal(report.ok, false);
      assert.match(report.body, /loops failed: wedged: resize pass/);
    });
    it('the checks read the parts as they are filled in, not as they were at start', () => {
      const parts: StartedParts = {};
      const checks = readinessChecks(parts);
      parts.policies = { current: () => aPolicy().obj() };
      parts.view = { synced: true };
      assert.ok(runChecks(checks, false).ok);
    });
  });

  describe('policy: the Git token', () => {
    const read = (env: Record<string, string>, files: Record<string, string> = {}) => ({
      env,
      file: (path: string) => {
        const text = files[path];
        if (text === undefined) throw new Error(`ENOENT: ${path}`);
        return text;
      },
    });
    it('no token configured is anonymous access', () => {
      assert.equal(readToken({ git: { cacheDir: '/c' } }, read({})), undefined);
    });
    it('a token from a variable or a file is trimmed', () => {
      assert.equal(
        readToken(
          { git: { cacheDir: '/c', token: { from: 'env', name: 'T' } } },
          read({ T: ' s3 \n' }),
        ),
        's3',
      );
      assert.equal(
        readToken(
          { git: { cacheDir: '/c', token: { from: 'file', path: '/t' } } },
          read({}, { '/t': 'f1\n' }),
        ),
        'f1',
      );
    });
    it('an empty token is an error naming the variable or the file, not anonymous access', () => {
      assert.throws(
        () =>
          readToken(
            { git: { cacheDir: '/c', token: { from: 'env', name: 'T' } } },
            read({ T: '  ' }),
          ),
        /the Git token variable T is empty/,
      );
      assert.throws(
        () =>
          readToken(
            { git: { cacheDir: '/c', token: { from: 'file', path: '/t' } } },
            read({}, { '/t': '\n' }),
          ),
        /the Git token file \/t is empty/,
      );
    });
  });

  describe('view: what the cluster view watches', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-b').namespaces('b2', 'b1'), aTenant('team-a').namespaces('a', 'b1'))
      .gatePolicy(
        aGatePolicy('cm', 'team-b').conditions({
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'go' },
          field: 'data.ready',
          equals: 'true',
        }),
        aGatePolicy('crd', 'team-a').conditions({
          type: 'ObjectCondition',
          object: { apiVersion: 'x.io/v1', kind: 'Thing', name: 'one', namespace: 'shared' },
          field: 'data.ready',
          equals: 'true',
        }),
      )
      .obj();
    it('the namespaces every tenant owns, once each, sorted', () => {
      assert.deepEqual(managedNamespaces(policy), ['a', 'b1', 'b2']);
    });
    it("referenced objects: in each of the tenant's namespaces unless the condition names one", () => {
      assert.deepEqual(
        referencedObjects(policy).map((r) => `${r.kind} ${r.namespace}/${r.name}`),
        ['ConfigMap b2/go', 'ConfigMap b1/go', 'Thing shared/one'],
      );
    });
    it('the stale-guards start synced, and follow the measured lag and each new staleness policy', () => {
      let onLag: ((ms: number) => void) | undefined;
      let onPolicy: ((policy: Policy) => void) | undefined;
      const guards = createStaleGuards(
        aPolicy().obj(),
        {
          cacheLag: {
            onMeasured: (listener: (ms: number) => void) => void (onLag = listener),
          } as never,
        },
        { onPolicy: (listener) => void (onPolicy = listener) },
      );
      assert.equal(guards.gate.restored, false);
      assert.equal(guards.resize.restored, false);
      onLag?.(1234);
      assert.equal(guards.gate.observedCacheLagMs, 1234);
      assert.equal(guards.resize.observedCacheLagMs, 1234);
      assert.equal(guards.gate.loop, 'gate-release');
      assert.equal(guards.resize.loop, 'resize');
      // Cancel is destructive under the default staleness policy: 1234 ms of lag is
      // within its 5 s, so it proceeds; a new policy allowing 1 s asks for a live read.
      assert.equal(guards.gate.requireLive('ns/p', 'Cancel', undefined).action, 'proceed');
      const strict = aPolicy().obj();
      onPolicy?.({ ...strict, staleness: { ...strict.staleness, maxCacheLagMs: 1000 } });
      assert.equal(guards.gate.requireLive('ns/p', 'Cancel', undefined).action, 'liveRead');
      assert.equal(guards.resize.requireLive('ns/p', 'Cancel', undefined).action, 'liveRead');
    });
  });

  describe('audit: where the trail is written', () => {
    const first = aPolicy().obj();
    it('the flag wins; else the policy repository; the policy settings never choose (they carry no credential)', () => {
      const configured = withAuditSettings(first, { repo: 'https://git.example/audit.git' });
      assert.deepEqual(
        auditTarget(
          { audit: { repo: 'https://flag.example/a.git', branch: 'b' }, policy: gitPolicy },
          configured,
        ),
        { url: 'https://flag.example/a.git', branch: 'b' },
      );
      assert.deepEqual(auditTarget({ audit: {}, policy: gitPolicy }, configured), {
        url: 'https://git.example/policy.git',
        branch: 'tollgate/audit',
      });
      assert.deepEqual(auditTarget({ audit: {}, policy: gitPolicy }, first), {
        url: 'https://git.example/policy.git',
        branch: 'tollgate/audit',
      });
    });
    it('a policy folder with no audit repository anywhere is an error that says where to set one', () => {
      assert.throws(
        () => auditTarget({ audit: {}, policy: dirPolicy }, first),
        /no audit repository: set --audit-repo \/ TOLLGATE_AUDIT_REPO \(a policy folder/,
      );
    });
  });
});
