/**
 * `tollgate validate`, `tollgate plan` and `tollgate audit` read SSH remotes with the same
 * flags as `tollgate run` (--git-ssh-key-file, --git-ssh-known-hosts,
 * --git-ssh-insecure-ignore-host-key), against a real SSH server (ssh2) running the real
 * git-upload-pack, each command the real CLI in its own process:
 * - validate reads the policy over ssh:// and says it is valid at the pushed commit;
 * - plan compares two refs of that repository against the real control plane;
 * - audit log lists the records of an audit branch pushed over SSH;
 * - an SSH URL without a key, or with a key file that is not there, is refused at once
 *   with an error naming the flag, and nothing reaches the server.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sharedControlPlane } from '../../support/control-plane.ts';
import {
  commitFiles,
  makeSshKey,
  startSshGitServer,
  type SshGitServer,
  type SshKeyPair,
} from '../../support/ssh-git-server.ts';
import { runPolicy } from './support.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { aDecision } from '../../builders/decision.ts';

const work = mkdtempSync(join(tmpdir(), 'tollgate-ssh-cli-'));
const tollgate = join(import.meta.dirname, '../../../bin/tollgate.js');

let server: SshGitServer;
let key: SshKeyPair;
let knownHosts: string;
let policyUrl: string;
let policyCommit: string;
let auditUrl: string;

interface Answer {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The real CLI in its own process; no Git token in its environment. */
function cli(args: readonly string[]): Promise<Answer> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [tollgate, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const sshFlags = (): string[] => [
  ...['--git-ssh-key-file', key.privateFile],
  ...['--git-ssh-known-hosts', knownHosts],
];

before(async () => {
  key = makeSshKey(work, 'deploy-key');
  server = await startSshGitServer({ allowedKeys: [key.publicKey] });
  knownHosts = join(work, 'known_hosts');
  writeFileSync(knownHosts, `${server.knownHostsLine}\n`);
  policyUrl = server.createRepo('cli-policy');
  const files = runPolicy({ namespace: 'ssh-cli', gate: 'ssh-cli.tollgate.io/ready' });
  policyCommit = commitFiles(server.repoPath(policyUrl), files);
  commitFiles(server.repoPath(policyUrl), files, { branch: 'proposal', message: 'same policy' });
  auditUrl = server.createRepo('cli-audit');
  const { writer } = await GitAuditWriter.open({
    url: auditUrl,
    ssh: { keyFile: key.privateFile, keyFlag: '--audit-ssh-key-file', knownHostsFile: knownHosts },
    cacheDir: mkdtempSync(join(work, 'writer-')),
    cluster: 'ssh-cli',
    controller: 'tollgate-test',
    batch: { maxDecisions: 1, maxDelayMs: 10 },
  });
  await writer.recordIntents([aDecision('Release', 'audited-pod', 'ssh-cli').obj()]);
  await writer.close();
});

after(async () => {
  await server?.close();
});

describe('the CLI over SSH remotes', () => {
  it('validate reads the policy over ssh:// with the deploy key and says it is valid at the pushed commit', async () => {
    const answer = await cli(['validate', policyUrl, ...sshFlags()]);
    assert.equal(answer.code, 0, answer.stderr);
    assert.match(answer.stdout, new RegExp(`valid at ${policyCommit}`));
  });

  it('plan reads both refs of an ssh:// repository and compares them on the live cluster', async () => {
    const cp = await sharedControlPlane();
    const answer = await cli([
      'plan',
      ...['--policy', policyUrl, '--ref', 'proposal', '--base', 'main'],
      ...['--kubeconfig', cp.adminKubeconfig],
      ...sshFlags(),
    ]);
    assert.equal(answer.code, 0, `${answer.stdout}\n${answer.stderr}`);
  });

  it('audit log lists the records of an audit branch pushed over SSH', async () => {
    const answer = await cli(['audit', 'log', '--repo', auditUrl, '-o', 'json', ...sshFlags()]);
    assert.equal(answer.code, 0, answer.stderr);
    assert.match(answer.stdout, /audited-pod/);
  });

  const refusals: { name: string; args: () => string[]; why: RegExp }[] = [
    {
      name: 'validate of an SSH URL without a key',
      args: () => ['validate', policyUrl, '--git-ssh-known-hosts', knownHosts],
      why: /SSH URL needs a deploy key: set --git-ssh-key-file/,
    },
    {
      name: 'validate with a key file that is not there',
      args: () => [
        'validate',
        policyUrl,
        ...['--git-ssh-key-file', join(work, 'no-such-key')],
        ...['--git-ssh-known-hosts', knownHosts],
      ],
      why: /cannot read the SSH key file .*no-such-key \(--git-ssh-key-file\): ENOENT/,
    },
    {
      name: 'plan of an SSH URL without a key',
      args: () => ['plan', '--policy', policyUrl, '--git-ssh-known-hosts', knownHosts],
      why: /SSH URL needs a deploy key: set --git-ssh-key-file/,
    },
    {
      name: 'audit log with a key file that is not there',
      args: () => [
        'audit',
        'log',
        ...['--repo', auditUrl],
        ...['--git-ssh-key-file', join(work, 'no-such-key')],
        ...['--git-ssh-known-hosts', knownHosts],
      ],
      why: /cannot read the SSH key file .*no-such-key \(--git-ssh-key-file\): ENOENT/,
    },
  ];
  for (const { name, args, why } of refusals) {
    it(`refuses ${name} at once, naming the flag; nothing reaches the server`, async () => {
      const before = server.uploadPacks;
      const answer = await cli(args());
      assert.equal(answer.code, 2, `${answer.stdout}\n${answer.stderr}`);
      assert.match(answer.stderr, why);
      assert.equal(server.uploadPacks, before);
    });
  }
});
