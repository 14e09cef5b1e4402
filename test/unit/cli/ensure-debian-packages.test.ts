/**
 * scripts/ensure-debian-packages.sh, as .ci/run and `npm run demo` call it. Only the
 * paths that install nothing run here: everything present (silent, exit 0), a bad
 * argument (exit 2), and a missing package for a user who may not install (exit 1 with
 * the exact apt-get command; as root the test drops to `nobody`, and is skipped when it
 * cannot, since root would really run apt-get).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const script = join(
  resolve(dirname(fileURLToPath(import.meta.url)), '../../..'),
  'scripts/ensure-debian-packages.sh',
);
const run = (args: string[], asNobody = false) => {
  const [command, argv] = asNobody
    ? ['setpriv', ['--reuid=nobody', '--regid=nogroup', '--clear-groups', 'bash', script, ...args]]
    : ['bash', [script, ...args]];
  const result = spawnSync(command as string, argv as string[], { encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
};
const isRoot = process.getuid?.() === 0;
const canDrop = isRoot && spawnSync('setpriv', ['--version']).status === 0;
const hasSudo = !isRoot && spawnSync('sudo', ['-n', 'true']).status === 0;
const hasApt = spawnSync('bash', ['-c', 'command -v apt-get']).status === 0;

describe('ensure-debian-packages.sh', () => {
  it('does nothing and says nothing when every probe is present', () => {
    const { code, stdout, stderr } = run(['bash=bash', '/bin/sh=dash']);
    assert.equal(code, 0, stderr);
    assert.equal(stdout + stderr, '');
  });

  it('refuses an argument that is not PROBE=PACKAGE, naming it', () => {
    const { code, stderr } = run(['prometheus']);
    assert.equal(code, 2);
    assert.match(stderr, /"prometheus" is not PROBE=PACKAGE/);
  });

  it(
    'without root or sudo, fails with the exact install command, each package once',
    {
      skip:
        isRoot && !canDrop
          ? 'root without setpriv would really run apt-get'
          : hasSudo
            ? 'passwordless sudo would really run apt-get'
            : !hasApt
              ? 'not a Debian-based system'
              : false,
    },
    () => {
      const { code, stdout, stderr } = run(
        ['--label', 'demo', 'no-such-tool-x=prometheus', '/no/such/file=git', 'no-such-y=git'],
        isRoot,
      );
      assert.equal(code, 1, stdout + stderr);
      assert.match(stderr, /^demo: missing Debian packages: prometheus git\./m);
      assert.match(stderr, /sudo apt-get update && sudo apt-get install -y prometheus git$/m);
    },
  );
});
