import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sshAccess } from '../../../src/run/policy.ts';
import type { RunConfig } from '../../../src/cli/run-config.ts';

const git = (fields: Partial<RunConfig['git']>): Pick<RunConfig, 'git'> => ({
  git: { cacheDir: '/var/cache/tollgate', ...fields },
});
const ssh = 'ssh://git@git.example/platform/repo.git';

describe('the deploy key each remote is reached with', () => {
  const rows: {
    name: string;
    config: Pick<RunConfig, 'git'>;
    url: string | undefined;
    which: 'policy' | 'audit';
    access: ReturnType<typeof sshAccess>;
  }[] = [
    {
      name: 'the policy repository takes the Git key and the known_hosts file',
      config: git({ sshKeyFile: '/k/policy', sshKnownHostsFile: '/k/hosts' }),
      url: ssh,
      which: 'policy',
      access: { keyFile: '/k/policy', keyFlag: '--git-ssh-key-file', knownHostsFile: '/k/hosts' },
    },
    {
      name: 'the audit repository takes its own write key, named by its own flag',
      config: git({
        sshKeyFile: '/k/policy',
        auditSshKeyFile: '/k/audit',
        sshKnownHostsFile: '/k/hosts',
      }),
      url: 'git@git.example:platform/audit.git',
      which: 'audit',
      access: { keyFile: '/k/audit', keyFlag: '--audit-ssh-key-file', knownHostsFile: '/k/hosts' },
    },
    {
      name: 'the audit repository without its own key takes the Git key',
      config: git({ sshKeyFile: '/k/policy', sshKnownHostsFile: '/k/hosts' }),
      url: ssh,
      which: 'audit',
      access: { keyFile: '/k/policy', keyFlag: '--git-ssh-key-file', knownHostsFile: '/k/hosts' },
    },
    {
      name: 'the policy repository never takes the audit write key',
      config: git({ auditSshKeyFile: '/k/audit', sshKnownHostsFile: '/k/hosts' }),
      url: ssh,
      which: 'policy',
      access: undefined,
    },
    {
      name: 'host keys go unchecked only with the insecure flag',
      config: git({ sshKeyFile: '/k/policy', sshInsecureIgnoreHostKey: true }),
      url: ssh,
      which: 'policy',
      access: { keyFile: '/k/policy', keyFlag: '--git-ssh-key-file', insecureIgnoreHostKey: true },
    },
    {
      name: 'an https repository takes no key',
      config: git({ sshKeyFile: '/k/policy', sshKnownHostsFile: '/k/hosts' }),
      url: 'https://git.example/platform/repo.git',
      which: 'policy',
      access: undefined,
    },
  ];
  for (const { name, config, url, which, access } of rows) {
    it(name, () => assert.deepEqual(sshAccess(config, url, which), access));
  }
});
