import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  classifySshGitFailure,
  isSshUrl,
  extTransportUrl,
  parseSshRemote,
  sshAccessProblem,
  sshOptions,
  type SshRemote,
} from '../../../src/policy/git-ssh.ts';

describe('SSH remotes', () => {
  const urls: [string, boolean][] = [
    ['ssh://git@git.example:2222/platform/policy.git', true],
    ['git@git.example:platform/policy.git', true],
    ['git.example:platform/policy.git', true],
    ['https://git.example/platform/policy.git', false],
    ['http://127.0.0.1:8080/policy.git', false],
    ['file:///srv/policy.git', false],
    ['/srv/policy', false],
    ['./policy', false],
  ];
  for (const [url, ssh] of urls) {
    it(`${url} is ${ssh ? '' : 'not '}an SSH URL`, () => assert.equal(isSshUrl(url), ssh));
  }

  it('checks the host key against the operator known_hosts file, with the deploy key alone', () => {
    const options = sshOptions({
      keyFile: '/secrets/deploy key',
      keyFlag: '--git-ssh-key-file',
      knownHostsFile: '/secrets/known_hosts',
    }).join('\n');
    assert.match(options, /^-F\n\/dev\/null\n-i\n\/secrets\/deploy key\n/);
    for (const option of [
      'IdentitiesOnly=yes',
      'StrictHostKeyChecking=yes',
      'UserKnownHostsFile=/secrets/known_hosts',
      'BatchMode=yes',
    ])
      assert.ok(options.includes(`-o\n${option}\n`), `${option} in ${options}`);
    assert.doesNotMatch(options, /StrictHostKeyChecking=no/);
  });

  it('skips host key checking only when the insecure flag says so', () => {
    const options = sshOptions({
      keyFile: '/k',
      keyFlag: '--git-ssh-key-file',
      insecureIgnoreHostKey: true,
    });
    assert.ok(options.includes('StrictHostKeyChecking=no'));
  });

  const remotes: [string, SshRemote][] = [
    [
      'ssh://git@git.example:2222/platform/policy.git',
      { destination: 'git@git.example', port: '2222', path: '/platform/policy.git' },
    ],
    [
      'ssh://git.example/~alice/policy.git',
      { destination: 'git.example', path: '~alice/policy.git' },
    ],
    ['ssh://git@[::1]:22/policy.git', { destination: 'git@::1', port: '22', path: '/policy.git' }],
    [
      'git@git.example:platform/policy.git',
      { destination: 'git@git.example', path: 'platform/policy.git' },
    ],
    ['git.example:/srv/policy.git', { destination: 'git.example', path: '/srv/policy.git' }],
  ];
  for (const [url, remote] of remotes) {
    it(`reads ${url} as git does`, () => assert.deepEqual(parseSshRemote(url), remote));
  }

  for (const url of [
    'ssh://-oProxyCommand=x/policy.git',
    '-oProxyCommand=x:policy.git',
    'git@host:',
  ]) {
    it(`refuses ${url}: never an ssh option, never an empty path`, () =>
      assert.throws(() => parseSshRemote(url), /refused/));
  }

  it('gives git the remote as an ext:: command, word by word, with the remote command git sends over ssh', () => {
    const url = extTransportUrl(
      { keyFile: '/secrets/deploy key', keyFlag: '--git-ssh-key-file', knownHostsFile: '/k 100%' },
      "ssh://git@git.example:2222/team's policy.git",
    );
    assert.ok(url.startsWith('ext::ssh -F /dev/null -i /secrets/deploy% key '), url);
    assert.ok(url.includes(' -o UserKnownHostsFile=/k% 100%% '), url);
    assert.ok(url.endsWith(" -p 2222 git@git.example %S% '/team'\\''s% policy.git'"), url);
  });

  const problems: { name: string; access: Parameters<typeof sshAccessProblem>[0]; why: RegExp }[] =
    [
      {
        name: 'a missing key file, naming its flag',
        access: { keyFile: '/nonexistent/key', keyFlag: '--audit-ssh-key-file' },
        why: /cannot read the SSH key file \/nonexistent\/key \(--audit-ssh-key-file\): ENOENT/,
      },
      {
        name: 'no known_hosts file',
        access: { keyFile: import.meta.filename, keyFlag: '--git-ssh-key-file' },
        why: /set --git-ssh-known-hosts/,
      },
      {
        name: 'a missing known_hosts file',
        access: {
          keyFile: import.meta.filename,
          keyFlag: '--git-ssh-key-file',
          knownHostsFile: '/nonexistent/known_hosts',
        },
        why: /known_hosts file \/nonexistent\/known_hosts \(--git-ssh-known-hosts\): ENOENT/,
      },
    ];
  for (const { name, access, why } of problems) {
    it(`refuses ${name}`, () => assert.match(sshAccessProblem(access) ?? '', why));
  }

  const stderrs: [string, ReturnType<typeof classifySshGitFailure>][] = [
    ['git@127.0.0.1: Permission denied (publickey).\nfatal: Could not read from remote', 'auth'],
    [
      '@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.',
      'host-key',
    ],
    ['Host key verification failed.\nfatal: Could not read from remote repository.', 'host-key'],
    [
      ' ! [rejected]        refs/heads/a -> refs/heads/a (fetch first)\nerror: failed to push',
      'rejected',
    ],
    ['ssh: connect to host 127.0.0.1 port 1: Connection refused', 'network'],
    ["fatal: couldn't find remote ref refs/heads/nope", 'not-found'],
  ];
  for (const [stderr, kind] of stderrs) {
    it(`reads "${stderr.split('\n')[0]}" as ${kind}`, () =>
      assert.equal(classifySshGitFailure(stderr), kind));
  }
});
