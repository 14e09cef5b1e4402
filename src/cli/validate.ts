/**
 * `tollgate validate [DIR|URL] [--ref R] [--path P] [--output text|json]`: loads a policy
 * folder or repository exactly as `tollgate run` would and lists every problem.
 * Exit codes: 0 valid, 1 invalid (every error listed), 2 usage or I/O error
 * (unreadable folder, unreachable repository, refused token).
 *
 * The token for a URL comes from an environment variable (default TOLLGATE_GIT_TOKEN,
 * used only when set) or a file, never a flag; it never appears in the output.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { formatPolicyError } from '../policy/errors.ts';
import { isGitUrl } from '../policy/git.ts';
import type { Policy } from '../policy/model.ts';
import { PolicyFetchError, PolicySource, type PollOutcome } from '../policy/source.ts';

export interface ValidateOptions {
  readonly ref?: string;
  readonly path?: string;
  readonly output: string;
  readonly gitTokenEnv: string;
  readonly gitTokenFile?: string;
}

export interface ValidateIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

function summary(policy: Policy): Record<string, number> {
  return {
    tenants: policy.tenants.size,
    gatePolicies: policy.gatePolicies.length,
    resizePolicies: policy.resizePolicies.length,
    approvals: policy.approvals.length,
  };
}

/** Runs the validation and returns the exit code. */
export async function runValidate(
  location: string,
  options: ValidateOptions,
  io: ValidateIo,
): Promise<number> {
  const json = options.output === 'json';
  const fail = (message: string): number => {
    if (json) io.stdout(`${JSON.stringify({ valid: false, error: message })}\n`);
    else io.stderr(`tollgate validate: ${message}\n`);
    return 2;
  };
  if (options.output !== 'text' && options.output !== 'json') {
    return fail(`--output must be text or json, got "${options.output}"`);
  }
  const remote = isGitUrl(location);
  if (!remote && options.ref !== undefined) return fail('--ref applies to a Git URL, not a folder');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location) && !remote) {
    return fail(`only http(s) Git URLs are supported, got ${location.split(':')[0]}://`);
  }
  const cacheDir = remote ? mkdtempSync(join(tmpdir(), 'tollgate-validate-')) : undefined;
  let outcome: PollOutcome;
  let source: PolicySource;
  try {
    const tokenFromEnv =
      remote && !options.gitTokenFile && io.env[options.gitTokenEnv]
        ? io.env[options.gitTokenEnv]
        : undefined;
    source = new PolicySource({
      location,
      ...(options.ref ? { ref: options.ref } : {}),
      ...(options.path ? { path: options.path } : {}),
      ...(tokenFromEnv ? { token: tokenFromEnv.trim() } : {}),
      ...(remote && options.gitTokenFile ? { tokenFile: options.gitTokenFile } : {}),
      ...(cacheDir ? { cacheDir } : {}),
    });
    outcome = await source.poll();
  } catch (error) {
    return fail(
      error instanceof PolicyFetchError ? error.message : `unexpected: ${(error as Error).message}`,
    );
  } finally {
    if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  }
  switch (outcome.kind) {
    case 'fetch-failed':
      return fail(outcome.error.message);
    case 'rejected':
      if (json) {
        io.stdout(
          `${JSON.stringify({ valid: false, location: source.location, commit: outcome.commit, errors: outcome.errors })}\n`,
        );
      } else {
        for (const error of outcome.errors) io.stdout(`${formatPolicyError(error)}\n`);
        io.stdout(
          `${source.location}: invalid, ${outcome.errors.length} error${outcome.errors.length === 1 ? '' : 's'}\n`,
        );
      }
      return 1;
    case 'applied':
    case 'unchanged': {
      const policy = source.current() as Policy;
      const counts = summary(policy);
      if (json) {
        io.stdout(
          `${JSON.stringify({ valid: true, location: source.location, commit: policy.commit, ...counts })}\n`,
        );
      } else {
        io.stdout(
          `${source.location}: valid at ${policy.commit} (${counts.tenants} tenants, ${counts.gatePolicies} gate policies, ${counts.resizePolicies} resize policies, ${counts.approvals} approvals)\n`,
        );
      }
      return 0;
    }
  }
}

export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description(
      'validate a policy folder or Git repository (exit 0 valid, 1 invalid, 2 usage or I/O error)',
    )
    .argument('[location]', 'policy folder or http(s) Git URL', '.')
    .option('--ref <ref>', 'branch or tag of a Git URL (default main)')
    .option('--path <path>', 'sub-folder that holds the policy')
    .option('--output <format>', 'text or json', 'text')
    .option(
      '--git-token-env <name>',
      'environment variable holding the Git token (used when set)',
      'TOLLGATE_GIT_TOKEN',
    )
    .option('--git-token-file <path>', 'file holding the Git token')
    .action(async (location: string, options: ValidateOptions) => {
      process.exitCode = await runValidate(location, options, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
        env: process.env,
      });
    });
}
