/**
 * The command line's cluster conventions against the real API server: a kubeconfig whose
 * current context points nowhere and whose context `cluster` is the local control plane,
 * found through $KUBECONFIG. Without --context each command names the unreachable
 * context; with `--context cluster` it reads the real cluster, and its `-o yaml` carries
 * exactly what its `-o json` carries. $KUBECONFIG as a list (a missing file, then one with
 * the real credentials and no current-context, then one setting the current-context and a
 * user of the same name the API server refuses) reads the real cluster: merged as kubectl
 * merges, the first file's user wins. (The unit table in test/unit/cli/conventions.test.ts
 * covers every failure path command by command.)
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { runPlan } from '../../../src/cli/plan.ts';
import { runQueue } from '../../../src/cli/queue.ts';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { freePort, repoRoot } from './tools.ts';

const examples = join(repoRoot, 'policy-examples');
let cp: ControlPlane;
let kubeconfig: string;

before(async () => {
  cp = await sharedControlPlane();
  const kc = cp.kubeConfig('admin');
  const real = kc.getCurrentCluster()!;
  const user = kc.getCurrentUser()!;
  kc.loadFromOptions({
    clusters: [
      real,
      { name: 'nowhere', server: `https://127.0.0.1:${await freePort()}`, skipTLSVerify: false },
    ],
    users: [user],
    contexts: [
      { name: 'nowhere', cluster: 'nowhere', user: user.name },
      { name: 'cluster', cluster: real.name, user: user.name },
    ],
    currentContext: 'nowhere',
  });
  kubeconfig = join(mkdtempSync(join(tmpdir(), 'tollgate-cli-kc-')), 'config');
  writeFileSync(kubeconfig, kc.exportConfig());
});
after(async () => {
  await cp?.stop();
});

async function run(
  command: (io: Parameters<typeof runPlan>[1]) => Promise<number>,
  env: NodeJS.ProcessEnv = { KUBECONFIG: kubeconfig, HOME: tmpdir() },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = { stdout: '', stderr: '' };
  const code = await command({
    stdout: (text) => void (out.stdout += text),
    stderr: (text) => void (out.stderr += text),
    env,
    now: () => Date.parse('2030-01-01T00:00:00Z'),
  });
  return { code, ...out };
}

const commands: {
  name: string;
  run: (
    flags: { context?: string; output: string },
    env?: NodeJS.ProcessEnv,
  ) => ReturnType<typeof run>;
}[] = [
  {
    name: 'plan',
    run: (flags, env) =>
      run(
        (io) => runPlan({ policy: examples, base: examples, gitTokenEnv: 'T', ...flags }, io),
        env,
      ),
  },
  {
    name: 'queue',
    run: (flags, env) =>
      run((io) => runQueue({ policyDir: examples, limit: '50', ...flags }, io), env),
  },
];

describe('--context and $KUBECONFIG on the real API server', () => {
  for (const { name, run: command } of commands) {
    it(`tollgate ${name} without --context names the unreachable current context`, async () => {
      const result = await command({ output: 'text' });
      assert.equal(result.code, 2);
      assert.match(result.stderr, /cannot reach the cluster of context "nowhere"/);
    });

    it(`tollgate ${name} --context cluster reads the real cluster; -o yaml equals -o json`, async () => {
      const json = await command({ context: 'cluster', output: 'json' });
      assert.equal(json.code, 0, json.stderr);
      const yaml = await command({ context: 'cluster', output: 'yaml' });
      assert.equal(yaml.code, 0, yaml.stderr);
      assert.deepEqual(parse(yaml.stdout), JSON.parse(json.stdout));
    });
  }
});

describe('$KUBECONFIG as a list of files, merged as kubectl merges them, on the real API server', () => {
  let list: string;

  before(() => {
    const kc = cp.kubeConfig('admin');
    const real = kc.getCurrentCluster()!;
    const user = kc.getCurrentUser()!;
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-cli-kc-list-'));
    // The first file: the real cluster and credentials, no current-context.
    kc.loadFromOptions({
      clusters: [real],
      users: [user],
      contexts: [{ name: 'cluster', cluster: real.name, user: user.name }],
      currentContext: '',
    });
    const first = join(dir, 'first');
    writeFileSync(first, kc.exportConfig());
    // The second: the current-context, and a user of the same name whose token the API
    // server refuses: the first file's user must win, as with kubectl.
    kc.loadFromOptions({
      clusters: [real],
      users: [{ name: user.name, token: 'not-a-token' }],
      contexts: [{ name: 'cluster', cluster: real.name, user: user.name }],
      currentContext: 'cluster',
    });
    const second = join(dir, 'second');
    writeFileSync(second, kc.exportConfig());
    list = [join(dir, 'not-there'), first, second].join(':');
  });

  for (const { name, run: command } of commands)
    it(`tollgate ${name} reads the real cluster through the merged files`, async () => {
      const result = await command({ output: 'json' }, { KUBECONFIG: list, HOME: tmpdir() });
      assert.equal(result.code, 0, result.stderr);
    });
});
