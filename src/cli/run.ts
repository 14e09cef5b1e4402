/**
 * `tollgate run`: the reconciler as a long-running process. This file only turns flags
 * and environment into a validated `RunConfig` (run-config.ts) and hands it to
 * `runTollgate` (src/main.ts). An invalid configuration exits 2 before anything starts,
 * listing every problem; the heavy modules are loaded only after validation passed.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { parseRunConfig, runSettings, type RawRunSettings } from './run-config.ts';

function isReadableFile(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function registerRun(program: Command): void {
  const command = program
    .command('run')
    .description(
      'Run the reconciler: load policy, sync the cluster view, elect a leader, run the loops, serve /metrics /healthz /readyz.',
    );
  for (const setting of runSettings) {
    const fallback =
      'defaultValue' in setting && setting.defaultValue !== ''
        ? `; default ${setting.defaultValue}`
        : '';
    command.option(
      `--${setting.flag} <value>`,
      `${setting.description} (env ${setting.env}${fallback})`,
    );
  }
  command.option('--context <name>', "kubectl's name for --kube-context");
  command.action(async ({ context, ...options }: RawRunSettings & { context?: string }) => {
    if (
      context !== undefined &&
      options.kubeContext !== undefined &&
      context !== options.kubeContext
    ) {
      process.stderr.write('tollgate run: --context and --kube-context name different contexts\n');
      process.exitCode = 2;
      return;
    }
    const result = parseRunConfig(
      { ...options, kubeContext: options.kubeContext ?? context },
      {
        env: process.env,
        hostname: hostname(),
        isFile: isReadableFile,
        isDirectory,
      },
    );
    if (!result.ok) {
      process.stderr.write(
        `tollgate run: invalid configuration, nothing was started:\n${result.problems.map((p) => `  - ${p}\n`).join('')}`,
      );
      process.exitCode = 2;
      return;
    }
    const { runTollgate } = await import('../main.ts');
    // Exit as soon as the orderly shutdown is done (audit flushed, lease released): a
    // leftover timer, e.g. a rate-limited Event backlog, must not outlive it.
    process.exit(await runTollgate(result.config));
  });
}
