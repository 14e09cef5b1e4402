/**
 * The `tollgate` command line. Each subcommand lives in its own file and registers
 * itself on the program; this file only assembles them and maps failures to exit codes
 * (0 ok, 1 the command ran and found problems, 2 usage or I/O error).
 */
import { Command, CommanderError } from 'commander';
import { registerAudit } from './audit.ts';
import { registerValidate } from './validate.ts';
import { registerRun } from './run.ts';
import { registerPlan } from './plan.ts';
import { registerDemo } from './demo.ts';
import { registerAdmissionParams } from './admission-params.ts';
import { registerVersion } from './version.ts';
import { registerCompletion } from './completion.ts';
import { registerExplain } from './explain.ts';
import { registerQueue } from './queue.ts';
import { buildInfo } from '../observe/build-info.ts';

const program = new Command()
  .name('tollgate')
  .description('Keeps pods behind scheduling gates until they are ready, under policy in Git.')
  .version(buildInfo().version)
  .exitOverride()
  .showHelpAfterError();

const registrations: ((program: Command) => void)[] = [
  registerRun,
  registerAudit,
  registerValidate,
  registerPlan,
  registerDemo,
  registerAdmissionParams,
  registerVersion,
  registerCompletion,
  registerExplain,
  registerQueue,
];

for (const register of registrations) register(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : 2;
  } else {
    process.stderr.write(`tollgate: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 2;
  }
}
