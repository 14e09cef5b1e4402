/**
 * Line and column for the errors that name a field (schema and semantic checks), so an
 * author, an editor or a CI annotation can jump to it. Only files with such errors are
 * read again, on the calling thread: they already passed the bounded parser
 * (parse.ts: size, nesting and token limits), aliases are not expanded here, and at most
 * `limits.maxErrorsPerFile` errors per file are located. A field that does not exist
 * (a required one that is missing) is located at its nearest existing parent.
 */
import { LineCounter, parseAllDocuments, type Document } from 'yaml';
import type { PolicyError } from './errors.ts';
import { limits } from './parse.ts';

/** `spec.selector.matchLabels["a/b"]` or `spec.conditions[1].minNodes` -> its parts. */
export function pathParts(path: string): (string | number)[] {
  const parts: (string | number)[] = [];
  const token = /\.?([A-Za-z_$][\w$-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y;
  let match: RegExpExecArray | null;
  while (token.lastIndex < path.length && (match = token.exec(path)) !== null) {
    if (match[1] !== undefined) parts.push(match[1]);
    else if (match[2] !== undefined) parts.push(Number(match[2]));
    else parts.push(JSON.parse(match[3]!) as string);
  }
  return parts;
}

/** The 1-based line and column of the node at `parts`, or of its nearest existing parent. */
function positionOf(
  doc: Document,
  parts: readonly (string | number)[],
  lines: LineCounter,
): { line: number; column: number } | undefined {
  for (let depth = parts.length; depth >= 0; depth -= 1) {
    const node = depth === 0 ? doc.contents : doc.getIn(parts.slice(0, depth), true);
    const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
    if (range) {
      const { line, col } = lines.linePos(range[0]);
      return { line, column: col };
    }
  }
  return undefined;
}

/** `errors` with `line` and `column` where the field is found in `files`. */
export function locateErrors(
  errors: readonly PolicyError[],
  files: readonly { readonly path: string; readonly content: string }[],
): PolicyError[] {
  const byFile = new Map<string, { docs: Document[]; lines: LineCounter }>();
  const located = new Map<string, number>();
  return errors.map((error) => {
    // Only errors that name a field: a YAML syntax error says its own line already.
    if (error.document === undefined || error.path === '' || error.line !== undefined) return error;
    const count = located.get(error.file) ?? 0;
    if (count >= limits.maxErrorsPerFile) return error;
    const content = files.find((f) => f.path === error.file)?.content;
    if (content === undefined) return error;
    let parsed = byFile.get(error.file);
    if (!parsed) {
      const lines = new LineCounter();
      parsed = { docs: parseAllDocuments(content, { lineCounter: lines }) as Document[], lines };
      byFile.set(error.file, parsed);
    }
    const doc = parsed.docs[error.document];
    if (!doc) return error;
    located.set(error.file, count + 1);
    const position = positionOf(doc, pathParts(error.path), parsed.lines);
    return position ? { ...error, ...position } : error;
  });
}
