/**
 * `-o, --output text|json|yaml`, shared by every `tollgate` subcommand that prints a result
 * (a command may add a format, plan's markdown): json and yaml carry the same object, text
 * is for people. An unknown format is refused by the parser (exit 2) before anything runs.
 * Loads no Kubernetes client (validate must start fast: test/unit/cli/commands.test.ts).
 * The cluster flags are in cluster-options.ts.
 */
import { Option, type Command } from 'commander';
import { stringify } from 'yaml';

export const outputFormats = ['text', 'json', 'yaml'] as const;

/**
 * Adds `-o, --output <format>`: text, json, yaml and the command's `extra` formats;
 * `fallback` when a command's natural output is not text (admission-params: yaml to apply).
 */
export function withOutput(
  command: Command,
  extra: readonly string[] = [],
  fallback = 'text',
): Command {
  return command.addOption(
    new Option('-o, --output <format>', 'output format')
      .choices([...outputFormats, ...extra])
      .default(fallback),
  );
}

/** json and yaml: the result (and an error) as an object on stdout, for programs. */
export const isStructured = (format: string): boolean => format === 'json' || format === 'yaml';

/** json and yaml render `value` itself; any other format is the command's `text()`. */
export function formatOutput(format: string, value: unknown, text: () => string): string {
  if (format === 'json') return `${JSON.stringify(value, null, 2)}\n`;
  if (format === 'yaml') return stringify(value, { lineWidth: 0 });
  return text();
}

/**
 * `text` cut to at most `maxChars` (UTF-16 code units, never fewer than characters) at a
 * line boundary, ending with a line that says what was left out and where the whole is,
 * for a code host's comment size limit (65,536 on GitHub). Unchanged when it fits.
 */
export function fitToLength(text: string, maxChars: number, whole: string): string {
  if (text.length <= maxChars) return text;
  const lines = text.split('\n');
  const note = (shown: number): string =>
    `\n… truncated: ${shown} of ${lines.length} lines shown (${text.length} characters, limit ${maxChars}); the whole: ${whole}\n`;
  let kept = 0;
  let length = 0;
  // The note grows by at most a few digits; reserve it at its longest.
  const reserve = note(lines.length).length;
  while (kept < lines.length && length + lines[kept]!.length + 1 + reserve <= maxChars) {
    length += lines[kept]!.length + 1;
    kept += 1;
  }
  return `${lines.slice(0, kept).join('\n')}\n${note(kept)}`;
}
