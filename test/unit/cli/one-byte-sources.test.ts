/**
 * Module sources reach V8 in one byte a character (src/cli/one-byte-sources.ts): every
 * character above U+00FF written as its escape, meaning the same wherever it stands; a
 * text it cannot be sure of left whole. Checked on what the code means (each case
 * evaluated before and after) and on a process that loads what `tollgate run` loads.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
import { latin1Source } from '../../../src/cli/one-byte-sources.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** An expression whose value must be the same before and after, and what it is. */
interface Case {
  readonly why: string;
  readonly source: string;
  readonly value: unknown;
}

const sameMeaning: Case[] = [
  { why: 'a string literal in single quotes', source: "'a→b'", value: 'a→b' },
  { why: 'a string literal in double quotes', source: '"’twas"', value: '’twas' },
  { why: "a template literal's value", source: '`${1}—${2}`', value: '1—2' },
  {
    why: 'a regular expression, its class and range',
    source: "[/[一-龥]+/.test('二三'), /^—$/u.test('—'), /[^—]/.test('—')]",
    value: [true, true, false],
  },
  { why: 'an identifier', source: '(() => { const ŧ = 7; return ŧ * 2; })()', value: 14 },
  {
    why: 'an identity escape of the character itself',
    source: "'\\’' + /\\—/.test('—')",
    value: '’true',
  },
  { why: 'an escaped backslash before it', source: "'\\\\→'", value: '\\→' },
  { why: 'a comment (its text only)', source: '1 /* — ’ → */ + 2 // ∞', value: 3 },
];

describe('a source with characters above U+00FF is handed to V8 in one byte a character, meaning the same', () => {
  for (const c of sameMeaning)
    it(c.why, () => {
      const oneByte = latin1Source(c.source);
      assert.ok(oneByte !== undefined, 'rewritten');
      assert.ok(!/[\u0100-\uffff]/.test(oneByte), `one byte a character: ${oneByte}`);
      // Values of another context compared as JSON (their arrays have its prototypes).
      assert.equal(
        JSON.stringify(runInNewContext(c.source)),
        JSON.stringify(c.value),
        'the case itself',
      );
      assert.equal(
        JSON.stringify(runInNewContext(oneByte)),
        JSON.stringify(c.value),
        `after: ${oneByte}`,
      );
    });
});

describe('a source it cannot be sure of, or has nothing to do for, is left whole (undefined)', () => {
  const cases = [
    { why: 'only characters up to U+00FF', source: "const s = 'café'; // naïve" },
    {
      why: 'a character beyond the BMP (an identifier cannot hold its escaped halves)',
      source: "'😀' // —",
    },
    { why: 'a line separator (a line end outside a literal)', source: "1\u2028+ '—'" },
    { why: 'a paragraph separator', source: "1\u2029+ '—'" },
    { why: 'a space above U+00FF (whitespace outside a literal)', source: "1\u3000+ '—'" },
    { why: 'a byte order mark', source: "\ufeff'—'" },
  ];
  for (const c of cases)
    it(c.why, () => {
      assert.equal(latin1Source(c.source), undefined);
    });
});

/** The heap's bytes for the string that is each library's source (the largest string opening as the file does), from a heap snapshot file. */
function heldSourceSizes(file: string, libraries: readonly string[]): Record<string, number> {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const {
    node_fields: fields,
    node_types: [types],
  } = snapshot.snapshot.meta;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const openings = libraries.map((library) => [
    library,
    readFileSync(join(root, 'node_modules', library), 'utf8').slice(0, 200),
  ]);
  const sizes: Record<string, number> = {};
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    if (types[snapshot.nodes[i + typeAt!]!] !== 'string') continue;
    const text = snapshot.strings[snapshot.nodes[i + nameAt!]!]!;
    const size = snapshot.nodes[i + sizeAt!]!;
    for (const [library, opening] of openings)
      if (text.startsWith(opening!)) sizes[library!] = Math.max(sizes[library!] ?? 0, size);
  }
  return sizes;
}

describe('a tollgate process hands V8 its modules in one byte a character', () => {
  /** Bytes of loaded JavaScript sources with a character above U+00FF, as V8 is handed them, in a process that loads what `tollgate run` loads; and how many modules it saw. */
  function twoByteSources(
    oneByte: boolean,
    snapshot?: string,
  ): { bytes: number; modules: number; files: string[] } {
    const script = `
      import { registerHooks } from 'node:module';
      const { registerSlimClient } = await import(${JSON.stringify(join(root, 'src/cluster/slim-client.ts'))});
      registerSlimClient();
      ${oneByte ? `const { registerOneByteSources } = await import(${JSON.stringify(join(root, 'src/cli/one-byte-sources.ts'))}); registerOneByteSources();` : ''}
      let bytes = 0, modules = 0; const files = [];
      registerHooks({ load(url, context, next) {
        const loaded = next(url, context);
        if ((loaded.format === 'module' || loaded.format === 'commonjs' || (!loaded.format && /\\.[cm]?js$/.test(url))) && loaded.source) {
          modules++;
          const text = typeof loaded.source === 'string' ? loaded.source : Buffer.from(loaded.source).toString('utf8');
          if (/[^\\x00-\\xff]/.test(text)) { bytes += text.length * 2; files.push(url.slice(url.lastIndexOf('node_modules/'))); }
        }
        return loaded;
      } });
      await import(${JSON.stringify(join(root, 'src/main.ts'))});
      await import(${JSON.stringify(join(root, 'src/cli/run.ts'))});
      ${snapshot ? `(await import('node:v8')).writeHeapSnapshot(${JSON.stringify(snapshot)});` : ''}
      console.log(JSON.stringify({ bytes, modules, files }));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(run.status, 0, run.stderr);
    return JSON.parse(run.stdout.trim().split('\n').at(-1)!);
  }

  it("isomorphic-git, the date library, undici and the rest: none of the run's modules in two bytes a character", () => {
    const before = twoByteSources(false);
    assert.ok(before.bytes > 1_000_000, `without it, two-byte sources: ${before.bytes} bytes`);
    const after = twoByteSources(true);
    assert.ok(after.modules > 300, `the process loaded its modules: ${after.modules}`);
    assert.deepEqual(after.files, [], 'no module left in two bytes a character');
  });

  it('V8 holds those sources in one byte a character (read in a heap snapshot of the process)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-one-byte-'));
    const libraries = [
      'isomorphic-git/index.cjs',
      'luxon/build/node/luxon.js',
      'undici/lib/core/util.js',
      'js-yaml/dist/js-yaml.mjs',
    ];
    const sizes = (oneByte: boolean) => {
      const file = join(dir, `${oneByte}.heapsnapshot`);
      twoByteSources(oneByte, file);
      return heldSourceSizes(file, libraries);
    };
    const before = sizes(false);
    const after = sizes(true);
    for (const library of libraries) {
      const length = readFileSync(join(root, 'node_modules', library), 'utf8').length;
      assert.ok(
        before[library]! >= 2 * length,
        `${library} without it: ${before[library]} bytes for ${length} characters`,
      );
      assert.ok(
        after[library]! < 1.1 * length,
        `${library}: ${after[library]} bytes for ${length} characters`,
      );
    }
  });
});
