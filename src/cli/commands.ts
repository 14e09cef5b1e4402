/**
 * The subcommands of `tollgate`, each loaded only when it is needed. A command's module
 * pulls in what its action uses (the Kubernetes client, isomorphic-git, the metrics
 * registry), so `tollgate validate` in an editor's save hook must not pay for
 * `tollgate run`'s imports: the command line names one subcommand, and only that one is
 * loaded. Help, completion and anything this table cannot read load them all, so the
 * program's full definition is always there when it is shown.
 */
import type { Command } from 'commander';

type Register = (program: Command) => void;

export const commandLoaders: Readonly<Record<string, () => Promise<Register>>> = {
  run: async () => (await import('./run.ts')).registerRun,
  audit: async () => (await import('./audit.ts')).registerAudit,
  validate: async () => (await import('./validate.ts')).registerValidate,
  plan: async () => (await import('./plan.ts')).registerPlan,
  demo: async () => (await import('./demo.ts')).registerDemo,
  'admission-params': async () => (await import('./admission-params.ts')).registerAdmissionParams,
  version: async () => (await import('./version.ts')).registerVersion,
  completion: async () => (await import('./completion.ts')).registerCompletion,
  explain: async () => (await import('./explain.ts')).registerExplain,
  queue: async () => (await import('./queue.ts')).registerQueue,
};

/** Commands whose output describes the whole program. */
const needsEveryCommand = new Set(['completion', 'help']);

/**
 * The commands to load for these arguments (process.argv without node and the script):
 * the one subcommand named first, when it is a plain word this table knows; every
 * command otherwise (no subcommand, a root option first, help, completion, a typo that
 * deserves commander's "did you mean").
 */
export function commandsToLoad(args: readonly string[]): string[] {
  const every = Object.keys(commandLoaders);
  const first = args[0];
  if (first === undefined || first.startsWith('-')) return every;
  if (needsEveryCommand.has(first) || !Object.hasOwn(commandLoaders, first)) return every;
  return [first];
}

/** Registers the commands these arguments need on the program. */
export async function registerCommands(program: Command, args: readonly string[]): Promise<void> {
  const registers = await Promise.all(commandsToLoad(args).map((name) => commandLoaders[name]!()));
  for (const register of registers) register(program);
}
