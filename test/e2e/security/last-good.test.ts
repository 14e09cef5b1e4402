/**
 * The last good policy survives a restart. A fresh policy source (a restarted tollgate:
 * new process, empty cache) whose branch HEAD does not validate runs on the newest
 * commit of the branch's history that does, says so in `tollgate_policy_head_invalid`,
 * and moves to HEAD as soon as HEAD is fixed. A restart while the Git server is down
 * starts from the policy saved on disk (src/policy/last-good.ts), says so in
 * `tollgate_policy_saved_in_force`, and moves to HEAD once the server is back; a saved
 * copy edited on disk is refused. Against a real Git server (git http-backend behind a
 * token check), taken down and brought back by a TCP proxy in front of it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PolicySource, type PolicyState } from '../../../src/policy/source.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { pushTree } from '../../support/git-server.ts';
import { exampleFiles, gitServerForFile } from './support.ts';
import { ManualTimers } from '../../support/manual-timers.ts';
import { startSwitchableProxy } from '../../support/switchable-proxy.ts';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

async function gauge(name: string): Promise<number | undefined> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return found?.values[0]?.value;
}

const git = gitServerForFile('tollgate-last-good-');
const freshCache = git.tempDir;

const broken =
  'apiVersion: tollgate.io/v1alpha1\nkind: Tenant\nmetadata: {name: broken}\nspec: {namespaces: [x], gatePrefixes: [api.tollgate.io/]}\n';

test('a restart with an invalid HEAD runs on the newest valid commit of history', async () => {
  const url = git.server().createRepo('restart');
  await pushTree(git.server(), url, exampleFiles(), { message: 'initial policy' });
  const files = exampleFiles();
  const weighted = files['tenants/api.yaml']!.replace(
    'gatePrefixes: [api.tollgate.io/]',
    'gatePrefixes: [api.tollgate.io/]\n  weight: 3',
  );
  const lastGood = await pushTree(
    git.server(),
    url,
    { 'tenants/api.yaml': weighted },
    { message: 'api weight 3' },
  );
  await pushTree(
    git.server(),
    url,
    { 'tenants/broken.yaml': broken },
    { message: 'overlapping prefix' },
  );
  const head = await pushTree(
    git.server(),
    url,
    { 'tenants/note.yaml': '# still broken\n' },
    { message: 'unrelated' },
  );

  const source = new PolicySource({
    location: url,
    token: git.server().token,
    cacheDir: freshCache(),
    timers: new ManualTimers(),
  });
  const rejected: string[] = [];
  source.onRejected((commit) => rejected.push(commit));
  const first = await source.poll();

  assert.equal(first.kind, 'rejected');
  assert.equal(first.kind === 'rejected' ? first.commit : '', head);
  assert.deepEqual(rejected, [head], 'HEAD is still reported as rejected');
  assert.equal(source.current()?.commit, lastGood, 'the newest valid commit is in force');
  assert.equal(source.current()?.tenants.get('api')?.weight, 3);
  assert.equal(await gauge('tollgate_policy_head_invalid'), 1);

  // HEAD fixed: the next poll applies it and the gauge clears.
  const fixed = await pushTree(
    git.server(),
    url,
    { 'tenants/broken.yaml': null },
    { message: 'fix' },
  );
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: fixed });
  assert.equal(source.current()?.commit, fixed);
  assert.equal(await gauge('tollgate_policy_head_invalid'), 0);
});

test('a restart with no valid commit in history has no policy, as before', async () => {
  const url = git.server().createRepo('never-valid');
  await pushTree(git.server(), url, { 'tollgate.yaml': 'kind: Nonsense\n' }, { message: 'bad' });
  await pushTree(git.server(), url, { 'tenants/x.yaml': broken }, { message: 'still bad' });
  const source = new PolicySource({
    location: url,
    token: git.server().token,
    cacheDir: freshCache(),
    timers: new ManualTimers(),
  });
  const first = await source.poll();
  assert.equal(first.kind, 'rejected');
  assert.equal(source.current(), undefined);
  assert.equal(await gauge('tollgate_policy_head_invalid'), 1);
});

const whyOf = (state: PolicyState): string => ('why' in state ? state.why : '');

/** A replica's policy source as `tollgate run` builds it: a cache folder and a saved copy. */
function replicaSource(location: string, savedPolicyFile: string): PolicySource {
  return new PolicySource({
    location,
    token: git.server().token,
    cacheDir: freshCache(),
    savedPolicyFile,
    timers: new ManualTimers(),
  });
}

test('a restart while Git is down starts from the saved last good policy, and takes HEAD once Git is back', async () => {
  const url = git.server().createRepo('saved');
  const good = await pushTree(git.server(), url, exampleFiles(), { message: 'initial policy' });
  const proxy = await startSwitchableProxy(git.server().url);
  const saved = join(freshCache(), 'last-good.json');
  try {
    const before = replicaSource(proxy.via(url), saved);
    assert.deepEqual(await before.poll(), { kind: 'applied', commit: good });
    before.stop();

    await proxy.down();
    const next = await pushTree(
      git.server(),
      url,
      { 'tenants/note.yaml': '# later\n' },
      { message: 'later' },
    );
    const restarted = replicaSource(proxy.via(url), saved);
    const first = await restarted.poll();
    assert.equal(first.kind, 'fetch-failed', 'the Git server is down');
    assert.equal(restarted.current()?.commit, good, 'the saved last good policy is in force');
    assert.equal(restarted.state().kind, 'saved');
    assert.match(whyOf(restarted.state()), /ECONNREFUSED|fetch|connect/i);
    assert.equal(await gauge('tollgate_policy_saved_in_force'), 1);

    await proxy.up();
    assert.deepEqual(await restarted.poll(), { kind: 'applied', commit: next });
    assert.deepEqual(restarted.state(), { kind: 'fetched', commit: next });
    assert.equal(await gauge('tollgate_policy_saved_in_force'), 0);
    restarted.stop();
  } finally {
    await proxy.close();
  }
});

test('a saved policy edited on disk is refused: no policy, and why', async () => {
  const url = git.server().createRepo('tampered');
  await pushTree(git.server(), url, exampleFiles(), { message: 'initial policy' });
  const proxy = await startSwitchableProxy(git.server().url);
  const saved = join(freshCache(), 'last-good.json');
  try {
    await replicaSource(proxy.via(url), saved).poll();
    writeFileSync(saved, readFileSync(saved, 'utf8').replace('weight', 'wieght'));
    await proxy.down();
    const restarted = replicaSource(proxy.via(url), saved);
    assert.equal((await restarted.poll()).kind, 'fetch-failed');
    assert.equal(restarted.current(), undefined);
    assert.equal(restarted.state().kind, 'none');
    assert.match(whyOf(restarted.state()), /saved policy .* refused: its digest does not match/);
  } finally {
    await proxy.close();
  }
});
