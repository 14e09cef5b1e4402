/**
 * `tollgate plan` reads live pods, so it needs a cluster: without one, or with one it
 * cannot reach, it says so plainly (which kubeconfig, which server, why) instead of a
 * TLS or fetch error. --context and -o behave like kubectl's.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const examples = fileURLToPath(new URL('../../../policy-examples', import.meta.url));
const home = mkdtempSync(join(tmpdir(), 'tollgate-plan-home-'));

function plan(args: string[], env: Record<string, string> = {}) {
  const clean: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, ...env };
  const result = spawnSync(
    process.execPath,
    [cli, 'plan', '--policy', examples, '--base', examples, ...args],
    { env: clean, encoding: 'utf8' },
  );
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A loopback port nothing listens on (taken, then freed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
const port = await closedPort();

/** A kubeconfig with two contexts, both pointing at a port nothing listens on. */
function unreachableKubeconfig(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'tollgate-plan-kc-')), 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{ name: nowhere, cluster: { server: "https://127.0.0.1:${port}" } }]`,
      'users: [{ name: u, user: { token: x } }]',
      'contexts:',
      '  - { name: first, context: { cluster: nowhere, user: u } }',
      '  - { name: second, context: { cluster: nowhere, user: u } }',
      'current-context: first',
      '',
    ].join('\n'),
  );
  return file;
}

describe('tollgate plan without a reachable cluster', () => {
  it('with no kubeconfig at all: exit 2 and how to give one', () => {
    const result = plan([]);
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      /tollgate plan: no cluster to compare with: give --kubeconfig, set KUBECONFIG, or create ~\/\.kube\/config/,
    );
  });

  it('with an unreachable server: exit 2 naming the context, the server and the cause', () => {
    const result = plan([], { KUBECONFIG: unreachableKubeconfig() });
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      new RegExp(
        `cannot reach the cluster of context "first" at https://127\\.0\\.0\\.1:${port}: .*ECONNREFUSED`,
      ),
    );
  });

  it('--context picks a context like kubectl, and an unknown one lists those there are', () => {
    const kubeconfig = unreachableKubeconfig();
    assert.match(
      plan(['--kubeconfig', kubeconfig, '--context', 'second']).stderr,
      new RegExp(`context "second" at https://127\\.0\\.0\\.1:${port}`),
    );
    const unknown = plan(['--kubeconfig', kubeconfig, '--context', 'third']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /context "third" is not in .*config \(contexts: first, second\)/);
  });

  it('-o json reports the error as JSON', () => {
    const result = plan(['-o', 'json']);
    assert.equal(result.code, 2);
    assert.match(JSON.parse(result.stdout).error, /no cluster to compare with/);
  });
});
