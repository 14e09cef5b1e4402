// Function lengths in src/, measured on the TypeScript compiler's syntax tree: every
// function-like node (declaration, method, arrow, function expression, accessor,
// constructor) counted from its first token's line to its last line, inclusive.
// Generated code (src/policy/generated/) is excluded.
//
//   node scripts/function-lengths.ts [--top N] [--json]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export interface FunctionLength {
  readonly file: string;
  readonly name: string;
  readonly lines: number;
}

const root = join(import.meta.dirname, '..');
const srcDir = join(root, 'src');
const excluded = [join(srcDir, 'policy', 'generated')];

function sourceFiles(dir: string): string[] {
  if (excluded.some((prefix) => dir.startsWith(prefix))) return [];
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

function nameOf(node: ts.Node, sourceFile: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText(sourceFile);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) {
    return parent.name.getText(sourceFile);
  }
  if (ts.isCallExpression(parent))
    return `(argument of ${parent.expression.getText(sourceFile).slice(0, 40)})`;
  return '(anonymous)';
}

export function measureFile(path: string): FunctionLength[] {
  const text = readFileSync(path, 'utf8');
  const sourceFile = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: FunctionLength[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined) {
      const start = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile)).line;
      const end = sourceFile.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({
        file: relative(root, path),
        name: nameOf(node, sourceFile),
        lines: end - start + 1,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return found;
}

const args = process.argv.slice(2);
const topIndex = args.indexOf('--top');
const top = topIndex >= 0 ? Number(args[topIndex + 1]) : 15;
const all = sourceFiles(srcDir)
  .flatMap(measureFile)
  .sort((a, b) => b.lines - a.lines);
if (args.includes('--json')) {
  console.log(JSON.stringify(all, null, 2));
} else {
  console.log('| function | file | lines |\n|---|---|---|');
  for (const entry of all.slice(0, top))
    console.log(`| \`${entry.name}\` | ${entry.file} | ${entry.lines} |`);
  console.log(
    `\nfunctions: ${all.length}; over 100 lines: ${all.filter((f) => f.lines > 100).length}; over 60 lines: ${all.filter((f) => f.lines > 60).length}`,
  );
}
