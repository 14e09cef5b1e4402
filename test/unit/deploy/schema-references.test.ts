/**
 * Every `$schema` reference the repository ships resolves for a user today: a YAML file's
 * modeline names a schema file by a path relative to that file, and the file is there
 * (no URL of a release that does not exist yet); the docs show modelines of the same
 * form, naming schema files that `schemas/` holds.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../../..');
const skipped = new Set(['node_modules', '.git', '.cache', 'test']);

function filesUnder(dir: string, ends: string[]): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return skipped.has(entry.name) ? [] : filesUnder(path, ends);
    return ends.some((e) => entry.name.endsWith(e)) ? [path] : [];
  });
}

const references = (text: string): string[] =>
  [...text.matchAll(/yaml-language-server: \$schema=(\S+)/g)].map((m) => m[1]!);
const schemaFiles = readdirSync(join(root, 'schemas'));

describe('$schema references', () => {
  const yamlFiles = filesUnder(root, ['.yaml', '.yml']).filter(
    (f) => references(readFileSync(f, 'utf8')).length > 0,
  );

  it('the policy examples carry modelines', () => {
    assert.ok(yamlFiles.some((f) => relative(root, f).startsWith('policy-examples/')));
  });

  for (const file of yamlFiles)
    it(`${relative(root, file)}: its modeline names a schema file relative to it`, () => {
      for (const reference of references(readFileSync(file, 'utf8'))) {
        assert.doesNotMatch(reference, /^[a-z]+:\/\//, `${reference} is a path, not a URL`);
        const target = resolve(dirname(file), reference);
        assert.ok(existsSync(target), `${reference} resolves from ${relative(root, file)}`);
        assert.equal(dirname(target), join(root, 'schemas'), `${reference} is in schemas/`);
      }
    });

  it('the docs show modelines naming a schema of schemas/ by a relative path, no URL', () => {
    const shown = filesUnder(root, ['.md']).flatMap((doc) =>
      references(readFileSync(doc, 'utf8')).map((reference) => ({ doc, reference })),
    );
    assert.ok(shown.some(({ doc }) => doc.endsWith('docs/policy-reference.md')));
    for (const { doc, reference } of shown) {
      const where = `${relative(root, doc)}: ${reference}`;
      assert.doesNotMatch(reference, /^[a-z]+:\/\//, `${where} is a path, not a URL`);
      assert.ok(schemaFiles.includes(basename(reference)), `${where} names a file of schemas/`);
    }
  });
});
