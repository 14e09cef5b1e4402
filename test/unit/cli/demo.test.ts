import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoScript } from '../../../src/cli/demo.ts';

test('in a source checkout `tollgate demo` finds scripts/demo.ts', () => {
  const script = demoScript();
  assert.ok(script?.endsWith(join('scripts', 'demo.ts')), String(script));
});

test('outside a source checkout there is no demo to run', () => {
  assert.equal(demoScript(mkdtempSync(join(tmpdir(), 'tollgate-no-checkout-'))), undefined);
});

test('`tollgate demo --help` names the short mode', () => {
  const help = execFileSync(process.execPath, ['src/cli/main.ts', 'demo', '--help'], {
    encoding: 'utf8',
  });
  assert.match(help, /--short/);
  assert.match(help, /needs a source checkout/);
});

test('an unknown option to `tollgate demo` is a usage error (exit 2), and nothing is started', () => {
  const run = spawnSync(process.execPath, ['src/cli/main.ts', 'demo', '--long'], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 2);
  assert.match(run.stderr, /unknown option '--long'/);
});
