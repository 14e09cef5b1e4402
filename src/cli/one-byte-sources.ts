/**
 * Module sources handed to V8 in one byte a character.
 *
 * V8 keeps every module's source text in the heap for the life of the process, and keeps
 * a text with any character above U+00FF in two bytes a character. A single `—` or `’` in
 * a comment doubles the whole file: isomorphic-git's 586 KB index takes 1,144 KiB for
 * fifteen such characters, the date library's 262 KB 511 KiB, and undici's sources are
 * most of theirs (docs/BENCHMARKS.md, Memory).
 *
 * `latin1Source` writes each such character as its `\uXXXX` escape, which means the same
 * character wherever a character above U+00FF can stand in JavaScript: in a comment (the
 * comment's text only), a string literal, a template literal's value, a regular
 * expression, an identifier. An escape written with a backslash before the character
 * (`\’`, the character itself) becomes the plain escape. A text it cannot be sure of is
 * left whole (undefined): one with a character outside the Basic Multilingual Plane (an
 * identifier cannot hold its escaped halves), a line or paragraph separator or a space
 * above U+00FF (each is whitespace or a line end outside a literal, where an escape is a
 * syntax error). What changes: a tagged template's raw text, and a column number in a
 * stack trace on a line that held such a character.
 */
import { Buffer, isAscii } from 'node:buffer';
import { registerHooks } from 'node:module';
import { sourceText } from '../cluster/slim-client.ts';

/** Characters above U+00FF (a surrogate is one of the pair of a character beyond the BMP). */
const aboveLatin1 = /[\u0100-\uffff]/;
const aboveLatin1All = /(\\*)([\u0100-\uffff])/g;
/** Beyond the BMP, line and paragraph separators, spaces above U+00FF and the byte order mark. */
const leftWhole = /[\ud800-\udfff\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/** `source` with every character above U+00FF written as its escape; undefined when there is none or it is left whole. */
export function latin1Source(source: string): string | undefined {
  if (!aboveLatin1.test(source) || leftWhole.test(source)) return undefined;
  const escaped = source.replace(
    aboveLatin1All,
    (_match, backslashes: string, character: string) => {
      const escape = `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`;
      // An odd run of backslashes ends in one escaping this character: that one becomes the escape's.
      return backslashes.length % 2 === 1 ? backslashes.slice(1) + escape : backslashes + escape;
    },
  );
  // V8 keeps what it builds from a two-byte string in two bytes; a string decoded from
  // Latin-1 bytes is one byte a character.
  return Buffer.from(escaped, 'latin1').toString('latin1');
}

/** An ES module or CommonJS source (a `require` from CommonJS is loaded before its format is known: read by its name). */
function isJavaScript(url: string, format: string | null | undefined): boolean {
  if (format === 'module' || format === 'commonjs') return true;
  return (format === undefined || format === null) && /\.[cm]?js$/.test(url);
}

/** Hands every JavaScript module loaded after the call (ES modules and CommonJS) to V8 through `latin1Source`. */
export function registerOneByteSources(): void {
  registerHooks({
    load(url, context, nextLoad) {
      const loaded = nextLoad(url, context);
      if (!isJavaScript(url, loaded.format)) return loaded;
      if (loaded.source === undefined || loaded.source === null) return loaded;
      if (typeof loaded.source !== 'string' && isAscii(loaded.source)) return loaded;
      const oneByte = latin1Source(sourceText(loaded.source));
      return oneByte === undefined ? loaded : { ...loaded, source: oneByte };
    },
  });
}
