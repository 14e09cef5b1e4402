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
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  apiGroupsUsed,
  modelsReached,
  operationsUsed,
  slimGeneratedApis,
  slimModelIndex,
  slimObjectSerializer,
  withOperations,
  withoutDocComments,
} from '../../../src/cluster/slim-client.ts';
import { benchPolicyFiles } from '../../../bench/lib.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const generated = join(
  dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node')),
  'gen/types',
);

/** A node process with these arguments, `module` (a data: URL) imported before anything else. */
function runWithImport(
  module: string,
  args: readonly string[],
): { stdout: string; stderr: string } {
  return spawnSync(process.execPath, ['--import', module, ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
}

/** The module URLs a node process loads (a recording hook registered first, so it sees what later hooks let through), and what it printed. */
function loadedBy(args: readonly string[]): { urls: string[]; stdout: string; stderr: string } {
  const recorder = `data:text/javascript,${encodeURIComponent(
    `import { registerHooks } from 'node:module';
     import { writeSync } from 'node:fs';
     registerHooks({ load(url, context, next) { writeSync(2, 'LOADED ' + url + '\\n'); return next(url, context); } });`,
  )}`;
  const run = runWithImport(recorder, args);
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

const generatedModel = /\/@kubernetes\/client-node\/dist\/gen\/models\/(\w+)\.js$/;

/** The generated model modules among `urls` (the two aggregates, all.js and ObjectSerializer.js, left out). */
function modelModulesOf(urls: readonly string[]): string[] {
  return urls
    .flatMap((url) => generatedModel.exec(url)?.[1] ?? [])
    .filter((name) => name !== 'all' && name !== 'ObjectSerializer')
    .sort();
}

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

/** The slim client registered, as bin/tollgate.js registers it first. */
const registerSlim = `const { registerSlimClient } = await import(${JSON.stringify(join(root, 'src/cluster/slim-client.ts'))}); registerSlimClient();`;

/** Runs `script` as an ES module in a node process, the slim client registered first unless `slim` is false; what it printed. */
function runModule(script: string, slim = true): string {
  const run = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `${slim ? registerSlim : ''} ${script}`],
    { cwd: root, encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(run.status, 0, run.stderr);
  return run.stdout;
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

  it('the library source handed to V8 is under a seventh of what importing it whole hands (unused groups cut, documentation blanked)', () => {
    const ratio = clientSourceBytes(true) / clientSourceBytes(false);
    assert.ok(ratio < 1 / 7, `client-node source loaded: ${ratio.toFixed(3)} of the whole`);
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

  it("a tollgate process loads the models its used groups reach, not all of the library's", () => {
    const { urls, stderr } = loadedBy(tollgateRunArgs);
    const loaded = modelModulesOf(urls);
    const reached = modelsReached(join(generated, '..'), apiGroupsUsed, operationsUsed);
    assert.ok(reached !== undefined, 'the generated layout was recognised');
    assert.deepEqual(loaded, [...reached].sort(), stderr);
    const all = readFileSync(join(generated, '../models/all.js'), 'utf8');
    const every = [...all.matchAll(/^export \* from '\.\.\/models\/(\w+)\.js';$/gm)].length;
    assert.ok(
      loaded.length < every / 2,
      `${loaded.length} of the library's ${every} models loaded`,
    );
  });

  it("the models reached hold none of the library's sources they were read from (a name cut from a file would keep the whole file alive)", () => {
    const script = `
      const { modelsReached, apiGroupsUsed } = await import(${JSON.stringify(join(root, 'src/cluster/slim-client.ts'))});
      const dir = ${JSON.stringify(join(generated, '..'))};
      const rounds = 8;
      modelsReached(dir, apiGroupsUsed);
      globalThis.gc();
      const before = process.memoryUsage().heapUsed;
      const kept = [];
      for (let i = 0; i < rounds; i++) kept.push(modelsReached(dir, apiGroupsUsed));
      globalThis.gc();
      const held = Math.round((process.memoryUsage().heapUsed - before) / rounds);
      const reached = kept[0];
      console.log(JSON.stringify({ held, names: reached.size, chars: [...reached].join('').length }));`;
    const run = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(run.status, 0, run.stderr);
    const answer = JSON.parse(run.stdout) as { held: number; names: number; chars: number };
    assert.ok(answer.names > 100, `${answer.names} models reached`);
    // Eight sets are kept and their heap divided by eight: one measurement moves by a few
    // hundred KB with the collector's timing either way, which could hide a leak or invent
    // one; eight leaking sets would hold 1.5 MB each. The names and their set take a few
    // tens of KB; CoreV1Api.js alone is 1.5 MB.
    assert.ok(
      answer.held < 256 * 1024,
      `${answer.names} model names (${answer.chars} characters) hold ${answer.held} bytes of heap per set`,
    );
  });

  it('every model a loaded model names in its attributes is loaded too, checked on the classes themselves', () => {
    const script = `
      const client = await import('@kubernetes/client-node');
      const model = (c) => typeof c === 'function' && typeof c.getAttributeTypeMap === 'function';
      const unloaded = (c) => typeof c === 'function' && Function.prototype.toString.call(c).includes('is not loaded');
      const missing = [];
      let kept = 0;
      for (const [name, value] of Object.entries(client)) {
        if (!model(value)) continue;
        kept += 1;
        for (const attribute of value.getAttributeTypeMap())
          for (const word of attribute.type.match(/[A-Za-z0-9]+/g) ?? [])
            if (unloaded(client[word])) missing.push(name + '.' + attribute.name + ': ' + word);
      }
      console.log(JSON.stringify({ kept, missing }));`;
    const answer = JSON.parse(runModule(script)) as { kept: number; missing: string[] };
    assert.ok(answer.kept > 100, `${answer.kept} models kept`);
    assert.deepEqual(answer.missing, []);
  });

  it('a pod, a lease and an event read through the slim client come out exactly as through the whole one', () => {
    const script = `
      import('node:http').then(async ({ default: http }) => {
        const { KubeConfig, CoreV1Api, CoordinationV1Api, EventsV1Api } = await import('@kubernetes/client-node');
        const at = '2020-01-01T00:00:00Z';
        const bodies = {
          '/api/v1/namespaces/ns/pods/p': { apiVersion: 'v1', kind: 'Pod',
            metadata: { name: 'p', namespace: 'ns', creationTimestamp: at, labels: { a: 'b' },
              ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: 'u', controller: true }] },
            spec: { schedulingGates: [{ name: 'tollgate.io/x' }], nodeName: 'n',
              containers: [{ name: 'c', image: 'i', resources: { requests: { cpu: '1', memory: '1Gi' } },
                resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }] }],
              initContainers: [{ name: 'i', image: 'i', restartPolicy: 'Always' }],
              affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'In', values: ['v'] }] }] } } },
              tolerations: [{ key: 'k', operator: 'Exists' }], volumes: [{ name: 'v', emptyDir: {} }] },
            status: { phase: 'Running', conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: at }],
              containerStatuses: [{ name: 'c', ready: true, restartCount: 0, image: 'i', imageID: 'x',
                state: { running: { startedAt: at } }, allocatedResources: { cpu: '1' } }] } },
          '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l': { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease',
            metadata: { name: 'l', namespace: 'ns' }, spec: { holderIdentity: 'h', leaseDurationSeconds: 15, renewTime: '2020-01-01T00:00:00.000000Z', leaseTransitions: 2 } },
          '/apis/events.k8s.io/v1/namespaces/ns/events/e': { apiVersion: 'events.k8s.io/v1', kind: 'Event',
            metadata: { name: 'e', namespace: 'ns' }, eventTime: '2020-01-01T00:00:00.000000Z', reason: 'R', action: 'A',
            regarding: { kind: 'Pod', name: 'p', namespace: 'ns' }, series: { count: 2, lastObservedTime: '2020-01-01T00:00:00.000000Z' } },
        };
        const server = http.createServer((req, res) => {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(bodies[req.url.split('?')[0]] ?? {}));
        });
        await new Promise((r) => server.listen(0, '127.0.0.1', r));
        const kc = new KubeConfig();
        kc.loadFromOptions({
          clusters: [{ name: 'c', server: 'http://127.0.0.1:' + server.address().port, skipTLSVerify: true }],
          users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
        const read = [
          await kc.makeApiClient(CoreV1Api).readNamespacedPod({ name: 'p', namespace: 'ns' }),
          await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'l', namespace: 'ns' }),
          await kc.makeApiClient(EventsV1Api).readNamespacedEvent({ name: 'e', namespace: 'ns' }),
        ];
        server.close();
        // Each value with what it is: a class instance's constructor, a Date's time.
        const shape = (v) => v instanceof Date ? ['Date', v.getTime()]
          : Array.isArray(v) ? v.map(shape)
          : v !== null && typeof v === 'object' ? [v.constructor.name, Object.entries(v).map(([k, x]) => [k, shape(x)])]
          : v;
        console.log(JSON.stringify(read.map(shape)));
      });`;
    const outputs = [true, false].map((slim) => runModule(script, slim));
    assert.match(outputs[1]!, /"V1Pod".*"V1PodSpec".*"V1Container".*"Date"/);
    assert.equal(outputs[0], outputs[1]);
  });

  it('the slim model index exports every model the whole one does; those not reached say why they cannot be built', () => {
    const whole = readFileSync(join(generated, '../models/all.js'), 'utf8');
    const reached = modelsReached(join(generated, '..'), apiGroupsUsed, operationsUsed)!;
    const slim = slimModelIndex(whole, reached);
    assert.ok(slim !== undefined, 'all.js: its layout was recognised');
    const names = (source: string) =>
      [
        ...source.matchAll(/^export \* from '\.\.\/models\/(\w+)\.js';$|^export class (\w+) /gm),
      ].map((m) => (m[1] ?? m[2])!);
    assert.deepEqual(names(slim).sort(), names(whole).sort());
    assert.equal(
      [...slim.matchAll(/^export \* from /gm)].length,
      reached.size,
      'only the reached models are imported',
    );
    const built = runModule(
      `const { V1Deployment } = await import('@kubernetes/client-node');
       try { new V1Deployment(); console.log('built'); } catch (error) { console.log(error.message); }`,
    );
    assert.match(built, /V1Deployment is not loaded.*slim-client/);
  });

  it('a model index or serializer of another layout, or one that names a dropped model elsewhere, is left whole (undefined)', () => {
    const reached = new Set(['V1Pod']);
    for (const source of ['', 'export const x = 1;\n'])
      assert.equal(slimModelIndex(source, reached), undefined);
    const serializer = [
      "export * from '../models/V1Pod.js';",
      "export * from '../models/V1Node.js';",
      "import { V1Pod } from '../models/V1Pod.js';",
      "import { V1Node } from '../models/V1Node.js';",
      'let typeMap = {',
      '    "V1Pod": V1Pod,',
      '    "V1Node": V1Node,',
      '};',
    ];
    const slim = slimObjectSerializer(serializer.join('\n'), reached);
    assert.ok(slim !== undefined);
    assert.doesNotMatch(slim, /V1Node/);
    assert.match(slim, /"V1Pod": V1Pod,/);
    const named = [...serializer, 'const fallback = V1Node;'].join('\n');
    assert.equal(slimObjectSerializer(named, reached), undefined);
    assert.equal(
      slimObjectSerializer(serializer.join('\n'), new Set(['V1Pod', 'V1Lease'])),
      undefined,
    );
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
      const core = kc.makeApiClient(CoreV1Api);
      const list = await core.listPodForAllNamespaces();
      let unused = '';
      try { kc.makeApiClient(AppsV1Api); } catch (error) { unused = error.message; }
      server.close();
      console.log(JSON.stringify({ names: list.items.map((p) => p.metadata.name),
        created: list.items[0].metadata.creationTimestamp instanceof Date, unused,
        cutOperation: typeof core.listNamespacedService }));`;
    const answer = JSON.parse(runModule(script)) as {
      names: string[];
      created: boolean;
      unused: string;
      cutOperation: string;
    };
    assert.deepEqual(answer.names, ['p']);
    assert.equal(answer.created, true, 'the typed deserialiser still runs');
    assert.match(answer.unused, /AppsV1Api is not loaded.*slim-client/);
    assert.equal(answer.cutOperation, 'undefined', 'an operation tollgate does not call is cut');
  });
});

describe('the generated modules reach V8 without their documentation comments', () => {
  const cases = [
    {
      why: 'a block on lines of its own is blanked, its lines kept',
      source: 'a();\n/**\n * doc\n */\nb();',
      expected: 'a();\n\n\n\nb();',
    },
    {
      why: 'a one-line block, indented, is blanked',
      source: 'class A {\n    /** doc */\n    m() {}\n}',
      expected: 'class A {\n\n    m() {}\n}',
    },
    {
      why: 'an empty block is blanked',
      source: '/**/\nx();',
      expected: '\nx();',
    },
    {
      why: 'a plain comment and code with a comment after it are kept',
      source: '/* keep */\nx(); /** after code */\n// line',
      expected: '/* keep */\nx(); /** after code */\n// line',
    },
    {
      why: 'a block closing before the end of its line: left whole',
      source: '/** doc */ x();\n',
      expected: undefined,
    },
    {
      why: 'a block that never closes: left whole',
      source: 'a();\n/**\n * doc\n',
      expected: undefined,
    },
    {
      why: 'a file with a template literal (a `/**` line could be inside one): left whole',
      source: 'const t = `\n/**\n`;\n/** doc */\n',
      expected: undefined,
    },
  ];
  for (const c of cases)
    it(c.why, () => {
      assert.equal(withoutDocComments(c.source), c.expected);
    });

  it('CoreV1Api.js keeps every line of code and its line count (stack traces point where they did), at under two-thirds of its bytes', () => {
    const whole = readFileSync(join(generated, '../apis/CoreV1Api.js'), 'utf8');
    const bare = withoutDocComments(whole);
    assert.ok(bare !== undefined, 'its layout was recognised');
    const wholeLines = whole.split('\n');
    const bareLines = bare.split('\n');
    assert.equal(bareLines.length, wholeLines.length);
    const changed = bareLines.filter((line, i) => line !== wholeLines[i]);
    assert.ok(
      changed.every((line) => line === ''),
      'only lines blanked',
    );
    assert.ok(
      bare.length < (whole.length * 2) / 3,
      `CoreV1Api.js: ${bare.length} of ${whole.length} bytes`,
    );
  });
});

/** Whether a node process with these arguments loaded Node's own fetch (its bundled undici), read as it exits. */
function loadsNodesFetch(args: readonly string[]): { loaded: boolean; stderr: string } {
  const probe = `data:text/javascript,${encodeURIComponent(
    `import { writeSync } from 'node:fs';
     process.on('exit', () => writeSync(2, 'NODE-FETCH ' + process.moduleLoadList.some((m) => m.includes('internal/deps/undici/undici')) + '\\n'));`,
  )}`;
  const run = runWithImport(probe, args);
  const line = run.stderr.split('\n').find((l) => l.startsWith('NODE-FETCH '));
  assert.ok(line, `the process reported what it loaded\n${run.stderr}`);
  return { loaded: line === 'NODE-FETCH true', stderr: run.stderr };
}

describe("Node's own fetch stays unloaded: node:http imported as an ES module without its web classes", () => {
  it('a `tollgate run` process (bin/tollgate.js) never loads it (three-quarters of a megabyte of source kept in the heap)', () => {
    const { loaded, stderr } = loadsNodesFetch(tollgateRunArgs);
    assert.equal(loaded, false, stderr);
  });

  it('an ES module importing node:http without the hook loads it (the cost the hook avoids)', () => {
    const { loaded } = loadsNodesFetch(['--input-type=module', '-e', "import 'node:http';"]);
    assert.equal(loaded, true);
  });

  it('through the hook, node:http is the same module: its default export is what require gives, and every named export but the web classes is there', () => {
    const out = runModule(`
      import { createRequire } from 'node:module';
      const http = await import('node:http');
      const whole = createRequire(import.meta.url)('node:http');
      const web = ['WebSocket', 'CloseEvent', 'MessageEvent'];
      const missing = Object.keys(whole).filter((k) => !web.includes(k) && !(k in http));
      const differ = Object.keys(whole).filter((k) => !web.includes(k) && typeof whole[k] === 'function' && http[k] !== whole[k]);
      console.log(JSON.stringify({ same: http.default === whole, missing, differ, web: web.filter((k) => k in http) }));`);
    assert.deepEqual(JSON.parse(out), { same: true, missing: [], differ: [], web: [] });
  });
});

describe('a library tollgate needs only for some policies is loaded when one needs it', () => {
  it('a tollgate process loads the PromQL grammar only when a policy has a query to read (0.4 MB of source otherwise kept for nothing)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-no-query-'));
    const files = benchPolicyFiles({
      namespaces: ['batch'],
      pods: 10,
      gate: 'bench.tollgate.io/ready',
      gatePolicy: 'bench-ready',
      conditions: [{ type: 'Budget' }],
      budgetPods: 0,
    });
    for (const [name, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), text);
    }
    const { urls, stdout, stderr } = loadedBy(['bin/tollgate.js', 'validate', dir]);
    assert.match(stdout + stderr, /valid/i, `the policy was read and checked\n${stdout}${stderr}`);
    assert.ok(
      urls.some((url) => url.includes('/src/policy/compile.')),
      `the policy compiler was loaded\n${stderr}`,
    );
    assert.deepEqual(
      urls.filter((url) => /\/@(lezer|prometheus-io)\//.test(url)),
      [],
    );
  });
});

/** The generated module of a group (its request factory and response processor). */
const groupModule = (group: string) => join(generated, '..', 'apis', `${group}Api.js`);

/** The method names of each class of `source`, in order. */
function methodsByClass(source: string): string[][] {
  return source
    .split(/^export class /m)
    .slice(1)
    .map((part) => [...part.matchAll(/^ {4}(?:async )?(\w+)\(/gm)].map((m) => m[1]!));
}

describe('a used group keeps only the operations tollgate calls', () => {
  const factory = (ops: readonly string[]) =>
    [
      "import { x } from './x.js';",
      'export class GroupApiRequestFactory extends Base {',
      ...ops.flatMap((op) => [
        '    /**',
        `     * ${op} the thing`,
        '     */',
        `    async ${op}(name, _options) {`,
        `        return call('${op}', name);`,
        '    }',
      ]),
      '}',
      'export class GroupApiResponseProcessor {',
      '    constructor() {',
      '        this.ready = true;',
      '    }',
      ...ops.flatMap((op) => [
        `    async ${op}WithHttpInfo(response) {`,
        '        return 1;',
        '    }',
      ]),
      '}',
      '',
    ].join('\n');

  it('keeps the constructor, each kept operation and its ...WithHttpInfo with their comments; cuts the rest, comment and all', () => {
    const slim = withOperations(
      factory(['readThing', 'listThing', 'deleteThing']),
      new Set(['readThing']),
    );
    assert.ok(slim !== undefined);
    assert.deepEqual(methodsByClass(slim), [
      ['readThing'],
      ['constructor', 'readThingWithHttpInfo'],
    ]);
    assert.match(slim, /\* readThing the thing/);
    assert.doesNotMatch(slim, /listThing|deleteThing/);
    assert.match(slim, /^import \{ x \} from '\.\/x\.js';$/m);
    const whole = factory(['readThing', 'listThing', 'deleteThing']).split('\n');
    assert.equal(slim.split('\n').length, whole.length, 'every cut line left empty');
    const at = whole.indexOf('    async readThing(name, _options) {');
    assert.equal(slim.split('\n')[at], whole[at], 'a kept method stays on its own line');
  });

  for (const c of [
    { why: 'a class lacking a kept operation', source: factory(['listThing']) },
    {
      why: 'a class member not laid out as generated (a field)',
      source: factory(['readThing']).replace(
        '    constructor() {',
        '    static field = 1;\n    constructor() {',
      ),
    },
    { why: 'a class never closed', source: factory(['readThing']).trimEnd().slice(0, -1) },
    {
      why: 'a documentation comment never closed before the class ends',
      source: factory(['readThing']).replace(/\n}\n$/, '\n    /**\n}\n'),
    },
  ])
    it(`leaves ${c.why} whole (undefined), never half cut`, () => {
      assert.equal(withOperations(c.source, new Set(['readThing'])), undefined);
    });

  it("recognises the library's layout: each used group's module and its sections of both aggregates are cut to the listed operations", () => {
    for (const [group, ops] of operationsUsed) {
      const whole = readFileSync(groupModule(group), 'utf8');
      const slim = withOperations(whole, ops);
      assert.ok(slim !== undefined, `${group}Api.js: its layout was recognised`);
      const expected = [...ops].sort();
      const [factoryMethods, processorMethods] = methodsByClass(slim);
      assert.deepEqual([...factoryMethods!].sort(), expected, `${group}: request factory`);
      assert.deepEqual(
        processorMethods!.map((m) => m.replace(/WithHttpInfo$/, '')).sort(),
        expected,
        `${group}: response processor`,
      );
    }
    for (const { file, prefix } of [
      { file: 'ObservableAPI.js', prefix: 'Observable' },
      { file: 'ObjectParamAPI.js', prefix: 'Object' },
    ] as const) {
      const whole = readFileSync(join(generated, file), 'utf8');
      const slim = slimGeneratedApis(whole, prefix, apiGroupsUsed, operationsUsed);
      assert.ok(slim !== undefined, `${file}: its layout was recognised`);
      for (const [group, ops] of operationsUsed) {
        const section: string = slim.slice(slim.indexOf(`export class ${prefix}${group}Api {`));
        const methods: string[] = methodsByClass(section)[0]!;
        const expected = ['constructor', ...[...ops].flatMap((op) => [`${op}WithHttpInfo`, op])];
        assert.deepEqual([...methods].sort(), expected.sort(), `${file}: ${group}`);
      }
    }
  });

  it("every operation of a used group that tollgate's source calls is kept (a call of a cut one would find no method)", () => {
    const operationsOf = (group: string) =>
      new Set(
        [...readFileSync(groupModule(group), 'utf8').matchAll(/^ {4}async (\w+)\(/gm)]
          .map((m) => m[1]!)
          .filter((name) => !name.endsWith('WithHttpInfo')),
      );
    const sources = readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => readFileSync(join(e.parentPath, e.name), 'utf8'))
      .join('\n');
    const called = new Set([...sources.matchAll(/\.(\w+?)(?:WithHttpInfo)?\(/g)].map((m) => m[1]!));
    const missing: string[] = [];
    for (const group of apiGroupsUsed)
      for (const op of operationsOf(group))
        if (called.has(op) && !operationsUsed.get(group)?.has(op)) missing.push(`${group}: ${op}`);
    assert.deepEqual(missing, [], 'add them to operationsUsed in src/cluster/slim-client.ts');
  });
});
