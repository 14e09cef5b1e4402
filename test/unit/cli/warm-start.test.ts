/**
 * A repeated start of `bin/tollgate.js` strips no TypeScript: with V8's compile cache warm
 * (Node keeps it under the OS temp folder; in a pod, its /tmp emptyDir, kept across
 * container restarts) Node's TypeScript stripper (amaro, a 3.8 MB bundle and its
 * WebAssembly instance, about 17 MB resident) is never loaded. Counted, not timed: whether
 * the process loaded amaro, from its own module list, for a first and a second start in a
 * fresh temp folder.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Prints, at exit, whether this process loaded Node's TypeScript stripper. */
const reportStripper = `data:text/javascript,${encodeURIComponent(
  `process.on('exit', () => process._rawDebug('STRIPPER ' + process.moduleLoadList.some((m) => m.includes('amaro'))));`,
)}`;

function loadsStripper(args: readonly string[], temp: string): boolean {
  const run = spawnSync(
    process.execPath,
    ['--import', reportStripper, 'bin/tollgate.js', ...args],
    {
      cwd: root,
      encoding: 'utf8',
      // tollgate's own start: not this test process's NODE_OPTIONS, whose preloads (the
      // any-day run's TypeScript clock shift) would load the stripper themselves.
      env: { ...process.env, TMPDIR: temp, NODE_COMPILE_CACHE: '', NODE_OPTIONS: '' },
      timeout: 60_000,
    },
  );
  assert.equal(run.status, 0, run.stderr);
  const line = /^STRIPPER (true|false)$/m.exec(run.stderr);
  assert.ok(line, `the process reported its modules\n${run.stderr}`);
  return line[1] === 'true';
}

describe('a repeated start of bin/tollgate.js', () => {
  for (const args of [['version'], ['validate', 'policy-examples']]) {
    it(`\`tollgate ${args.join(' ')}\` strips TypeScript on its first start only`, () => {
      const temp = mkdtempSync(join(tmpdir(), 'tollgate-warm-start-'));
      try {
        assert.equal(loadsStripper(args, temp), true, 'first start: an empty compile cache');
        assert.equal(loadsStripper(args, temp), false, 'second start: the cache is warm');
      } finally {
        rmSync(temp, { recursive: true, force: true });
      }
    });
  }
});
