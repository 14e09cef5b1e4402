/**
 * The benchmarks' Git server in a process of its own (test/support/git-server-process.ts):
 * the same server, reachable with its token, repositories created beside it, and the
 * test-only controls refused with a reason.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { pushTree } from '../../support/git-server.ts';
import { startGitServerProcess } from '../../support/git-server-process.ts';

test('a Git server in its own process takes a push with its token, serves it back, and is gone after close', async () => {
  const server = await startGitServerProcess();
  const repo = server.createRepo('policy');
  const pushed = await pushTree(server, repo, { 'a.yaml': 'kind: Tenant\n' });
  const authed = repo.replace('http://', `http://x:${server.token}@`);
  const heads = execFileSync('git', ['ls-remote', authed, 'refs/heads/main'], { encoding: 'utf8' });
  assert.equal(heads.split('\t')[0], pushed);
  assert.throws(() => server.rotateToken('other'), /rotateToken: not available .* own process/);
  await server.close();
  assert.equal(existsSync(server.root), false, 'its repositories are removed');
  assert.throws(() =>
    execFileSync('git', ['ls-remote', authed], { stdio: 'pipe', timeout: 10_000 }),
  );
});
