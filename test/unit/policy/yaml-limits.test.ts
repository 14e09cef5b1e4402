/**
 * YAML limits hold inside the parser, whatever the text does to look harmless: a quote
 * that a line scanner misreads, a block scalar, a comment, an explicit key. Work is
 * bounded by counts the parser reports (tokens read before the refusal) and, for the
 * time per byte, by a same-run baseline: the yaml library's own lexer over the same
 * bytes. No assertion here compares against an absolute wall time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Lexer } from 'yaml';
import { limits, parsePolicyFile } from '../../../src/policy/parse.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';

/** Text before the nesting that a line-by-line scanner could read as an open quote. */
const confusers = [
  '',
  'a: x "\n',
  "a: it's\n",
  'a: |\n  "open\n',
  '# "\n',
  "a: >-\n  don't\n",
  "a: 'x' '\n",
  'a: x`\n',
];

type Nesting = 'flow-seq' | 'flow-map' | 'compact-seq' | 'block-map' | 'explicit-key';

function nested(kind: Nesting, depth: number): string {
  switch (kind) {
    case 'flow-seq':
      return 'b: ' + '['.repeat(depth) + ']'.repeat(depth) + '\n';
    case 'flow-map':
      return 'b: ' + '{a: '.repeat(depth) + '1' + '}'.repeat(depth) + '\n';
    case 'compact-seq':
      return 'b:\n' + '- '.repeat(depth) + 'x\n';
    case 'block-map':
      return Array.from({ length: depth }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n') + ' 1\n';
    case 'explicit-key':
      return '? '.repeat(depth) + 'x\n';
  }
}

function cpuMicros(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

function lexOnly(text: string): void {
  let count = 0;
  for (const _ of new Lexer().lex(text)) count += 1;
  assert.ok(count >= 0);
}

test('a quote the old line scanner misread no longer hides 400k nested brackets', () => {
  const text = 'a: x "\nb: ' + '['.repeat(400_000) + ']'.repeat(400_000);
  const result = parsePolicyFile('evil.yaml', text);
  const printed = result.errors.map(formatPolicyError).join('\n');
  assert.match(printed, /^evil\.yaml: nesting is deeper than 64 levels \(line 2, column \d+\)/);
  assert.deepEqual(result.documents, []);
  // Refused after reading the first levels, not after unwinding a stack overflow.
  assert.ok(result.work.tokens < 200, `${result.work.tokens} tokens read`);
});

test('more tokens than a policy file needs are refused while lexing', () => {
  const text = 'a: [' + '1,'.repeat(limits.maxTokensPerFile) + '1]\n';
  const result = parsePolicyFile('wide.yaml', text);
  const printed = result.errors.map(formatPolicyError).join('\n');
  assert.match(printed, new RegExp(`more than ${limits.maxTokensPerFile} YAML tokens`));
  assert.equal(result.work.tokens, limits.maxTokensPerFile + 1);
});

test('a policy-sized file under every limit still parses', () => {
  const text = Array.from({ length: 200 }, (_, i) => `key${i}: {a: [1, 2, "x"], b: 'y'}`).join(
    '\n',
  );
  const result = parsePolicyFile('ok.yaml', text);
  assert.deepEqual(result.errors, []);
  assert.equal(result.documents.length, 1);
});

const hostile = fc
  .tuple(
    fc.constantFrom(...confusers),
    fc.constantFrom<Nesting>('flow-seq', 'flow-map', 'compact-seq', 'block-map', 'explicit-key'),
    fc.integer({ min: limits.maxNestingDepth + 1, max: 3_000 }),
    fc.constantFrom('', 'tail: 1\n', '---\nsecond: doc\n'),
  )
  .map(([prefix, kind, depth, suffix]) => prefix + nested(kind, depth) + suffix);

test('nesting past the limit is refused after a bounded number of tokens, however it is dressed', () => {
  let refusedForNesting = 0;
  fc.assert(
    fc.property(hostile, (text) => {
      const result = parsePolicyFile('evil.yaml', text);
      assert.deepEqual(result.documents, []);
      assert.ok(result.errors.length > 0, `accepted: ${text.slice(0, 80)}`);
      // Never more than one token per byte (plus the lexer's few markers) ...
      assert.ok(result.work.tokens <= text.length + 16, `${result.work.tokens} tokens`);
      // ... and when the parser nests (the text is well-formed up to the nesting), it
      // stops a few tokens per level past the limit, not at the end of the text.
      const printed = result.errors.map(formatPolicyError).join('\n');
      if (/nesting is deeper than 64 levels/.test(printed)) {
        refusedForNesting += 1;
        assert.ok(result.work.tokens <= 8 * (limits.maxNestingDepth + 16), `${result.work.tokens}`);
      }
    }),
    { numRuns: 300 },
  );
  // Most confusers leave the text well-formed, so the depth limit is what refuses it.
  assert.ok(refusedForNesting >= 150, `${refusedForNesting} of 300 refused for nesting`);
});

test('refusing hostile nesting costs no more CPU per byte than a few passes of the YAML lexer', () => {
  // Same run, same bytes: the parser's refusal against yaml's own lexer reading the
  // whole text. Summed over many inputs so a GC pause or a busy neighbour cannot
  // decide the outcome; the factor is generous.
  let refusing = 0;
  let lexing = 0;
  let bytes = 0;
  fc.assert(
    fc.property(hostile, (text) => {
      bytes += text.length;
      refusing += cpuMicros(() => parsePolicyFile('evil.yaml', text));
      lexing += cpuMicros(() => lexOnly(text));
    }),
    { numRuns: 200 },
  );
  assert.ok(
    refusing <= 4 * lexing,
    `refusal ${(refusing / bytes).toFixed(3)} µs/byte vs lexer ${(lexing / bytes).toFixed(3)} µs/byte`,
  );
});
