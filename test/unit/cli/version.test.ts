import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { formatVersion } from '../../../src/cli/version.ts';
import { buildInfo } from '../../../src/observe/build-info.ts';

const cli = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const info = { version: '1.2.3', revision: 'abc123', node: 'v24.0.0' };

describe('tollgate version', () => {
  it('prints text, json and yaml that say the same', () => {
    assert.equal(formatVersion(info, 'text'), 'tollgate 1.2.3 (revision abc123, node v24.0.0)\n');
    assert.deepEqual(JSON.parse(formatVersion(info, 'json')), info);
    assert.deepEqual(parse(formatVersion(info, 'yaml')), info);
    assert.throws(() => formatVersion(info, 'xml'), /-o must be text, json or yaml, got "xml"/);
  });

  it('reports the package version and the running Node.js, as a process', () => {
    const out = execFileSync(process.execPath, [cli, 'version', '-o', 'json'], {
      encoding: 'utf8',
    });
    assert.deepEqual(JSON.parse(out), buildInfo());
    assert.equal(buildInfo().node, process.version);
    assert.match(buildInfo().version, /^\d+\.\d+\.\d+/);
  });
});
