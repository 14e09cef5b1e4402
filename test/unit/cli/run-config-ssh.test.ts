import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseRunConfig,
  type RawRunSettings,
  type RunConfigContext,
} from '../../../src/cli/run-config.ts';

const files = new Set([
  '/kubeconfig',
  '/secrets/deploy-key',
  '/secrets/audit-deploy-key',
  '/secrets/known_hosts',
]);
const context: RunConfigContext = {
  env: {},
  hostname: 'tollgate-0',
  isFile: (path) => files.has(path),
  isDirectory: (path) => path === '/policy',
};
const sshPolicy: RawRunSettings = {
  kubeconfig: '/kubeconfig',
  policyRepo: 'ssh://git@git.example:2222/platform/policy.git',
  gitSshKeyFile: '/secrets/deploy-key',
  gitSshKnownHosts: '/secrets/known_hosts',
};

function problemsOf(flags: RawRunSettings): string[] {
  const result = parseRunConfig(flags, context);
  return result.ok ? [] : [...result.problems];
}

describe('tollgate run over SSH remotes', () => {
  const accepted: { name: string; flags: RawRunSettings; git: Record<string, unknown> }[] = [
    {
      name: 'an ssh:// policy repository with a deploy key and a known_hosts file',
      flags: sshPolicy,
      git: { sshKeyFile: '/secrets/deploy-key', sshKnownHostsFile: '/secrets/known_hosts' },
    },
    {
      name: 'a scp-like policy repository (git@host:path)',
      flags: { ...sshPolicy, policyRepo: 'git@git.example:platform/policy.git' },
      git: { sshKeyFile: '/secrets/deploy-key', sshKnownHostsFile: '/secrets/known_hosts' },
    },
    {
      name: 'an SSH audit repository with its own (write) deploy key',
      flags: {
        ...sshPolicy,
        auditRepo: 'git@git.example:platform/audit.git',
        auditSshKeyFile: '/secrets/audit-deploy-key',
      },
      git: {
        sshKeyFile: '/secrets/deploy-key',
        auditSshKeyFile: '/secrets/audit-deploy-key',
        sshKnownHostsFile: '/secrets/known_hosts',
      },
    },
    {
      name: 'host keys unchecked only by the explicit insecure flag',
      flags: {
        ...sshPolicy,
        gitSshKnownHosts: undefined,
        gitSshInsecureIgnoreHostKey: 'true',
      },
      git: { sshKeyFile: '/secrets/deploy-key', sshInsecureIgnoreHostKey: true },
    },
  ];
  for (const { name, flags, git } of accepted) {
    it(`accepts ${name}`, () => {
      const result = parseRunConfig(flags, context);
      assert.deepEqual(result.ok ? [] : result.problems, []);
      assert.ok(result.ok);
      assert.deepEqual(result.config.git, {
        allowInsecureHttp: false,
        cacheDir: '/var/cache/tollgate',
        ...git,
      });
    });
  }

  const refused: { name: string; flags: RawRunSettings; problem: RegExp }[] = [
    {
      name: 'an SSH policy repository without a deploy key',
      flags: { ...sshPolicy, gitSshKeyFile: undefined },
      problem:
        /--policy-repo \/ TOLLGATE_POLICY_REPO: an SSH URL needs a deploy key: set --git-ssh-key-file/,
    },
    {
      name: 'a deploy key file that cannot be read',
      flags: { ...sshPolicy, gitSshKeyFile: '/secrets/missing-key' },
      problem:
        /--git-ssh-key-file \/ TOLLGATE_GIT_SSH_KEY_FILE: "\/secrets\/missing-key" is not a readable file/,
    },
    {
      name: 'an SSH remote without a known_hosts file',
      flags: { ...sshPolicy, gitSshKnownHosts: undefined },
      problem:
        /--git-ssh-known-hosts \/ TOLLGATE_GIT_SSH_KNOWN_HOSTS: SSH remotes need a known_hosts file/,
    },
    {
      name: 'a known_hosts file that cannot be read',
      flags: { ...sshPolicy, gitSshKnownHosts: '/secrets/nope' },
      problem: /--git-ssh-known-hosts .*: "\/secrets\/nope" is not a readable file/,
    },
    {
      name: 'an SSH audit repository beside an http policy without any deploy key',
      flags: {
        kubeconfig: '/kubeconfig',
        policyRepo: 'https://git.example/platform/policy.git',
        auditRepo: 'ssh://git@git.example/platform/audit.git',
        gitSshKnownHosts: '/secrets/known_hosts',
      },
      problem:
        /--audit-repo \/ TOLLGATE_AUDIT_REPO: an SSH URL needs a deploy key: set --audit-ssh-key-file or --git-ssh-key-file/,
    },
    {
      name: 'an insecure host-key flag that is not a boolean',
      flags: { ...sshPolicy, gitSshInsecureIgnoreHostKey: 'yes' },
      problem: /--git-ssh-insecure-ignore-host-key .*: "yes" is not true or false/,
    },
  ];
  for (const { name, flags, problem } of refused) {
    it(`refuses ${name}, naming the flag`, () => {
      const problems = problemsOf(flags);
      assert.ok(
        problems.some((p) => problem.test(p)),
        `expected ${problem} among:\n${problems.join('\n')}`,
      );
    });
  }
});
