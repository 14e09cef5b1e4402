/**
 * `tollgate version [-o text|json|yaml]`: which build runs (package version, source
 * revision, Node.js version). Needs no cluster and no policy.
 */
import type { Command } from 'commander';
import { formatOutput, outputFormats, withOutput } from './output.ts';
import { buildInfo, type BuildInfo } from '../observe/build-info.ts';

export function formatVersion(info: BuildInfo, output: string): string {
  if (!(outputFormats as readonly string[]).includes(output))
    throw new Error(`-o must be text, json or yaml, got "${output}"`);
  return formatOutput(
    output,
    info,
    () => `tollgate ${info.version} (revision ${info.revision}, node ${info.node})\n`,
  );
}

export function registerVersion(program: Command): void {
  const command = program
    .command('version')
    .description('Print the version of tollgate, its source revision and Node.js version');
  withOutput(command).action((options: { output: string }) => {
    process.stdout.write(formatVersion(buildInfo(), options.output));
  });
}
