import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseRunConfig,
  type RawRunSettings,
  type RunConfigContext,
} from '../../../src/cli/run-config.ts';

const context: RunConfigContext = {
  env: { GIT_TOKEN: 'read-token', AUDIT_TOKEN: 'write-token' },
  hostname: 'tollgate-0',
  isFile: (path) => path === '/kube/config' || path.startsWith('/secrets/'),
  isDirectory: () => false,
};

function problems(flags: RawRunSettings): string[] {
  const result = parseRunConfig({ kubeconfig: '/kube/config', ...flags }, context);
  return result.ok ? [] : [...result.problems];
}

const cases: { name: string; flags: RawRunSettings; problem?: RegExp }[] = [
  {
    name: 'a token for a plain-http policy repository off this machine is refused',
    flags: { policyRepo: 'http://git.example/policy.git', gitTokenEnv: 'GIT_TOKEN' },
    problem: /--policy-repo.*refusing to send a Git credential over plain http/,
  },
  {
    name: 'an audit token for a plain-http audit repository off this machine is refused',
    flags: {
      policyRepo: 'https://git.example/policy.git',
      auditRepo: 'http://git.example/audit.git',
      auditTokenEnv: 'AUDIT_TOKEN',
    },
    problem: /--audit-repo.*refusing to send a Git credential over plain http/,
  },
  {
    name: 'the operator may allow plain http explicitly',
    flags: {
      policyRepo: 'http://git.example/policy.git',
      gitTokenEnv: 'GIT_TOKEN',
      allowInsecureHttp: 'true',
    },
  },
  {
    name: 'plain http to a loopback host carries the token (it never leaves the machine)',
    flags: { policyRepo: 'http://127.0.0.1:8080/policy.git', gitTokenFile: '/secrets/token' },
  },
  {
    name: 'plain http without any token is not refused (nothing to leak)',
    flags: { policyRepo: 'http://git.example/policy.git' },
  },
  {
    name: 'an audit token is taken from its own variable or file, not both',
    flags: {
      policyRepo: 'https://git.example/policy.git',
      auditTokenEnv: 'AUDIT_TOKEN',
      auditTokenFile: '/secrets/audit',
    },
    problem: /--audit-token-env.*--audit-token-file.*give one token source, not both/,
  },
  {
    name: 'the insecure flag takes true or false only',
    flags: { policyRepo: 'https://git.example/policy.git', allowInsecureHttp: 'yes' },
    problem: /--allow-insecure-http.*"yes" is not true or false/,
  },
];

for (const c of cases) {
  test(c.name, () => {
    const found = problems(c.flags);
    if (!c.problem) assert.deepEqual(found, []);
    else
      assert.ok(
        found.some((p) => c.problem!.test(p)),
        found.join('\n'),
      );
  });
}

test('read and write credentials are kept apart in the configuration', () => {
  const result = parseRunConfig(
    {
      kubeconfig: '/kube/config',
      policyRepo: 'https://git.example/policy.git',
      gitTokenFile: '/secrets/read',
      auditTokenFile: '/secrets/write',
    },
    context,
  );
  assert.ok(result.ok, result.ok ? '' : result.problems.join('\n'));
  if (!result.ok) return;
  assert.deepEqual(result.config.git.token, { from: 'file', path: '/secrets/read' });
  assert.deepEqual(result.config.git.auditToken, { from: 'file', path: '/secrets/write' });
});
