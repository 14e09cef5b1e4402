import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchTrail, seedTrail } from '../../../bench/audit-seed.ts';
import { commandLoaders, commandsToLoad } from '../../../src/cli/commands.ts';

const cli = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const examples = fileURLToPath(new URL('../../../policy-examples', import.meta.url));
const every = Object.keys(commandLoaders);

/** Module URLs a `tollgate` process loads for these arguments, from a module load hook. */
function modulesLoadedBy(args: string[]): string[] {
  const hook =
    'data:text/javascript,import{registerHooks}from"node:module";const seen=[];' +
    'registerHooks({load(u,c,n){seen.push(u);return n(u,c)}});' +
    'process.on("exit",()=>process.stderr.write("\\nLOADED "+JSON.stringify(seen)+"\\n"))';
  const { stderr } = spawnSync(process.execPath, ['--import', hook, cli, ...args], {
    encoding: 'utf8',
  });
  const line = stderr.split('\n').find((l) => l.startsWith('LOADED '));
  assert.ok(line, `no module list in: ${stderr}`);
  return JSON.parse(line.slice('LOADED '.length)) as string[];
}

describe('tollgate loads only the subcommand it runs', () => {
  const cases: { args: string[]; loads: string[] | 'every'; why: string }[] = [
    { args: ['validate', 'policy-examples'], loads: ['validate'], why: 'the named command' },
    { args: ['plan', '--help'], loads: ['plan'], why: "the command's own help" },
    { args: [], loads: 'every', why: 'no command: the help lists them all' },
    { args: ['--version'], loads: 'every', why: 'a root option first' },
    { args: ['--kubeconfig', 'k', 'plan'], loads: 'every', why: 'a root option with a value' },
    { args: ['help', 'plan'], loads: 'every', why: 'help describes the program' },
    { args: ['completion', 'bash'], loads: 'every', why: 'completion covers every command' },
    { args: ['valdiate'], loads: 'every', why: "a typo, for commander's suggestion" },
    { args: ['constructor'], loads: 'every', why: 'not an own key of the table' },
  ];
  for (const { args, loads, why } of cases) {
    it(`tollgate ${args.join(' ') || '(nothing)'} loads ${loads === 'every' ? 'every command' : loads.join(', ')}: ${why}`, () => {
      assert.deepEqual(commandsToLoad(args), loads === 'every' ? every : loads);
    });
  }

  it('validate loads neither the Kubernetes client nor the schema compiler', () => {
    const loaded = modulesLoadedBy(['validate', examples]);
    assert.ok(
      loaded.some((u) => u.endsWith('/src/cli/validate.ts')),
      'validate itself ran',
    );
    assert.ok(
      loaded.some((u) => u.endsWith('/src/policy/generated/validators.js')),
      'the generated validators were used',
    );
    assert.deepEqual(
      loaded.filter((u) => u.includes('/@kubernetes/client-node/')),
      [],
      'no module of @kubernetes/client-node',
    );
    assert.deepEqual(
      loaded.filter((u) => /\/ajv\/dist\/(compile|core|2020)\b/.test(u)),
      [],
      "no part of Ajv's schema compiler",
    );
  });

  it('audit verify of a trail alone loads no Kubernetes client (only --kubeconfig needs it)', async () => {
    const gitdir = mkdtempSync(join(tmpdir(), 'tollgate-verify-loads-'));
    await seedTrail({
      gitdir,
      branch: 'tollgate/audit',
      records: 40,
      start: Date.UTC(2026, 0, 1),
      ...benchTrail,
    });
    const loaded = modulesLoadedBy(['audit', 'verify', '--repo', gitdir]);
    assert.ok(
      loaded.some((u) => u.endsWith('/src/audit/verify.ts')),
      'verify itself ran',
    );
    assert.deepEqual(
      loaded.filter((u) => u.includes('/@kubernetes/client-node/')),
      [],
      'no module of @kubernetes/client-node',
    );
  });

  it('the whole program is still there for help and completion', () => {
    const help = execFileSync(process.execPath, [cli, '--help'], { encoding: 'utf8' });
    for (const name of every) assert.match(help, new RegExp(`\\n  ${name}\\b`), name);
    const bash = execFileSync(process.execPath, [cli, 'completion', 'bash'], {
      encoding: 'utf8',
    });
    for (const name of every) assert.ok(bash.includes(name), name);
  });
});
