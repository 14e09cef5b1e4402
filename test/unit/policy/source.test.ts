import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PolicySource, resolveToken } from '../../../src/policy/source.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const examples = resolve(import.meta.dirname, '../../../policy-examples');

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = (found?.values ?? []).find((v) =>
    Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l),
  );
  return value?.value ?? 0;
}

test('a folder source applies good content, keeps it through a bad edit and picks up the fix', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-policy-src-'));
  try {
    cpSync(examples, dir, { recursive: true });
    const timers = new ManualTimers();
    const source = new PolicySource({ location: dir, intervalMs: 15_000, timers });
    const applied: Policy[] = [];
    const rejected: string[][] = [];
    source.onPolicy((p) => applied.push(p));
    source.onRejected((_commit, errors) => rejected.push(errors.map((e) => `${e.file} ${e.path}`)));

    const first = await source.start();
    assert.equal(first.kind, 'applied');
    assert.deepEqual(timers.pending, [15_000], 'the next poll is scheduled at the interval');
    const good = source.current();
    assert.ok(good);
    assert.equal(await metric('tollgate_policy_commit_info', { sha: good.commit }), 1);

    await timers.advance(15_000);
    assert.equal((await source.poll()).kind, 'unchanged');
    assert.equal(applied.length, 1, 'unchanged content is not announced again');

    const invalidBefore = await metric('tollgate_policy_load_errors_total', { reason: 'invalid' });
    writeFileSync(
      join(dir, 'tenants/api.yaml'),
      'apiVersion: tollgate.io/v1alpha1\nkind: Tenant\nmetadata: {name: api}\nspec: {namespaces: [ml-train], gatePrefixes: [api.tollgate.io/]}\n',
    );
    await timers.advance(15_000);
    const bad = await source.poll();
    assert.equal(bad.kind, 'rejected');
    // Files load in path order: api.yaml claims ml-train first, so ml-training.yaml is the one refused.
    assert.deepEqual(rejected, [['tenants/ml-training.yaml spec.namespaces[0]']]);
    assert.equal(source.current(), good, 'the last good policy stays in force');
    assert.equal(
      await metric('tollgate_policy_load_errors_total', { reason: 'invalid' }),
      invalidBefore + 1,
    );
    assert.equal(await metric('tollgate_policy_commit_info', { sha: good.commit }), 1);

    writeFileSync(
      join(dir, 'tenants/api.yaml'),
      `# fixed\n${readFileSync(join(examples, 'tenants/api.yaml'), 'utf8')}`,
    );
    await timers.advance(15_000);
    const fixed = await source.poll();
    assert.equal(fixed.kind, 'applied');
    assert.notEqual(source.current()?.commit, good.commit);
    assert.equal(applied.length, 2);
    assert.equal(
      await metric('tollgate_policy_commit_info', { sha: good.commit }),
      0,
      'the old commit series is gone',
    );
    source.stop();
    assert.deepEqual(timers.pending, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a missing folder is a fetch failure, counted, and nothing is in force', async () => {
  const before = await metric('tollgate_policy_load_errors_total', { reason: 'fetch' });
  const source = new PolicySource({
    location: '/nonexistent/tollgate-policy',
    timers: new ManualTimers(),
  });
  const outcome = await source.poll();
  assert.equal(outcome.kind, 'fetch-failed');
  assert.equal(source.current(), undefined);
  assert.equal(await metric('tollgate_policy_load_errors_total', { reason: 'fetch' }), before + 1);
});

test('a token variable that is not set is refused at construction, naming the variable only', () => {
  assert.throws(
    () =>
      new PolicySource({
        location: 'https://git.example.com/p.git',
        tokenEnv: 'TOLLGATE_TEST_UNSET_TOKEN_VAR',
      }),
    /environment variable TOLLGATE_TEST_UNSET_TOKEN_VAR \(the Git token\) is not set/,
  );
});

test('the Git token is read from a file (trimmed) or a variable, and a missing file is named without content', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-token-'));
  try {
    writeFileSync(join(dir, 'token'), 'tg-secret-from-file\n');
    assert.equal(resolveToken({ tokenFile: join(dir, 'token') }), 'tg-secret-from-file');
    process.env.TOLLGATE_TEST_TOKEN_VAR = ' tg-secret-from-env ';
    assert.equal(resolveToken({ tokenEnv: 'TOLLGATE_TEST_TOKEN_VAR' }), 'tg-secret-from-env');
    assert.equal(resolveToken({}), undefined);
    assert.throws(
      () => resolveToken({ tokenFile: join(dir, 'absent') }),
      (error: Error) => /cannot read the Git token file .*absent: ENOENT/.test(error.message),
    );
  } finally {
    delete process.env.TOLLGATE_TEST_TOKEN_VAR;
    rmSync(dir, { recursive: true, force: true });
  }
});
