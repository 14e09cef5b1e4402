/**
 * `tollgate completion bash|zsh|fish`: a shell completion script for the commands and
 * options of this very program (generated from its definition, so it cannot drift).
 *   bash: source <(tollgate completion bash)
 *   zsh:  source <(tollgate completion zsh)
 *   fish: tollgate completion fish | source
 */
import type { Command } from 'commander';

export interface CommandWords {
  readonly name: string;
  readonly options: readonly string[];
}

/** Each subcommand with its long and short option flags. */
export function commandWords(program: Command): CommandWords[] {
  return program.commands
    .filter((command) => command.name() !== 'help')
    .map((command) => ({
      name: command.name(),
      options: [
        ...command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => !!f)),
        '--help',
      ],
    }));
}

function bash(words: CommandWords[]): string {
  const cases = words
    .map((w) => `    ${w.name}) opts=${JSON.stringify(w.options.join(' '))} ;;`)
    .join('\n');
  return `# bash completion for tollgate (tollgate completion bash)
_tollgate() {
  local cur=\${COMP_WORDS[COMP_CWORD]} opts
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W ${JSON.stringify(words.map((w) => w.name).join(' ') + ' help')} -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
    *) opts="" ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _tollgate tollgate
`;
}

function fish(words: CommandWords[]): string {
  const lines = [
    '# fish completion for tollgate (tollgate completion fish)',
    'complete -c tollgate -f',
  ];
  for (const w of words) {
    lines.push(`complete -c tollgate -n __fish_use_subcommand -a ${w.name}`);
    for (const option of w.options) {
      const flag = option.startsWith('--') ? `-l ${option.slice(2)}` : `-s ${option.slice(1)}`;
      lines.push(`complete -c tollgate -n '__fish_seen_subcommand_from ${w.name}' ${flag}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(shell: string, words: CommandWords[]): string {
  switch (shell) {
    case 'bash':
      return bash(words);
    case 'zsh':
      return `# zsh completion for tollgate (tollgate completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n${bash(words)}`;
    case 'fish':
      return fish(words);
    default:
      throw new Error(`shell must be bash, zsh or fish, got "${shell}"`);
  }
}

export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description('Print a shell completion script (bash, zsh or fish)')
    .argument('<shell>', 'bash, zsh or fish')
    .action((shell: string) => {
      process.stdout.write(completionScript(shell, commandWords(program)));
    });
}
