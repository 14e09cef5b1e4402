/**
 * YAML is untrusted input: anyone who can open a pull request writes it. This module
 * turns one file's text into plain JSON values, and refuses (with an error, never a
 * crash) every input built to hurt the process:
 *
 * - size: the caller caps bytes before reading (see `limits`); here the text is capped again;
 * - limits inside the parser, not in a scan beside it: tollgate drives yaml's own lexer
 *   and CST parser (both iterative) token by token and refuses the file as soon as the
 *   parser's open collections pass `maxNestingDepth` or its tokens pass
 *   `maxTokensPerFile`. Only then does the
 *   (recursive) composer build documents, from a token tree known to be shallow and
 *   small. So the cost of a refusal is the tokens read before it, whatever quote,
 *   comment or block scalar the text uses to look harmless;
 * - alias expansion ("billion laughs"): `maxAliasCount` bounds the nodes an alias may
 *   expand to, checked by yaml while it converts, before anything is expanded;
 * - time: `parse-off-thread.ts` runs this in a worker thread with a deadline, so a poll
 *   never holds the event loop (and with it leader-lease renewal);
 * - duplicate keys (`uniqueKeys`): the second value would silently win otherwise;
 * - tags: only the YAML 1.2 core schema; any tag it cannot resolve (`!!js/function`,
 *   `!ruby/object`, a custom `!Ref`) is an error, not a string;
 * - merge keys (`<<`) are off: they make one key's meaning depend on another document part.
 */
import {
  Composer,
  Lexer,
  LineCounter,
  Parser,
  type CST,
  type Document,
  type DocumentOptions,
  type ParseOptions,
  type SchemaOptions,
} from 'yaml';
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
  /**
   * YAML tokens (scalars, indicators, spaces, comments) of one file. A real policy file
   * has a few thousand; this caps the composer's work at roughly 80 KB of dense YAML.
   */
  maxTokensPerFile: 100_000,
  /** Errors reported per file, so a garbage file cannot flood the output. */
  maxErrorsPerFile: 20,
} as const;

export interface ParsedDocument {
  readonly file: string;
  readonly index: number;
  readonly value: unknown;
}

export interface ParseWork {
  /** Lexer tokens read, up to and including the one that broke a limit. */
  readonly tokens: number;
}

export interface ParsedFile {
  readonly documents: ParsedDocument[];
  readonly errors: PolicyError[];
  readonly work: ParseWork;
}

const yamlOptions: DocumentOptions & ParseOptions & SchemaOptions = {
  version: '1.2',
  schema: 'core',
  merge: false,
  uniqueKeys: true,
  strict: true,
  customTags: [],
};

/** A limit broken while reading tokens; `offset` is where in the text. */
class LimitExceeded extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(message);
    this.offset = offset;
  }
}

/**
 * yaml's lexer and CST parser, driven one token at a time so every limit is checked
 * as the parser goes: open collections (the parser's stack, less the document) and
 * tokens. Throws `LimitExceeded` at the first broken limit.
 */
function* boundedTokens(
  text: string,
  parser: Parser,
  counted: { tokens: number },
): Generator<CST.Token, void> {
  for (const lexeme of new Lexer().lex(text)) {
    counted.tokens += 1;
    if (counted.tokens > limits.maxTokensPerFile) {
      throw new LimitExceeded(
        `more than ${limits.maxTokensPerFile} YAML tokens; a policy file this large is refused, split it`,
        parser.offset,
      );
    }
    yield* parser.next(lexeme);
    if (parser.stack.length - 1 > limits.maxNestingDepth) {
      throw new LimitExceeded(
        `nesting is deeper than ${limits.maxNestingDepth} levels`,
        parser.offset,
      );
    }
  }
  yield* parser.end();
}

/** Parses one file into its non-empty documents, or the errors that refuse it. */
export function parsePolicyFile(file: string, text: string): ParsedFile {
  const errors: PolicyError[] = [];
  const counted = { tokens: 0 };
  const refuse = (message: string): ParsedFile => ({
    documents: [],
    errors: [{ file, path: '', message }],
    work: { tokens: counted.tokens },
  });
  if (Buffer.byteLength(text, 'utf8') > limits.maxFileBytes) {
    return refuse(`file is larger than the ${limits.maxFileBytes} byte limit`);
  }
  const lines = new LineCounter();
  const parser = new Parser(lines.addNewLine);
  lines.addNewLine(0); // Parser.parse() does this itself; driven by hand, tollgate does
  const cst: CST.Token[] = [];
  let documentCount = 0;
  try {
    for (const token of boundedTokens(text, parser, counted)) {
      cst.push(token);
      if (token.type === 'document') documentCount += 1;
      if (documentCount > limits.maxDocumentsPerFile) {
        return refuse(`more than ${limits.maxDocumentsPerFile} YAML documents in one file`);
      }
    }
  } catch (error) {
    if (!(error instanceof LimitExceeded)) throw error;
    const pos = lines.linePos(error.offset);
    return refuse(`${error.message}${at([pos])}`);
  }
  const docs: Document.Parsed[] = [...new Composer(yamlOptions).compose(cst)];
  const documents: ParsedDocument[] = [];
  docs.forEach((doc, index) => {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length > 0) {
      for (const problem of problems.slice(0, limits.maxErrorsPerFile - errors.length)) {
        const pos = lines.linePos(problem.pos[0]);
        errors.push({
          file,
          document: index,
          path: '',
          message: `YAML ${problem.code}: ${firstLine(problem.message)}${at([pos])}`,
        });
      }
      return;
    }
    try {
      const value: unknown = doc.toJS({ maxAliasCount: limits.maxAliasCount });
      if (value !== null && value !== undefined) documents.push({ file, index, value });
    } catch (error) {
      // Alias expansion past maxAliasCount throws ReferenceError; anything else is just as fatal to the file.
      errors.push({
        file,
        document: index,
        path: '',
        message:
          error instanceof ReferenceError
            ? `YAML aliases expand to too many nodes (limit ${limits.maxAliasCount}): refused as a resource exhaustion attack`
            : `YAML could not be read: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
  });
  return {
    documents: errors.length > 0 ? [] : documents,
    errors,
    work: { tokens: counted.tokens },
  };
}

function firstLine(message: string): string {
  return message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? message;
}

function at(linePos: readonly { line: number; col: number }[] | undefined): string {
  const start = linePos?.[0];
  return start ? ` (line ${start.line}, column ${start.col})` : '';
}
