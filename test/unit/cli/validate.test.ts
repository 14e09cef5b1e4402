import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { resolve } from 'node:path';
import { runValidate, type ValidateOptions } from '../../../src/cli/validate.ts';

const root = resolve(import.meta.dirname, '../../..');
const examples = resolve(root, 'policy-examples');
const fixtures = resolve(root, 'test/fixtures/policy-invalid');
const defaults: ValidateOptions = { output: 'text', gitTokenEnv: 'TOLLGATE_GIT_TOKEN' };

async function run(location: string, options: Partial<ValidateOptions> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runValidate(
    location,
    { ...defaults, ...options },
    {
      stdout: (t) => (stdout += t),
      stderr: (t) => (stderr += t),
      env: {},
    },
  );
  return { code, stdout, stderr };
}

test('a valid folder exits 0 and says what it holds', async () => {
  const { code, stdout } = await run(examples);
  assert.equal(code, 0);
  assert.match(
    stdout,
    /valid at sha256:[0-9a-f]{64} \(3 tenants, 3 gate policies, 1 resize policies, 1 approvals\)/,
  );
});

test('an invalid folder exits 1 and lists every error as file#doc path: message', async () => {
  const { code, stdout } = await run(resolve(fixtures, 'min-above-max'));
  assert.equal(code, 1);
  assert.match(
    stdout,
    /^resize\/r\.yaml#0 spec\.containers\.app\.memory: min \(2Gi\) is greater than max \(1Gi\)$/m,
  );
  assert.match(stdout, /invalid, 1 error$/m);
});

test('json output carries the structured errors', async () => {
  const { code, stdout } = await run(resolve(fixtures, 'gate-outside-prefix'), { output: 'json' });
  assert.equal(code, 1);
  const parsed = JSON.parse(stdout) as {
    valid: boolean;
    errors: { file: string; document: number; path: string }[];
  };
  assert.equal(parsed.valid, false);
  assert.deepEqual(
    parsed.errors.map((e) => [e.file, e.document, e.path]),
    [['gates/g.yaml', 0, 'spec.gate']],
  );
});

test('a missing folder is an I/O error: exit 2', async () => {
  const { code, stderr } = await run('/nonexistent/policy');
  assert.equal(code, 2);
  assert.match(stderr, /cannot read policy folder \/nonexistent\/policy/);
});

test('an unknown output format and --ref on a folder are usage errors: exit 2', async () => {
  assert.equal((await run(examples, { output: 'yaml' })).code, 2);
  assert.equal((await run(examples, { ref: 'main' })).code, 2);
  assert.equal((await run('ssh://git@example.com/p.git')).code, 2);
});

test('the command is registered on the tollgate CLI with its exit codes', async () => {
  const node = process.execPath;
  const main = resolve(root, 'src/cli/main.ts');
  const ok = await promisify(execFile)(node, [main, 'validate', examples]);
  assert.match(ok.stdout, /valid at/);
  await assert.rejects(
    promisify(execFile)(node, [main, 'validate', resolve(fixtures, 'duplicate-key')]),
    (error: { code: number; stdout: string }) => {
      assert.equal(error.code, 1);
      assert.match(error.stdout, /DUPLICATE_KEY/);
      return true;
    },
  );
  await assert.rejects(
    promisify(execFile)(node, [main, 'validate', examples, '--no-such-flag']),
    (error: { code: number }) => {
      assert.equal(error.code, 2);
      return true;
    },
  );
});
