/**
 * The conventions every `tollgate` subcommand shares (src/cli/output.ts, src/cli/cluster-options.ts), command by
 * command: `-o text|json|yaml` wherever there is output; `--kubeconfig`, `--context` and
 * $KUBECONFIG like kubectl on every command that reads a cluster; no cluster, a missing
 * file, an unknown context or an unreachable server each said plainly and at once (exit 2),
 * never the client library's fallback to http://localhost:8080 or a sync timeout.
 * Unreachable servers here are loopback ports nothing listens on.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { parse } from 'yaml';
import { registerCommands } from '../../../src/cli/commands.ts';
import { runExplain, type ExplainIo } from '../../../src/cli/explain.ts';
import { kubeconfigSource } from '../../../src/cluster/kubeconfig.ts';
import { formatOutput } from '../../../src/cli/output.ts';
import { runPlan, type PlanIo } from '../../../src/cli/plan.ts';
import { runQueue } from '../../../src/cli/queue.ts';

const cli = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const examples = fileURLToPath(new URL('../../../policy-examples', import.meta.url));
const home = mkdtempSync(join(tmpdir(), 'tollgate-conventions-home-'));

/** The whole program, every subcommand registered as src/cli/main.ts registers them. */
const whole = new Command();
await registerCommands(whole, []);

function command(path: string): Command {
  let found = whole;
  for (const name of path.split(' ')) {
    const next = found.commands.find((c) => c.name() === name);
    assert.ok(next, `tollgate ${path} exists`);
    found = next;
  }
  return found;
}

const option = (path: string, flag: string) =>
  command(path).options.find((o) => o.long === flag || o.short === flag);

describe('-o text|json|yaml wherever there is output', () => {
  const table: [string, string[]][] = [
    ['version', ['text', 'json', 'yaml']],
    ['validate', ['text', 'json', 'yaml']],
    ['plan', ['text', 'json', 'yaml', 'markdown']],
    ['explain', ['text', 'json', 'yaml']],
    ['queue', ['text', 'json', 'yaml']],
    ['audit log', ['text', 'json', 'yaml']],
    ['audit show', ['text', 'json', 'yaml']],
    ['audit verify', ['text', 'json', 'yaml']],
    ['admission-params', ['text', 'json', 'yaml']],
  ];
  for (const [path, formats] of table)
    it(`tollgate ${path} offers -o ${formats.join('|')}`, () => {
      const output = option(path, '-o');
      assert.equal(output?.long, '--output');
      assert.deepEqual(output?.argChoices, formats);
    });

  it('json and yaml carry the same object; text is the command’s own', () => {
    const value = { pods: [{ name: 'a', gates: ['x.tollgate.io/ready'] }], next: null };
    assert.deepEqual(JSON.parse(formatOutput('json', value, () => 'unused')), value);
    assert.deepEqual(parse(formatOutput('yaml', value, () => 'unused')), value);
    assert.equal(
      formatOutput('text', value, () => 'a table\n'),
      'a table\n',
    );
  });
});

describe('--kubeconfig and --context on every command that reads a cluster', () => {
  for (const path of ['run', 'plan', 'explain', 'queue', 'audit verify'])
    it(`tollgate ${path}`, () => {
      assert.ok(option(path, '--kubeconfig'), '--kubeconfig');
      assert.ok(option(path, '--context'), '--context');
    });
});

describe("the cluster is found in kubectl's order", () => {
  const token = '/var/run/secrets/kubernetes.io/serviceaccount/token';
  const table: {
    name: string;
    flags?: { kubeconfig?: string; context?: string };
    env?: NodeJS.ProcessEnv;
    files: string[];
    source: ReturnType<typeof kubeconfigSource>;
  }[] = [
    {
      name: '--kubeconfig wins over $KUBECONFIG',
      flags: { kubeconfig: '/a' },
      env: { KUBECONFIG: '/b', HOME: '/h' },
      files: ['/a', '/b'],
      source: { kind: 'files', files: ['/a'], origin: 'kubeconfig /a' },
    },
    {
      name: 'a --kubeconfig that does not exist is an error, not a fallback',
      flags: { kubeconfig: '/a' },
      env: { KUBECONFIG: '/b' },
      files: ['/b'],
      source: { kind: 'missing', reason: 'kubeconfig /a: file does not exist' },
    },
    {
      name: '$KUBECONFIG is a list: the files that exist are merged',
      env: { KUBECONFIG: '/a:/b:/c', HOME: '/h' },
      files: ['/a', '/c', '/h/.kube/config'],
      source: { kind: 'files', files: ['/a', '/c'], origin: 'KUBECONFIG=/a:/b:/c' },
    },
    {
      name: '$KUBECONFIG naming no file that exists is an error',
      env: { KUBECONFIG: '/a', HOME: '/h' },
      files: ['/h/.kube/config'],
      source: { kind: 'missing', reason: 'KUBECONFIG=/a: no such file' },
    },
    {
      name: '~/.kube/config before the service account',
      env: { HOME: '/h', KUBERNETES_SERVICE_HOST: '10.0.0.1' },
      files: ['/h/.kube/config', token],
      source: { kind: 'files', files: ['/h/.kube/config'], origin: 'kubeconfig /h/.kube/config' },
    },
    {
      name: 'in a pod, its service account',
      env: { HOME: '/h', KUBERNETES_SERVICE_HOST: '10.0.0.1' },
      files: [token],
      source: { kind: 'in-cluster' },
    },
    {
      name: 'a pod without a service account token has no cluster',
      env: { HOME: '/h', KUBERNETES_SERVICE_HOST: '10.0.0.1' },
      files: [],
      source: { kind: 'absent', podWithoutToken: true },
    },
    {
      name: 'nothing at all',
      env: { HOME: '/h' },
      files: [],
      source: { kind: 'absent', podWithoutToken: false },
    },
  ];
  for (const { name, flags, env, files, source } of table)
    it(name, () => {
      assert.deepEqual(
        kubeconfigSource(flags ?? {}, env ?? {}, (f) => files.includes(f)),
        source,
      );
    });
});

/** A loopback port nothing listens on (taken, then freed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
const port = await closedPort();

/** Two contexts, both on the closed port, and no current-context. */
const kubeconfig = join(mkdtempSync(join(tmpdir(), 'tollgate-conventions-kc-')), 'config');
writeFileSync(
  kubeconfig,
  [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{ name: nowhere, cluster: { server: "https://127.0.0.1:${port}" } }]`,
    'users: [{ name: u, user: { token: x } }]',
    'contexts:',
    '  - { name: first, context: { cluster: nowhere, user: u } }',
    '  - { name: second, context: { cluster: nowhere, user: u } }',
    '',
  ].join('\n'),
);

/** `tollgate ARGS` as a process: for audit verify, whose action is not exported. */
function tollgate(args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [cli, ...args],
      { env: { PATH: process.env.PATH, HOME: home, ...env }, encoding: 'utf8', timeout: 20_000 },
      (error, _stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stderr }),
    );
  });
}

type Flags = { kubeconfig?: string; context?: string };

/** Each command's own entry point, as its action calls it, with this environment. */
async function inProcess(
  run: (flags: Flags, io: PlanIo & ExplainIo) => Promise<number>,
  flags: Flags,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stderr: string }> {
  let stderr = '';
  const io = {
    stdout: () => {},
    stderr: (text: string) => void (stderr += text),
    env: { HOME: home, ...env },
    now: () => Date.UTC(2030, 0, 1),
  };
  return { code: await run(flags, io), stderr };
}

describe('a cluster that is not there is said plainly and at once, command by command', () => {
  const commands: [string, (flags: Flags, io: PlanIo & ExplainIo) => Promise<number>][] = [
    [
      'plan',
      (flags, io) =>
        runPlan(
          { policy: examples, base: examples, output: 'text', gitTokenEnv: 'T', ...flags },
          io,
        ),
    ],
    [
      'explain',
      (flags, io) => runExplain('batch/p', { policyDir: examples, output: 'text', ...flags }, io),
    ],
    [
      'queue',
      (flags, io) => runQueue({ policyDir: examples, output: 'text', limit: '50', ...flags }, io),
    ],
  ];
  const situations: { name: string; flags: Flags; env: NodeJS.ProcessEnv; says: RegExp }[] = [
    {
      name: 'no kubeconfig anywhere',
      flags: {},
      env: {},
      says: /no cluster .*: give --kubeconfig, set KUBECONFIG, or create ~\/\.kube\/config/,
    },
    {
      name: 'a pod without a service account token',
      flags: {},
      env: { KUBERNETES_SERVICE_HOST: '10.0.0.1' },
      says: /no cluster .*KUBERNETES_SERVICE_HOST is set, but .*token does not exist/,
    },
    {
      name: '$KUBECONFIG without a current-context, --context picking one',
      flags: { context: 'second' },
      env: { KUBECONFIG: kubeconfig },
      says: new RegExp(
        `cannot reach the cluster of context "second" at https://127\\.0\\.0\\.1:${port}`,
      ),
    },
    {
      name: 'an unknown --context',
      flags: { kubeconfig, context: 'third' },
      env: {},
      says: /context "third" is not in kubeconfig .* \(contexts: first, second\)/,
    },
    {
      name: 'a --kubeconfig that does not exist',
      flags: { kubeconfig: '/nonexistent/kubeconfig' },
      env: {},
      says: /kubeconfig \/nonexistent\/kubeconfig: file does not exist/,
    },
  ];
  for (const [name, run] of commands)
    for (const { name: situation, flags, env, says } of situations)
      it(`tollgate ${name}, ${situation}: exit 2 saying so`, async () => {
        const result = await inProcess(run, flags, env);
        assert.match(result.stderr, says);
        assert.equal(result.code, 2, result.stderr);
      });

  const asFlags = (flags: Flags): string[] =>
    Object.entries(flags).flatMap(([flag, value]) => [`--${flag}`, value]);
  for (const { name: situation, flags, env, says } of situations.filter(
    (s) => Object.keys(s.flags).length > 0,
  ))
    it(`tollgate audit verify (a cluster only when given one), ${situation}: exit 2 saying so`, async () => {
      const result = await tollgate(['audit', 'verify', '--repo', home, ...asFlags(flags)], env);
      assert.match(result.stderr, says);
      assert.equal(result.code, 2, result.stderr);
    });
});
