/**
 * SSH-signed audit commits, checked by the real `git verify-commit` (gpg.format=ssh)
 * on a fresh clone, including commits that were rebuilt on a new tip after a lost race.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gitServerPerFile } from '../../support/git-server.ts';
import { sshSigner } from '../../../src/audit/sign.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { aDecision } from '../../builders/decision.ts';
import { freshClone, gitCli } from './support.ts';

const run = promisify(execFile);
const server = gitServerPerFile();

describe('signed audit commits', () => {
  it('every commit of a signing writer verifies with git, also after a rebuild on a moved tip', async () => {
    const url = server.createRepo('signed');
    const keys = mkdtempSync(join(tmpdir(), 'tollgate-sign-'));
    await run('ssh-keygen', [
      '-q',
      '-t',
      'ed25519',
      '-N',
      '',
      '-C',
      'tollgate',
      '-f',
      join(keys, 'id'),
    ]);
    const signer = sshSigner(readFileSync(join(keys, 'id'), 'utf8'), join(keys, 'id'));
    assert.equal(
      signer.publicKey,
      readFileSync(join(keys, 'id.pub'), 'utf8').split(' ').slice(0, 2).join(' '),
    );
    const allowed = join(keys, 'allowed_signers');
    writeFileSync(allowed, `tollgate@audit.invalid namespaces="git" ${signer.publicKey}\n`);

    const open = (controller: string, withSigner: boolean) =>
      GitAuditWriter.open({
        url,
        token: server.token,
        cacheDir: mkdtempSync(join(tmpdir(), `tollgate-sign-${controller}-`)),
        cluster: 'signed',
        controller,
        batch: { maxDecisions: 10, maxDelayMs: 10 },
        ...(withSigner ? { signer } : {}),
      });
    const { writer: signed, repo } = await open('tollgate-signed', true);
    const { writer: plain } = await open('tollgate-plain', false);
    await signed.recordIntents([aDecision('Release', 'p1').obj()]);
    // Another writer moves the tip; the signed writer's next commit sits on a stale parent and is rebuilt.
    await plain.recordIntents([aDecision('Release', 'p2').obj()]);
    await repo.commitFile('audit/signed/manual.jsonl', '{}\n', 'manual\n\nTollgate-Decisions: 0\n');
    await signed.recordIntents([aDecision('Release', 'p3').obj()]);
    await Promise.all([signed.close(), plain.close()]);

    const clone = await freshClone(server, url, 'tollgate/audit');
    const log = (await gitCli(clone, 'log', '--format=%H %s%n%b%x00'))
      .split('\x00')
      .map((entry) => entry.trim())
      .filter(Boolean);
    const mine = log.filter(
      (entry) =>
        entry.includes('Tollgate-Controller: tollgate-signed') || entry.includes(' manual'),
    );
    const theirs = log.filter((entry) => entry.includes('Tollgate-Controller: tollgate-plain'));
    assert.equal(mine.length, 3);
    assert.equal(theirs.length, 1);
    for (const entry of mine) {
      const oid = entry.slice(0, 40);
      const { stderr } = await run('git', [
        '-C',
        clone,
        '-c',
        'gpg.format=ssh',
        '-c',
        `gpg.ssh.allowedSignersFile=${allowed}`,
        'verify-commit',
        oid,
      ]);
      assert.match(stderr, /Good "git" signature for tollgate@audit.invalid with ED25519 key/);
    }
    await assert.rejects(
      run('git', [
        '-C',
        clone,
        '-c',
        'gpg.format=ssh',
        '-c',
        `gpg.ssh.allowedSignersFile=${allowed}`,
        'verify-commit',
        (theirs[0] as string).slice(0, 40),
      ]),
      'an unsigned commit does not verify',
    );
  });

  it('an encrypted or non-ed25519 key is refused with the reason', async () => {
    const keys = mkdtempSync(join(tmpdir(), 'tollgate-sign-bad-'));
    await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'secret', '-f', join(keys, 'enc')]);
    await run('ssh-keygen', ['-q', '-t', 'ecdsa', '-N', '', '-f', join(keys, 'ec')]);
    assert.throws(
      () => sshSigner(readFileSync(join(keys, 'enc'), 'utf8'), 'enc'),
      /enc: the key is encrypted \(aes256-ctr\)/,
    );
    assert.throws(
      () => sshSigner(readFileSync(join(keys, 'ec'), 'utf8'), 'ec'),
      /ec: key type ecdsa-sha2-nistp256 is not supported; use an ed25519 key/,
    );
  });
});
