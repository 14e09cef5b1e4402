/**
 * The policy source against a real Git server (git http-backend behind a token check):
 * clone, pick up a new commit, reject a broken commit while the last good one stays in
 * force, branch and sub-path, and a refused token reported without echoing it.
 * The server runs in this process, so every git CLI call goes through async pushTree.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { PolicySource } from '../../../src/policy/source.ts';
import { GitPolicyReader } from '../../../src/policy/git.ts';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { runValidate } from '../../../src/cli/validate.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { pushTree, startGitServer, type GitServer } from '../../support/git-server.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const examplesDir = resolve(import.meta.dirname, '../../../policy-examples');

function exampleFiles(prefix = ''): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else files[`${prefix}${relative(examplesDir, full)}`] = readFileSync(full, 'utf8');
    }
  };
  walk(examplesDir);
  return files;
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = (found?.values ?? []).find((v) =>
    Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l),
  );
  return value?.value ?? 0;
}

let server: GitServer;
const caches: string[] = [];
const cacheDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-policy-cache-'));
  caches.push(dir);
  return dir;
};

before(async () => {
  server = await startGitServer();
});
after(async () => {
  await server.close();
  for (const dir of caches) rmSync(dir, { recursive: true, force: true });
});

test('clones the policy, picks up a new commit, rejects a broken one and keeps the last good', async () => {
  const url = server.createRepo('policy');
  const firstSha = await pushTree(server, url, exampleFiles(), { message: 'initial policy' });
  const timers = new ManualTimers();
  const source = new PolicySource({
    location: url,
    token: server.token,
    cacheDir: cacheDir(),
    intervalMs: 30_000,
    timers,
  });
  const applied: Policy[] = [];
  const rejections: { commit: string; errors: string[] }[] = [];
  source.onPolicy((p) => applied.push(p));
  source.onRejected((commit, errors) =>
    rejections.push({ commit, errors: errors.map(formatPolicyError) }),
  );

  const first = await source.start();
  assert.deepEqual(first, { kind: 'applied', commit: firstSha });
  assert.equal(source.current()?.commit, firstSha);
  assert.deepEqual([...(source.current()?.tenants.keys() ?? [])].sort(), [
    'api',
    'data-pipeline',
    'ml-training',
  ]);
  assert.equal(await metric('tollgate_policy_commit_info', { sha: firstSha }), 1);

  // Nothing new: no parse, no announcement.
  await timers.advance(30_000);
  assert.deepEqual(await source.poll(), { kind: 'unchanged', commit: firstSha });

  // A new good commit is picked up on the next poll.
  const tenant =
    exampleFiles()['tenants/api.yaml']?.replace(
      'gatePrefixes: [api.tollgate.io/]',
      'gatePrefixes: [api.tollgate.io/]\n  weight: 3',
    ) ?? '';
  const secondSha = await pushTree(
    server,
    url,
    { 'tenants/api.yaml': tenant },
    { message: 'api weight 3' },
  );
  await timers.advance(30_000);
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: secondSha });
  assert.equal(source.current()?.tenants.get('api')?.weight, 3);
  assert.equal(await metric('tollgate_policy_commit_info', { sha: secondSha }), 1);
  assert.equal(await metric('tollgate_policy_commit_info', { sha: firstSha }), 0);

  // A broken commit: rejected with its errors, the second commit stays in force.
  const invalidBefore = await metric('tollgate_policy_load_errors_total', { reason: 'invalid' });
  const brokenSha = await pushTree(
    server,
    url,
    {
      'gates/data-pipeline.yaml':
        exampleFiles()['gates/data-pipeline.yaml']?.replace(
          'tenant: data-pipeline',
          'tenant: data-pipelines',
        ) ?? '',
    },
    { message: 'typo in tenant' },
  );
  await timers.advance(30_000);
  const broken = await source.poll();
  assert.equal(broken.kind, 'rejected');
  assert.equal(source.current()?.commit, secondSha, 'the last good policy stays in force');
  assert.deepEqual(
    rejections.map((r) => r.commit),
    [brokenSha],
  );
  assert.match(
    rejections[0]?.errors.join('\n') ?? '',
    /gates\/data-pipeline\.yaml#0 spec\.tenant: tenant "data-pipelines" is not defined/,
  );
  assert.equal(
    await metric('tollgate_policy_load_errors_total', { reason: 'invalid' }),
    invalidBefore + 1,
  );
  assert.equal(await metric('tollgate_policy_commit_info', { sha: secondSha }), 1);

  // Polling again does not re-announce the same broken commit.
  await timers.advance(30_000);
  assert.equal((await source.poll()).kind, 'unchanged');
  assert.equal(rejections.length, 1);

  // The fix lands: picked up.
  const fixedSha = await pushTree(
    server,
    url,
    { 'gates/data-pipeline.yaml': exampleFiles()['gates/data-pipeline.yaml'] ?? '' },
    { message: 'fix tenant' },
  );
  await timers.advance(30_000);
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: fixedSha });
  assert.deepEqual(
    applied.map((p) => p.commit),
    [firstSha, secondSha, fixedSha],
  );
  source.stop();
});

test('reads a branch and a sub-folder of the repository', async () => {
  const url = server.createRepo('monorepo');
  await pushTree(server, url, { 'README.md': '# infra\n' }, { message: 'main' });
  const sha = await pushTree(
    server,
    url,
    { ...exampleFiles('clusters/prod/policy/'), 'other/broken.yaml': 'a: [' },
    { branch: 'release', message: 'policy on release' },
  );
  const source = new PolicySource({
    location: url,
    ref: 'release',
    path: 'clusters/prod/policy',
    token: server.token,
    cacheDir: cacheDir(),
    timers: new ManualTimers(),
  });
  const outcome = await source.poll();
  assert.deepEqual(outcome, { kind: 'applied', commit: sha });
  assert.equal(
    source.current()?.gatePolicies.find((g) => g.name === 'gpu-gang')?.source.file,
    'gates/ml-training.yaml',
  );
});

test('a missing sub-folder or ref is reported clearly', async () => {
  const url = server.createRepo('policy-missing');
  await pushTree(server, url, exampleFiles(), { message: 'policy' });
  const noFolder = await new PolicySource({
    location: url,
    path: 'nope',
    token: server.token,
    cacheDir: cacheDir(),
    timers: new ManualTimers(),
  }).poll();
  assert.equal(noFolder.kind, 'rejected');
  if (noFolder.kind === 'rejected')
    assert.match(formatPolicyError(noFolder.errors[0]!), /has no folder "nope"/);
  const noRef = await new PolicySource({
    location: url,
    ref: 'v9',
    token: server.token,
    cacheDir: cacheDir(),
    timers: new ManualTimers(),
  }).poll();
  assert.equal(noRef.kind, 'fetch-failed');
  if (noRef.kind === 'fetch-failed') assert.match(noRef.error.message, /has no branch or tag "v9"/);
});

test('a bad token is refused with a clear error that never echoes the token', async () => {
  const url = server.createRepo('policy-auth');
  await pushTree(server, url, exampleFiles(), { message: 'policy' });
  const badToken = 'tg-wrong-token-5f3a9c';
  const refusedBefore = server.unauthorized;
  const fetchBefore = await metric('tollgate_policy_load_errors_total', { reason: 'fetch' });
  const logged: string[] = [];
  const logger = (await import('pino')).pino(
    { level: 'debug' },
    { write: (line: string) => logged.push(line) },
  );

  for (const options of [
    { location: url, token: badToken },
    { location: url.replace('http://', `http://x:${badToken}@`) },
  ]) {
    const source = new PolicySource({
      ...options,
      cacheDir: cacheDir(),
      timers: new ManualTimers(),
      logger,
    });
    assert.ok(!source.location.includes(badToken), source.location);
    const outcome = await source.poll();
    assert.equal(outcome.kind, 'fetch-failed');
    if (outcome.kind !== 'fetch-failed') continue;
    assert.equal(outcome.error.kind, 'auth');
    assert.match(
      outcome.error.message,
      /the server refused the credentials \(check the Git token\)/,
    );
    assert.ok(!outcome.error.message.includes(badToken), outcome.error.message);
    assert.ok(!(outcome.error.stack ?? '').includes(badToken));
    assert.equal(source.current(), undefined);
  }
  assert.ok(server.unauthorized > refusedBefore, 'the server saw and refused the requests');
  assert.equal(
    await metric('tollgate_policy_load_errors_total', { reason: 'fetch' }),
    fetchBefore + 2,
  );
  assert.ok(logged.length >= 2, 'the failures were logged');
  assert.ok(!logged.join('').includes(badToken), 'no log line carries the token');

  const noToken = await new PolicySource({
    location: url,
    cacheDir: cacheDir(),
    timers: new ManualTimers(),
  }).poll();
  assert.equal(noToken.kind, 'fetch-failed');
  if (noToken.kind === 'fetch-failed')
    assert.match(noToken.error.message, /no token was configured/);
});

test('tollgate validate reads a URL with the token from the environment and refuses a bad one with exit 2', async () => {
  const url = server.createRepo('policy-validate');
  const sha = await pushTree(server, url, exampleFiles(), { message: 'policy' });
  const run = async (token: string) => {
    let out = '';
    const code = await runValidate(
      url,
      { output: 'text', gitTokenEnv: 'POLICY_TOKEN' },
      {
        stdout: (t) => (out += t),
        stderr: (t) => (out += t),
        env: { POLICY_TOKEN: token },
      },
    );
    return { code, out };
  };
  const good = await run(server.token);
  assert.equal(good.code, 0, good.out);
  assert.match(good.out, new RegExp(`valid at ${sha}`));
  const bad = await run('tg-not-the-token-77');
  assert.equal(bad.code, 2);
  assert.match(bad.out, /the server refused the credentials \(check the Git token\)/);
  assert.ok(!bad.out.includes('tg-not-the-token-77'), bad.out);
});

test('a token in the URL is used for auth and stored nowhere in the cache clone', async () => {
  const url = server.createRepo('policy-url-token');
  const sha = await pushTree(server, url, exampleFiles(), { message: 'policy' });
  const cache = cacheDir();
  const source = new PolicySource({
    location: url.replace('http://', `http://x:${server.token}@`),
    cacheDir: cache,
    timers: new ManualTimers(),
  });
  assert.ok(!source.location.includes(server.token));
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: sha });
  const config = readFileSync(join(cache, 'config'), 'utf8');
  assert.match(config, /url = http:\/\/127\.0\.0\.1:\d+\/policy-url-token\.git/);
  assert.ok(!config.includes(server.token), config);
});

test('a repository larger than the fetch cap is refused while downloading', async () => {
  const url = server.createRepo('policy-huge');
  await pushTree(
    server,
    url,
    { ...exampleFiles(), 'blobs/noise.bin': randomBytes(300_000).toString('base64') },
    { message: 'noise' },
  );
  const reader = new GitPolicyReader({ url, token: server.token }, cacheDir(), {
    maxFetchBytes: 100_000,
  });
  await assert.rejects(reader.fetch(), /the repository sent more than 100000 bytes; refused/);
});

/** A source on `url` with its own cache folder, polled only by the test (no timer fires). */
function polledByHand(url: string): { source: PolicySource; dir: string } {
  const dir = cacheDir();
  const source = new PolicySource({
    location: url,
    token: server.token,
    cacheDir: dir,
    timers: new ManualTimers(),
  });
  return { source, dir };
}

test('a long-lived source keeps no pack in memory between polls, and still dates each approval by its own commit', async () => {
  const url = server.createRepo('policy-history');
  await pushTree(server, url, exampleFiles(), { message: 'initial policy' });
  const { source, dir } = polledByHand(url);
  assert.equal((await source.poll()).kind, 'applied');
  const expiresAt = new Date(Date.now() + 10 * 365 * 86_400_000).toISOString();
  const held: number[] = [];
  const mergedAt = new Map<string, number>();
  for (let i = 1; i <= 12; i++) {
    const name = `soak-load-${i}`;
    const file = `approvals/${name}.yaml`;
    const sha = await pushTree(
      server,
      url,
      {
        [file]: [
          '# yaml-language-server: $schema=../../schemas/Approval.schema.json',
          'apiVersion: tollgate.io/v1alpha1',
          'kind: Approval',
          `metadata: { name: ${name} }`,
          'spec:',
          '  action: Release',
          `  target: { kind: Pod, namespace: etl, name: ${name} }`,
          '  approvedBy: ops@example.com',
          `  reason: approval ${i}`,
          `  expiresAt: "${expiresAt}"`,
          '',
        ].join('\n'),
      },
      { message: `approve ${name}` },
    );
    assert.deepEqual(await source.poll(), { kind: 'applied', commit: sha });
    held.push(source.gitPacksInMemory);
    const committed = execFileSync(
      'git',
      ['-C', join(server.root, 'policy-history.git'), 'log', '-1', '--format=%ct', sha],
      { encoding: 'utf8' },
    );
    mergedAt.set(name, Number(committed) * 1000);
  }
  assert.deepEqual(
    held,
    Array.from({ length: 12 }, () => 0),
    'packs held in memory after each poll',
  );
  // On disk too, the clone keeps a few packs, not one per fetch (13 here): small ones are
  // merged as they come (mergeSmallPacks), so a lookup scans a few indexes.
  const packsOnDisk = readdirSync(join(dir, 'objects', 'pack')).filter((n) => n.endsWith('.pack'));
  assert.ok(packsOnDisk.length <= 4, `${packsOnDisk.length} packs on disk after 13 fetches`);
  const approvals = source.current()?.approvals ?? [];
  for (const [name, at] of mergedAt)
    assert.equal(
      approvals.find((a) => a.name === name)?.mergedAt,
      at,
      `${name} dated by its commit`,
    );
});

test('a poll that finds the same commit reads nothing from the cache clone: it lists the refs and stops', async () => {
  // Every 30 s a poll used to read the whole policy tree again from the clone's packs,
  // one per policy change the clone ever fetched: a cost that grew with the clone's age.
  const url = server.createRepo('policy-unchanged');
  const sha = await pushTree(server, url, exampleFiles(), { message: 'initial policy' });
  const { source, dir } = polledByHand(url);
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: sha });
  // The clone's packs are emptied (their indexes kept): a poll that read the commit or
  // its tree from the clone again would fail, while listing the remote's refs still works.
  const packs = join(dir, 'objects', 'pack');
  const emptied = readdirSync(packs).filter((name) => name.endsWith('.pack'));
  assert.ok(emptied.length > 0, 'the clone holds packs');
  for (const name of emptied) writeFileSync(join(packs, name), '');
  assert.deepEqual(await source.poll(), { kind: 'unchanged', commit: sha });
  assert.deepEqual(source.state(), { kind: 'fetched', commit: sha });
});
