/**
 * `tollgate demo [--short]`: runs the demo of a source checkout (scripts/demo.ts) in a
 * child process on this Node. The demo boots a local control plane from the test
 * harness, so it needs the checkout's test/ and scripts/ folders and its dev
 * dependencies; an installed package without them gets a message that says how to run
 * it instead of a stack trace. The demo's own exit code is passed through.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';

const checkout = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export function demoScript(root = checkout): string | undefined {
  const script = join(root, 'scripts', 'demo.ts');
  const harness = join(root, 'test', 'support', 'control-plane.ts');
  return existsSync(script) && existsSync(harness) ? script : undefined;
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'Boot a local control plane, serve policy-examples/ over Git, run tollgate on a batch of gated pods and show the audit history (needs a source checkout)',
    )
    .option('--short', 'a few hundred pods, checks its own results (as CI runs it)')
    .action(async (options: { short?: boolean }) => {
      const script = demoScript();
      if (!script) {
        throw new Error(
          `the demo needs a source checkout (scripts/demo.ts and test/support/ under ${checkout}): clone the tollgate repository and run \`npm run demo\` there`,
        );
      }
      const child = spawn(process.execPath, [script, ...(options.short ? ['--short'] : [])], {
        stdio: 'inherit',
        cwd: checkout,
      });
      // Ctrl-C reaches the demo through the terminal's process group; the demo shuts its
      // control plane down and exits, and so do we, with its code.
      const code = await new Promise<number>((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)));
      });
      process.exitCode = code;
    });
}
