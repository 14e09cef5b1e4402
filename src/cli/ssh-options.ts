/**
 * The SSH flags `validate`, `plan` and `audit` share with `tollgate run`: an `ssh://` or
 * `git@host:path` remote is read with the deploy key of --git-ssh-key-file, the server's
 * host key checked against --git-ssh-known-hosts (or, never in production, not at all
 * with --git-ssh-insecure-ignore-host-key). Everything is checked before anything is
 * fetched, each problem naming its flag.
 */
import type { Command } from 'commander';
import { isSshUrl, sshAccessProblem, type SshAccess } from '../policy/git-ssh.ts';

export interface SshFlags {
  readonly gitSshKeyFile?: string;
  readonly gitSshKnownHosts?: string;
  readonly gitSshInsecureIgnoreHostKey?: boolean;
}

export function withSshOptions(command: Command): Command {
  return command
    .option(
      '--git-ssh-key-file <path>',
      'SSH private key (deploy key) for an ssh:// or git@host:path repository',
    )
    .option(
      '--git-ssh-known-hosts <path>',
      'known_hosts file holding the SSH Git server host keys (required for SSH remotes)',
    )
    .option(
      '--git-ssh-insecure-ignore-host-key',
      'do not check the SSH Git server host key at all (never in production)',
    );
}

/** How to reach `location`: undefined for anything but an SSH URL. */
export type SshAnswer = { access?: SshAccess } | { problem: string };

export function sshAccessFor(location: string, flags: SshFlags): SshAnswer {
  if (!isSshUrl(location)) return {};
  if (flags.gitSshKeyFile === undefined)
    return { problem: 'an SSH URL needs a deploy key: set --git-ssh-key-file' };
  const access: SshAccess = {
    keyFile: flags.gitSshKeyFile,
    keyFlag: '--git-ssh-key-file',
    ...(flags.gitSshKnownHosts === undefined ? {} : { knownHostsFile: flags.gitSshKnownHosts }),
    ...(flags.gitSshInsecureIgnoreHostKey ? { insecureIgnoreHostKey: true } : {}),
  };
  const problem = sshAccessProblem(access);
  return problem === undefined ? { access } : { problem };
}
