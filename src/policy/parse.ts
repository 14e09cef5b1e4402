/**
 * YAML is untrusted input: anyone who can open a pull request writes it. This module
 * turns one file's text into plain JSON values, and refuses (with an error, never a
 * crash) every input built to hurt the process:
 *
 * - size: the caller caps bytes before reading (see `limits`); here the text is capped again;
 * - alias expansion ("billion laughs"): `maxAliasCount` bounds the nodes an alias may expand to;
 * - deep nesting: a linear pre-scan rejects flow or compact-block nesting past
 *   `maxNestingDepth` BEFORE the recursive composer runs, so 100k `[` fails in
 *   milliseconds instead of spending seconds unwinding a stack overflow;
 * - duplicate keys (`uniqueKeys`): the second value would silently win otherwise;
 * - tags: only the YAML 1.2 core schema; any tag it cannot resolve (`!!js/function`,
 *   `!ruby/object`, a custom `!Ref`) is an error, not a string;
 * - merge keys (`<<`) are off: they make one key's meaning depend on another document part.
 */
import { parseAllDocuments } from 'yaml';
import type { PolicyError } from './errors.ts';

export const limits = {
  /** Bytes of one policy file. */
  maxFileBytes: 1024 * 1024,
  /** Bytes of all policy files of a repository. */
  maxRepoBytes: 8 * 1024 * 1024,
  /** Bytes one Git fetch may download (the pack arrives before any file can be measured). */
  maxFetchBytes: 64 * 1024 * 1024,
  /** Policy files (*.yaml, *.yml) in a repository. */
  maxFiles: 1000,
  /** YAML documents in one file. */
  maxDocumentsPerFile: 256,
  /** Aliases (and the nodes they expand to), per document. */
  maxAliasCount: 50,
  /** Nested collections. Real policy needs under 10. */
  maxNestingDepth: 64,
  /** Errors reported per file, so a garbage file cannot flood the output. */
  maxErrorsPerFile: 20,
} as const;

export interface ParsedDocument {
  readonly file: string;
  readonly index: number;
  readonly value: unknown;
}

/**
 * An upper bound of the nesting depth, in one pass and O(1) memory: flow brackets
 * outside comments and quoted scalars, plus compact block indicators (`- - - x`) at a
 * line start, plus indentation. Overestimates are harmless at the limits used.
 */
export function nestingDepthBound(text: string): number {
  let flow = 0;
  let max = 0;
  let lineStart = true;
  let compact = 0;
  let indent = 0;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '\n') {
      lineStart = true;
      compact = 0;
      indent = 0;
      // Quoted scalars may span lines, comments may not.
      continue;
    }
    if (quote) {
      if (c === '\\' && quote === '"') i += 1;
      else if (c === quote) quote = undefined;
      continue;
    }
    if (lineStart) {
      if (c === ' ') {
        indent += 1;
        continue;
      }
      if ((c === '-' || c === '?' || c === ':') && (text[i + 1] === ' ' || text[i + 1] === '\n')) {
        compact += 1;
        continue;
      }
      lineStart = false;
      max = Math.max(max, flow + compact + Math.ceil(indent / 2));
    }
    if (c === '#' && (i === 0 || /[ \t\n]/.test(text[i - 1] ?? ''))) {
      while (i + 1 < text.length && text[i + 1] !== '\n') i += 1;
    } else if ((c === '"' || c === "'") && (i === 0 || /[\s,[{:]/.test(text[i - 1] ?? ''))) {
      quote = c;
    } else if (c === '[' || c === '{') {
      flow += 1;
      max = Math.max(max, flow + compact + Math.ceil(indent / 2));
    } else if ((c === ']' || c === '}') && flow > 0) {
      flow -= 1;
    }
  }
  return Math.max(max, compact + Math.ceil(indent / 2));
}

/** Parses one file into its non-empty documents, or the errors that refuse it. */
export function parsePolicyFile(
  file: string,
  text: string,
): { documents: ParsedDocument[]; errors: PolicyError[] } {
  const errors: PolicyError[] = [];
  const fail = (message: string, document?: number): PolicyError => ({
    file,
    ...(document === undefined ? {} : { document }),
    path: '',
    message,
  });
  if (Buffer.byteLength(text, 'utf8') > limits.maxFileBytes) {
    return {
      documents: [],
      errors: [fail(`file is larger than the ${limits.maxFileBytes} byte limit`)],
    };
  }
  const depth = nestingDepthBound(text);
  if (depth > limits.maxNestingDepth) {
    return {
      documents: [],
      errors: [fail(`nesting is deeper than ${limits.maxNestingDepth} levels (about ${depth})`)],
    };
  }
  const parsed = parseAllDocuments(text, {
    version: '1.2',
    schema: 'core',
    merge: false,
    uniqueKeys: true,
    strict: true,
    prettyErrors: true,
    customTags: [],
  });
  // parseAllDocuments returns an empty collection object for an empty stream.
  const docs = Array.isArray(parsed) ? parsed : [];
  if (docs.length > limits.maxDocumentsPerFile) {
    return {
      documents: [],
      errors: [fail(`more than ${limits.maxDocumentsPerFile} YAML documents in one file`)],
    };
  }
  const documents: ParsedDocument[] = [];
  docs.forEach((doc, index) => {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length > 0) {
      for (const problem of problems.slice(0, limits.maxErrorsPerFile - errors.length)) {
        errors.push(
          fail(`YAML ${problem.code}: ${firstLine(problem.message)}${at(problem.linePos)}`, index),
        );
      }
      return;
    }
    try {
      const value: unknown = doc.toJS({ maxAliasCount: limits.maxAliasCount });
      if (value !== null && value !== undefined) documents.push({ file, index, value });
    } catch (error) {
      // Alias expansion past maxAliasCount throws ReferenceError; anything else is just as fatal to the file.
      errors.push(
        fail(
          error instanceof ReferenceError
            ? `YAML aliases expand to too many nodes (limit ${limits.maxAliasCount}): refused as a resource exhaustion attack`
            : `YAML could not be read: ${error instanceof Error ? error.message : String(error)}`,
          index,
        ),
      );
    }
  });
  return { documents: errors.length > 0 ? [] : documents, errors };
}

function firstLine(message: string): string {
  return message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? message;
}

function at(linePos: readonly { line: number; col: number }[] | undefined): string {
  const start = linePos?.[0];
  return start ? ` (line ${start.line}, column ${start.col})` : '';
}
