/**
 * The last good policy survives a restart. A fresh policy source (a restarted tollgate:
 * new process, empty cache) whose branch HEAD does not validate runs on the newest
 * commit of the branch's history that does, says so in `tollgate_policy_head_invalid`,
 * and moves to HEAD as soon as HEAD is fixed. Against a real Git server (git
 * http-backend behind a token check).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PolicySource } from '../../../src/policy/source.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { pushTree } from '../../support/git-server.ts';
import { exampleFiles, gitServerForFile } from './support.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

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
