/**
 * Wall time of `tollgate validate policy-examples` (bin/tollgate.js, as installed), the command an editor's save hook and a
 * pre-commit hook run, beside Node's own start (`node -e 0`) measured in the same run.
 *
 *   node bench/validate.ts [--repeat 15]
 *
 * Runs the two commands alternately, `--repeat` times each, and reports the median and
 * range of each and tollgate's share over Node's start (validate minus `node -e 0`).
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from './lib.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { repeat: { type: 'string', default: '15' } } });
const repeats = Number(values.repeat);
if (!Number.isInteger(repeats) || repeats < 1) throw new Error('--repeat: not a positive integer');

function wallMs(args: string[]): number {
  const start = performance.now();
  execFileSync(process.execPath, args, { cwd: root, stdio: 'ignore' });
  return performance.now() - start;
}

const node: number[] = [];
const validate: number[] = [];
for (let i = 0; i < repeats; i++) {
  node.push(wallMs(['-e', '0']));
  validate.push(wallMs([join(root, 'bin/tollgate.js'), 'validate', 'policy-examples']));
}
const range = (xs: number[]): string =>
  `${median(xs).toFixed(0)} ms [${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)}]`;
const result = {
  machine: { cpus: cpus().length, load: loadavg().map((l) => Number(l.toFixed(2))) },
  repeats,
  nodeStartMs: median(node),
  validateMs: median(validate),
  tollgateShareMs: median(validate) - median(node),
};
console.log(`node -e 0                         ${range(node)}`);
console.log(`tollgate validate policy-examples ${range(validate)}`);
console.log(JSON.stringify(result));
