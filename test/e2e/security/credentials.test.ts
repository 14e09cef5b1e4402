/**
 * Git credentials stay where the operator puts them, against a real Git server (git
 * http-backend behind a token check):
 * - a token file is read again at every fetch: a rotated Secret is used without a
 *   restart (a wrong token first, the right one written to the same file next);
 * - a token is never offered over plain http to a non-loopback host unless the
 *   operator allows it; the refusal happens before any connection;
 * - the audit target is the operator's: a policy's settings.audit.repo and branch do
 *   not move the audit trail (and the write credential) anywhere.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PolicySource } from '../../../src/policy/source.ts';
import { GitPolicyReader } from '../../../src/policy/git.ts';
import { auditTarget } from '../../../src/run/audit.ts';
import { loadPolicyFromDirectory } from '../../../src/policy/load.ts';
import { pushTree } from '../../support/git-server.ts';
import { exampleFiles, gitServerForFile } from './support.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const git = gitServerForFile('tollgate-credentials-');
const tempDir = git.tempDir;

test('a rotated token file is used from the next fetch on, without a restart', async () => {
  const url = git.server().createRepo('rotation');
  const sha = await pushTree(git.server(), url, exampleFiles(), { message: 'policy' });
  const tokenFile = join(tempDir(), 'token');
  writeFileSync(tokenFile, 'the-old-revoked-token\n');
  const cache = tempDir();
  const source = new PolicySource({
    location: url,
    tokenFile,
    cacheDir: cache,
    timers: new ManualTimers(),
  });
  const refused = await source.poll();
  assert.equal(refused.kind, 'fetch-failed');
  if (refused.kind === 'fetch-failed') {
    assert.equal(refused.error.kind, 'auth');
    assert.doesNotMatch(refused.error.message, /the-old-revoked-token/);
  }
  writeFileSync(tokenFile, `${git.server().token}\n`);
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: sha });
  // Neither token, the revoked one or the current one, is stored in the cache clone.
  for (const file of filesUnder(cache)) {
    const bytes = readFileSync(file);
    for (const token of ['the-old-revoked-token', git.server().token]) {
      assert.equal(bytes.includes(token), false, `${token} found in ${file}`);
    }
  }
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

test('a token is not offered over plain http to a non-loopback host', async () => {
  const reader = new GitPolicyReader(
    { url: 'http://git.tollgate-test.invalid/policy.git', token: 'never-sent' },
    tempDir(),
  );
  await assert.rejects(reader.fetch(), (error: Error & { kind?: string }) => {
    assert.equal(error.kind, 'auth');
    assert.match(error.message, /refusing to send a Git credential over plain http/);
    assert.doesNotMatch(error.message, /never-sent/);
    return true;
  });
  const allowed = new GitPolicyReader(
    { url: 'http://git.tollgate-test.invalid/policy.git', token: 'x' },
    tempDir(),
    { allowInsecureHttp: true },
  );
  // Allowed by the operator: the request is made (and fails on the unknown host).
  await assert.rejects(allowed.fetch(), (error: Error & { kind?: string }) => {
    assert.doesNotMatch(error.message, /plain http/);
    return true;
  });
});

test("a policy's settings.audit.repo and branch do not choose where audit commits go", async () => {
  const dir = tempDir();
  for (const [path, content] of Object.entries(exampleFiles())) {
    const full = join(dir, path);
    mkdirSync(resolve(full, '..'), { recursive: true });
    writeFileSync(full, content);
  }
  const settings = readFileSync(join(dir, 'tollgate.yaml'), 'utf8');
  writeFileSync(
    join(dir, 'tollgate.yaml'),
    settings.replace(
      'branch: tollgate/audit',
      'repo: http://collector.tollgate-test.invalid/steal.git\n    branch: main',
    ),
  );
  const loaded = await loadPolicyFromDirectory(dir);
  assert.ok(loaded.ok, loaded.ok ? '' : JSON.stringify(loaded.errors));
  if (!loaded.ok) return;
  assert.equal(
    loaded.policy.settings.audit.repo,
    'http://collector.tollgate-test.invalid/steal.git',
  );
  const policyUrl = git.server().createRepo('operator-policy');
  const target = auditTarget(
    { audit: {}, policy: { source: 'git', url: policyUrl, ref: 'main', path: '' } },
    loaded.policy,
  );
  assert.deepEqual(target, { url: policyUrl, branch: 'tollgate/audit' });
});
