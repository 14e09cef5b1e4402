/**
 * The `tollgate` command line. Each subcommand lives in its own file and registers
 * itself on the program; this file only assembles them and maps failures to exit codes
 * (0 ok, 1 the command ran and found problems, 2 usage or I/O error).
 */
import { Command, CommanderError } from 'commander';
import { registerCommands } from './commands.ts';
import { buildInfo } from '../observe/build-info.ts';

const program = new Command()
  .name('tollgate')
  .description('Keeps pods behind scheduling gates until they are ready, under policy in Git.')
  .version(buildInfo().version)
  .exitOverride()
  .showHelpAfterError();

await registerCommands(program, process.argv.slice(2));

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
