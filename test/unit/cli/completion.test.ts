import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const script = (shell: string): string =>
  execFileSync(process.execPath, [cli, 'completion', shell], { encoding: 'utf8' });

/** What bash's completion offers for the words typed so far (the last one is completed). */
function bashCompletes(words: string[]): string[] {
  const file = join(mkdtempSync(join(tmpdir(), 'tollgate-completion-')), 'tollgate.bash');
  writeFileSync(file, script('bash'));
  const out = execFileSync(
    'bash',
    [
      '-c',
      `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _tollgate; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter((line) => line !== '');
}

describe('tollgate completion', () => {
  it('bash completes subcommands from the program itself', () => {
    assert.deepEqual(bashCompletes(['tollgate', 'v']), ['validate', 'version']);
    assert.deepEqual(bashCompletes(['tollgate', 'admission']), ['admission-params']);
  });

  it("bash completes a subcommand's own options", () => {
    assert.deepEqual(bashCompletes(['tollgate', 'admission-params', '--gov']), [
      '--governed-domain',
    ]);
    assert.deepEqual(bashCompletes(['tollgate', 'version', '--o']), ['--output']);
  });

  it('zsh and fish scripts name every subcommand; another shell is refused', () => {
    assert.match(script('zsh'), /bashcompinit/);
    assert.match(
      script('fish'),
      /complete -c tollgate -n __fish_use_subcommand -a admission-params/,
    );
    assert.throws(() => script('tcsh'), /shell must be bash, zsh or fish, got "tcsh"/);
  });
});
