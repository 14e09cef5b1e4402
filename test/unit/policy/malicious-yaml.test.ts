/**
 * Hostile YAML, as anyone with a pull request could write it. Each case must be refused
 * with a clear error by the guard made for it (the message names which: the size cap,
 * the nesting pre-scan that runs before the recursive parser, the alias limit), without
 * crashing the process or growing its memory. How much time the guards save is measured
 * in bench/hostile-yaml.ts as ratios (without the pre-scan the 100k nesting cases take
 * hundreds of times longer), not asserted on the wall clock of a shared machine.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePolicyFile, limits } from '../../../src/policy/parse.ts';
import { loadPolicyFromDirectory, loadPolicyFromFiles } from '../../../src/policy/load.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';

const billionLaughs = [
  'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
  'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
  'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
  'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
  'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]',
  'f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]',
  'g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]',
  'h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]',
  'i: [*h,*h,*h,*h,*h,*h,*h,*h,*h]',
].join('\n');

const cases: { name: string; text: () => string; message: RegExp }[] = [
  {
    name: 'a billion laughs alias bomb is refused as resource exhaustion',
    text: () => billionLaughs,
    message: /aliases expand to too many nodes/,
  },
  {
    name: '100k nested flow sequences are refused before the parser recurses',
    text: () => '['.repeat(100_000) + ']'.repeat(100_000),
    message: /nesting is deeper than 64 levels/,
  },
  {
    name: '100k nested flow mappings are refused',
    text: () => 'a: ' + '{a: '.repeat(100_000) + '1' + '}'.repeat(100_000),
    message: /nesting is deeper than 64 levels/,
  },
  {
    name: '100k compact block sequences on one line are refused',
    text: () => '- '.repeat(100_000) + 'x',
    message: /nesting is deeper than 64 levels/,
  },
  {
    name: 'a 20 MB file is refused by size before parsing',
    text: () => `a: "${'x'.repeat(20 * 1024 * 1024)}"`,
    message: /larger than the 1048576 byte limit/,
  },
  {
    name: 'duplicate keys are refused',
    text: () => 'kind: Tenant\nkind: GatePolicy\n',
    message: /DUPLICATE_KEY: Map keys must be unique \(line 2, column 1\)/,
  },
  {
    name: 'a !!js/function tag is refused, not turned into a string or code',
    text: () => 'spec:\n  priority: !!js/function "function () { process.exit(1) }"\n',
    message: /TAG_RESOLVE_FAILED: Unresolved tag: tag:yaml.org,2002:js\/function/,
  },
  {
    name: 'a custom local tag is refused',
    text: () => 'spec: !Ref other\n',
    message: /TAG_RESOLVE_FAILED/,
  },
  {
    name: 'merge keys are not applied',
    text: () => 'base: &b {x: 1}\nspec:\n  <<: *b\n  <<: *b\n',
    message: /DUPLICATE_KEY/,
  },
];

for (const c of cases) {
  test(c.name, () => {
    const text = c.text();
    const result = parsePolicyFile('evil.yaml', text);
    assert.deepEqual(result.documents, []);
    assert.ok(result.errors.length > 0, 'refused with an error');
    assert.ok(result.errors.length <= limits.maxErrorsPerFile, 'errors are capped per file');
    const printed = result.errors.map(formatPolicyError).join('\n');
    assert.match(printed, c.message);
    assert.match(printed, /^evil\.yaml/);
  });
}

test('brackets inside quoted scalars and comments do not count as nesting', () => {
  const text = `q: "${'['.repeat(500)}"\n# ${'{'.repeat(500)}\nr: 'sum(rate(x[5m]))'\n`;
  const result = parsePolicyFile('ok.yaml', text);
  assert.deepEqual(result.errors, []);
  assert.equal(result.documents.length, 1);
});

test('nesting just under the limit still parses', () => {
  const depth = limits.maxNestingDepth - 4;
  const result = parsePolicyFile('deep.yaml', 'a: ' + '['.repeat(depth) + ']'.repeat(depth));
  assert.deepEqual(result.errors, []);
});

test('a 20 MB file in a policy folder is refused from its size alone and memory stays bounded', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-policy-big-'));
  try {
    writeFileSync(
      join(dir, 'tollgate.yaml'),
      'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nspec: {cluster: x}\n',
    );
    mkdirSync(join(dir, 'tenants'));
    writeFileSync(join(dir, 'tenants/huge.yaml'), Buffer.alloc(20 * 1024 * 1024, 'a'));
    globalThis.gc?.();
    const before = process.memoryUsage().rss;
    const result = await loadPolicyFromDirectory(dir);
    const grown = process.memoryUsage().rss - before;
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.match(
        formatPolicyError(result.errors[0]!),
        /^tenants\/huge\.yaml: file is 20971520 bytes, over the 1048576 byte limit/,
      );
    }
    // The file is never read: memory grows by far less than its 20 MB.
    assert.ok(grown < 10 * 1024 * 1024, `rss grew ${(grown / 1024 / 1024).toFixed(1)} MiB`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('many files that are each under the limit are refused past the repository limit', async () => {
  const chunk = `# ${'x'.repeat(limits.maxFileBytes - 100)}\n`;
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-policy-many-'));
  try {
    for (let i = 0; i < 9; i += 1) writeFileSync(join(dir, `f${i}.yaml`), chunk);
    const result = await loadPolicyFromDirectory(dir);
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.ok(
        result.errors.some((e) => /exceed 8388608 bytes in total/.test(e.message)),
        result.errors.map(formatPolicyError).join('\n'),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('after every hostile input the process still loads a good policy', () => {
  for (const c of cases) parsePolicyFile('evil.yaml', c.text());
  const result = loadPolicyFromFiles([
    {
      path: 'tollgate.yaml',
      content: 'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nspec: {cluster: x}\n',
    },
  ]);
  assert.equal(result.ok, true);
});
