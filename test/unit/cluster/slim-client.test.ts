/**
 * tollgate's processes load only the Kubernetes API groups they call: the client library's
 * generated aggregates (every API group's Observable and Object classes, which import the
 * generated modules of all 65 API groups, 16 MB of source kept in the heap) are cut down at load to the
 * groups in `apiGroupsUsed` (src/cluster/slim-client.ts). Counted, not timed: which
 * generated API modules a real `bin/tollgate.js` process loads, how many bytes of the
 * library's source, and that a used group still answers over HTTP.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiGroupsUsed, slimGeneratedApis } from '../../../src/cluster/slim-client.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const generated = join(
  dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node')),
  'gen/types',
);

/** The module URLs a node process loads (a recording hook registered first, so it sees what later hooks let through), and what it printed. */
function loadedBy(args: readonly string[]): { urls: string[]; stdout: string; stderr: string } {
  const recorder = `data:text/javascript,${encodeURIComponent(
    `import { registerHooks } from 'node:module';
     import { writeSync } from 'node:fs';
     registerHooks({ load(url, context, next) { writeSync(2, 'LOADED ' + url + '\\n'); return next(url, context); } });`,
  )}`;
  const run = spawnSync(process.execPath, ['--import', recorder, ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const lines = run.stderr.split('\n');
  return {
    urls: lines.filter((l) => l.startsWith('LOADED ')).map((l) => l.slice('LOADED '.length)),
    stdout: run.stdout,
    stderr: lines.filter((l) => !l.startsWith('LOADED ')).join('\n'),
  };
}

/** `tollgate run` as the image starts it, up to its configuration check: every module of the command is loaded, nothing started. */
const tollgateRunArgs = [
  'bin/tollgate.js',
  'run',
  '--kubeconfig',
  '/nonexistent/kubeconfig',
  '--policy-dir',
  'policy-examples',
];

const generatedApiModule = /\/@kubernetes\/client-node\/dist\/gen\/apis\/(\w+)Api\.js$/;

function apiModulesOf(urls: readonly string[]): string[] {
  return urls.flatMap((url) => generatedApiModule.exec(url)?.[1] ?? []).sort();
}

/** Bytes of the client library's source handed to V8 when a process imports it, with or without the slim hook. */
function clientSourceBytes(slim: boolean): number {
  const script = `
    import { registerHooks } from 'node:module';
    ${slim ? `const { registerSlimClient } = await import(${JSON.stringify(join(root, 'src/cluster/slim-client.ts'))}); registerSlimClient();` : ''}
    let bytes = 0;
    registerHooks({ load(url, context, next) {
      const loaded = next(url, context);
      if (url.includes('/@kubernetes/client-node/') && loaded.source) bytes += loaded.source.length;
      return loaded;
    } });
    await import('@kubernetes/client-node');
    console.log(bytes);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(run.status, 0, run.stderr);
  return Number(run.stdout.trim());
}

/** The class names a generated aggregate exports. */
function exportedClasses(source: string): string[] {
  return [...source.matchAll(/^export class (\w+)/gm)].map((m) => m[1]!).sort();
}

describe('tollgate loads only the Kubernetes API groups it calls', () => {
  it('a tollgate process (bin/tollgate.js) loads the generated modules of the used groups only, not all 65', () => {
    const { urls, stderr } = loadedBy(tollgateRunArgs);
    assert.ok(
      urls.some((url) => url.endsWith('/@kubernetes/client-node/dist/index.js')),
      `the Kubernetes client was loaded\n${stderr}`,
    );
    assert.deepEqual(apiModulesOf(urls), [...apiGroupsUsed].sort());
  });

  it('the library source handed to V8 is under a third of what importing it whole hands', () => {
    const ratio = clientSourceBytes(true) / clientSourceBytes(false);
    assert.ok(ratio < 1 / 3, `client-node source loaded: ${ratio.toFixed(2)} of the whole`);
  });

  for (const { file, prefix } of [
    { file: 'ObservableAPI.js', prefix: 'Observable' },
    { file: 'ObjectParamAPI.js', prefix: 'Object' },
  ] as const) {
    it(`the slim ${file} exports every class the whole one does, importing only the used groups`, () => {
      const whole = readFileSync(join(generated, file), 'utf8');
      const slim = slimGeneratedApis(whole, prefix, apiGroupsUsed);
      assert.ok(slim !== undefined, `${file}: its layout was recognised`);
      assert.deepEqual(exportedClasses(slim), exportedClasses(whole));
      const groupImports = [...slim.matchAll(/^import \{[^}]*\} from "([^"]+)";$/gm)].length;
      assert.equal(groupImports, apiGroupsUsed.size);
      assert.ok(slim.length < whole.length / 3, `${file}: ${slim.length} of ${whole.length} bytes`);
    });
  }

  it('a source of another layout is left whole (undefined), never half cut', () => {
    for (const source of ['', 'export const x = 1;\n', 'export class ObservableCoreV1Api {}\n'])
      assert.equal(slimGeneratedApis(source, 'Observable', apiGroupsUsed), undefined);
  });

  it('a used group answers over HTTP and an unused one says why it cannot be built', () => {
    const script = `
      import http from 'node:http';
      const { KubeConfig, CoreV1Api, AppsV1Api } = await import('@kubernetes/client-node');
      const server = http.createServer((req, res) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '7' },
          items: [{ metadata: { name: 'p', namespace: 'ns', creationTimestamp: '2020-01-01T00:00:00Z' } }] }));
      });
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: 'http://127.0.0.1:' + server.address().port, skipTLSVerify: true }],
        users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
      const list = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'ns' });
      let unused = '';
      try { kc.makeApiClient(AppsV1Api); } catch (error) { unused = error.message; }
      server.close();
      console.log(JSON.stringify({ names: list.items.map((p) => p.metadata.name),
        created: list.items[0].metadata.creationTimestamp instanceof Date, unused }));`;
    const run = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { registerSlimClient } = await import(${JSON.stringify(join(root, 'src/cluster/slim-client.ts'))}); registerSlimClient(); ${script}`,
      ],
      { cwd: root, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(run.status, 0, run.stderr);
    const answer = JSON.parse(run.stdout) as { names: string[]; created: boolean; unused: string };
    assert.deepEqual(answer.names, ['p']);
    assert.equal(answer.created, true, 'the typed deserialiser still runs');
    assert.match(answer.unused, /AppsV1Api is not loaded.*slim-client/);
  });
});
