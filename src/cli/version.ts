/**
 * `tollgate version [-o text|json|yaml]`: which build runs (package version, source
 * revision, Node.js version). Needs no cluster and no policy.
 */
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { buildInfo, type BuildInfo } from '../observe/build-info.ts';

export function formatVersion(info: BuildInfo, output: string): string {
  switch (output) {
    case 'json':
      return `${JSON.stringify(info)}\n`;
    case 'yaml':
      return stringify(info);
    case 'text':
      return `tollgate ${info.version} (revision ${info.revision}, node ${info.node})\n`;
    default:
      throw new Error(`-o must be text, json or yaml, got "${output}"`);
  }
}

export function registerVersion(program: Command): void {
  program
    .command('version')
    .description('Print the version of tollgate, its source revision and Node.js version')
    .option('-o, --output <format>', 'text, json or yaml', 'text')
    .action((options: { output: string }) => {
      process.stdout.write(formatVersion(buildInfo(), options.output));
    });
}
