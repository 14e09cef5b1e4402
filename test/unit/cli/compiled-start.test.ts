/**
 * The image ships src/ compiled to JavaScript (scripts/compile-js.sh), so no start of it,
 * first or not, loads Node's TypeScript stripper (amaro: about 17 MB resident, and the
 * time to strip every module). Counted, not timed: a tree laid out as the image lays out
 * /app (bin/, the compiled src/, schemas/, package.json, the checkout's node_modules) with
 * an empty compile cache, whether its process loaded amaro (its own module list), and that
 * it answers exactly as the checkout does.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Prints, at exit, whether this process loaded Node's TypeScript stripper and used the compile cache. */
const reportStripper = `data:text/javascript,${encodeURIComponent(
  `import module from 'node:module';
   process.on('exit', () => {
     process._rawDebug('STRIPPER ' + process.moduleLoadList.some((m) => m.includes('amaro')));
     process._rawDebug('COMPILE-CACHE ' + (module.getCompileCacheDir() !== undefined));
   });`,
)}`;

interface Answer {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly stripper: boolean;
  /** Whether the process used V8's compile cache (Node's own answer, at its exit). */
  readonly compileCache: boolean;
}

/** `bin/tollgate.js ARGS` in `app`, with an empty compile cache of its own. */
function tollgate(app: string, args: readonly string[]): Answer {
  const temp = mkdtempSync(join(tmpdir(), 'tollgate-compiled-start-'));
  try {
    const run = spawnSync(
      process.execPath,
      ['--import', reportStripper, join(app, 'bin/tollgate.js'), ...args],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, TMPDIR: temp, NODE_COMPILE_CACHE: '', NODE_OPTIONS: '' },
        timeout: 60_000,
      },
    );
    const line = /^STRIPPER (true|false)$/m.exec(run.stderr);
    const cache = /^COMPILE-CACHE (true|false)$/m.exec(run.stderr);
    assert.ok(line && cache, `the process reported its modules\n${run.stderr}`);
    return {
      status: run.status,
      stdout: run.stdout,
      stderr: run.stderr.replace(/^(STRIPPER|COMPILE-CACHE) .*\n?/gm, ''),
      stripper: line[1] === 'true',
      compileCache: cache[1] === 'true',
    };
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

describe('the image compiles src/ to JavaScript', () => {
  let app = '';
  before(() => {
    app = mkdtempSync(join(tmpdir(), 'tollgate-compiled-app-'));
    execFileSync('bash', [join(root, 'scripts/compile-js.sh'), app], { stdio: 'pipe' });
    cpSync(join(root, 'bin'), join(app, 'bin'), { recursive: true });
    cpSync(join(root, 'schemas'), join(app, 'schemas'), { recursive: true });
    cpSync(join(root, 'package.json'), join(app, 'package.json'));
    // Not in the image (it has no deploy/), here so `validate` finds the shipped
    // ClusterRole as the checkout does: the comparison is of the compilation alone.
    cpSync(join(root, 'deploy/base'), join(app, 'deploy/base'), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(app, 'node_modules'));
  });
  after(() => rmSync(app, { recursive: true, force: true }));

  it('the compiled tree holds no TypeScript, and a module for every module of src/', () => {
    const compiled = filesUnder(join(app, 'src')).map((f) => f.slice(app.length + 1));
    assert.deepEqual(
      compiled.filter((f) => !f.endsWith('.js')),
      [],
    );
    const sources = filesUnder(join(root, 'src'))
      .map((f) => f.slice(root.length + 1))
      .filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts') && !f.endsWith('.test.ts'))
      .map((f) => f.replace(/\.ts$/, '.js'))
      .sort();
    assert.deepEqual(compiled.sort(), sources);
  });

  it('refuses the checkout itself as its output (its src/ would be replaced), naming why', () => {
    const run = spawnSync('bash', [join(root, 'scripts/compile-js.sh'), root], {
      encoding: 'utf8',
    });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /OUT is the checkout itself/);
    assert.ok(existsSync(join(root, 'src/cli/main.ts')), 'src/ left as it is');
  });

  for (const args of [
    ['version'],
    ['validate', 'policy-examples'],
    // Every module of `tollgate run` is loaded before its configuration is checked.
    ['run', '--kubeconfig', '/nonexistent/kubeconfig', '--policy-dir', 'policy-examples'],
  ]) {
    it(`\`tollgate ${args[0]}\` from the compiled tree loads no TypeScript stripper on a first start and answers as the checkout does`, () => {
      const compiled = tollgate(app, args);
      const checkout = tollgate(root, args);
      assert.equal(checkout.stripper, true, 'the checkout strips its TypeScript on a first start');
      assert.equal(compiled.stripper, false, compiled.stderr);
      assert.equal(compiled.status, checkout.status, compiled.stderr);
      assert.equal(compiled.stdout, checkout.stdout);
      assert.equal(compiled.stderr, checkout.stderr);
    });
  }

  // V8's compile cache keeps every module's cached code in memory for the life of the
  // process (Node writes it out at exit): 3.5 MiB of a `tollgate run` at 0 pods with an
  // empty cache, more with a warm one (docs/BENCHMARKS.md, Memory). A short command gains a
  // faster start from it; the long-running `run` of the compiled tree, which strips no
  // TypeScript, only pays for it. A checkout's `run` keeps it: there it saves loading
  // Node's TypeScript stripper on every warm start.
  it("`tollgate run` from the compiled tree starts without V8's compile cache; shorter commands and the checkout keep it", () => {
    const run = [
      'run',
      '--kubeconfig',
      '/nonexistent/kubeconfig',
      '--policy-dir',
      'policy-examples',
    ];
    assert.equal(tollgate(app, run).compileCache, false, 'compiled run');
    assert.equal(tollgate(root, run).compileCache, true, 'checkout run');
    for (const args of [['version'], ['validate', 'policy-examples']])
      assert.equal(tollgate(app, args).compileCache, true, `compiled ${args[0]}`);
  });
});
