/**
 * How much the policy parser's guards save on hostile YAML, as ratios in one run (the
 * unit tests in test/unit/policy/malicious-yaml.test.ts prove each input is refused by
 * its guard; how fast is measured here, not asserted on wall time in a test).
 *
 *   node bench/hostile-yaml.ts [--repeat 5]
 *
 * Per input: the median time of `parsePolicyFile` (size cap, nesting pre-scan, alias
 * limit) against the `yaml` library parsing and converting the same text with its
 * defaults (no pre-scan, no size cap), and the ratio unguarded / guarded. Run on a quiet
 * machine (`uptime`); the load average is printed with the results.
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { parsePolicyFile } from '../src/policy/parse.ts';
import { median } from './lib.ts';

const { values } = parseArgs({ options: { repeat: { type: 'string', default: '5' } } });
const repeats = Number(values.repeat);
if (!Number.isInteger(repeats) || repeats < 1) throw new Error('--repeat: not a positive integer');

const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
for (const [i, name] of [...'bcdefgh'].entries())
  laughs.push(`${name}: &${name} [${Array(9).fill(`*${'abcdefgh'[i]}`).join(',')}]`);
laughs.push(`i: [${Array(9).fill('*h').join(',')}]`);

const inputs: Record<string, string> = {
  'billion laughs': laughs.join('\n'),
  '100k nested flow sequences': '['.repeat(100_000) + ']'.repeat(100_000),
  '100k nested flow mappings': 'a: ' + '{a: '.repeat(100_000) + '1' + '}'.repeat(100_000),
  '100k compact block sequences': '- '.repeat(100_000) + 'x',
  '20 MB scalar': `a: "${'x'.repeat(20 * 1024 * 1024)}"`,
};

function timeMs(work: () => void): number {
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    work();
    times.push(performance.now() - started);
  }
  return median(times);
}

function unguarded(text: string): void {
  try {
    const docs = parseAllDocuments(text);
    if (Array.isArray(docs)) for (const doc of docs) doc.toJS();
  } catch {
    // refused or overflowed: the time until then is what counts
  }
}

console.log(
  `# hostile YAML, ${repeats} repeats, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
for (const [name, text] of Object.entries(inputs)) {
  const guarded = timeMs(() => parsePolicyFile('evil.yaml', text));
  const plain = timeMs(() => unguarded(text));
  console.log(
    `${name.padEnd(30)} guarded ${guarded.toFixed(1).padStart(8)} ms  unguarded ${plain.toFixed(1).padStart(8)} ms  ratio ${(plain / guarded).toFixed(1)}x`,
  );
}
