/**
 * `tollgate validate [DIR|URL] [--ref R] [--path P] [-o text|json|yaml] [--now T]`: loads
 * a policy folder or repository exactly as `tollgate run` would and lists every problem.
 * Exit codes: 0 valid, 1 invalid (every error listed), 2 usage or I/O error
 * (unreadable folder, unreachable repository, refused token).
 *
 * A valid policy may still hold approvals that do nothing: expired at `--now` (default:
 * the clock), or aimed at nothing plausible (see approvalWarnings). Those are warnings:
 * one line each naming file and field, exit 0, so CI can check a date ahead
 * (`--now 2030-01-01T00:00:00Z`) without failing today's build.
 *
 * The token for a URL comes from an environment variable (default TOLLGATE_GIT_TOKEN,
 * used only when set) or a file, never a flag; it never appears in the output.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { formatPolicyError, type PolicyError } from '../policy/errors.ts';
import { isRemoteGitUrl } from '../policy/git.ts';
import type { Approval, Policy } from '../policy/model.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { PolicyFetchError, PolicySource, type PollOutcome } from '../policy/source.ts';
import { referenceWarnings, shippedClusterRoleRules } from './reference-warnings.ts';
import { neverGatedWarnings } from './budget-warnings.ts';
import { formatOutput, isStructured, withOutput } from './output.ts';
import { sshAccessFor, withSshOptions, type SshFlags } from './ssh-options.ts';

export interface ValidateOptions extends SshFlags {
  readonly ref?: string;
  readonly path?: string;
  readonly output: string;
  readonly gitTokenEnv: string;
  readonly gitTokenFile?: string;
  /** RFC 3339 time at which approvals are judged (default: the clock). */
  readonly now?: string;
  /** YAML with the ClusterRole(s) tollgate runs with (a rendered overlay); default the shipped deploy/base/rbac.yaml. */
  readonly rbac?: string;
}

export interface ValidateIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
  readonly clock?: Clock;
}

/** What a Kubernetes pod name can be: a DNS-1123 subdomain. */
const podName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const warn = (a: Approval, path: string, message: string): PolicyError => ({
  file: a.source.file,
  document: a.source.document,
  path,
  message,
});

function expiredWarning(a: Approval, now: number): PolicyError[] {
  if (a.expiresAt === undefined || a.expiresAt > now) return [];
  const at = new Date(a.expiresAt).toISOString();
  return [
    warn(
      a,
      'spec.expiresAt',
      `approval "${a.name}" expired at ${at} (now is ${new Date(now).toISOString()}): it approves nothing; renew or delete it`,
    ),
  ];
}

function podNameWarning(a: Approval, path: string, name: string | undefined): PolicyError[] {
  if (name === undefined || (name.length <= 253 && podName.test(name))) return [];
  return [
    warn(
      a,
      path,
      `"${name}" is not a valid pod name (lower-case letters, digits, "-" and "."): an approval names one pod, never a pattern`,
    ),
  ];
}

/**
 * A pod approval counts only where tollgate holds pods: Cancel needs a GatePolicy of the
 * namespace's tenant; Release needs one that waits for an approval (an Approved
 * condition, or expiry into Review).
 */
function podTargetWarning(policy: Policy, a: Approval): PolicyError[] {
  if (a.target.kind !== 'Pod') return [];
  const namespace = a.target.namespace;
  const tenant = [...policy.tenants.values()].find((t) => t.namespaces.includes(namespace));
  if (!tenant) return []; // the compiler refuses such an approval
  const gates = policy.gatePolicies.filter((g) => g.tenant === tenant.name);
  const where = `tenant "${tenant.name}" (namespace ${namespace})`;
  if (gates.length === 0)
    return [
      warn(
        a,
        'spec.target',
        `${where} has no GatePolicy, so tollgate holds none of its pods: a ${a.action} approval there ${a.action === 'Cancel' ? 'cancels' : 'releases'} nothing`,
      ),
    ];
  const waitsForApproval = gates.some(
    (g) => g.conditions.some((c) => c.type === 'Approved') || g.expiry?.action === 'Review',
  );
  if (a.action !== 'Release' || waitsForApproval) return [];
  return [
    warn(
      a,
      'spec.target',
      `no GatePolicy of ${where} has an Approved condition or a Review expiry: a Release approval there releases nothing`,
    ),
  ];
}

/** A Resume approval counts only for a ResizePolicy that pauses after a rollback. */
function resumeWarning(policy: Policy, a: Approval): PolicyError[] {
  if (a.target.kind !== 'ResizePolicy') return [];
  const name = a.target.name;
  const resize = policy.resizePolicies.find((r) => r.name === name);
  if (!resize || resize.rollback.pauseForReview) return [];
  return [
    warn(
      a,
      'spec.target.name',
      `ResizePolicy "${name}" never pauses (rollback.pauseForReview is false): a Resume approval resumes nothing`,
    ),
  ];
}

/**
 * Approvals of a valid policy that will do nothing at `now`: expired, naming a pod no pod
 * can be (a pattern, upper case), in a tenant where tollgate holds no pod or never waits
 * for an approval, or resuming a ResizePolicy that never pauses.
 */
export function approvalWarnings(policy: Policy, now: number): PolicyError[] {
  return policy.approvals.flatMap((a) => [
    ...expiredWarning(a, now),
    ...podTargetWarning(policy, a),
    ...resumeWarning(policy, a),
    ...(a.target.kind === 'Pod' ? podNameWarning(a, 'spec.target.name', a.target.name) : []),
    ...(a.target.kind === 'ResizePolicy' ? podNameWarning(a, 'spec.target.pod', a.target.pod) : []),
  ]);
}

function summary(policy: Policy): Record<string, number> {
  return {
    tenants: policy.tenants.size,
    gatePolicies: policy.gatePolicies.length,
    resizePolicies: policy.resizePolicies.length,
    approvals: policy.approvals.length,
  };
}

/** Epoch ms of an RFC 3339 time ("2030-01-01T00:00:00Z"), else undefined. */
function rfc3339(text: string): number | undefined {
  const ms = Date.parse(text);
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(text) && !Number.isNaN(ms) ? ms : undefined;
}

/** Runs the validation and returns the exit code. */
export async function runValidate(
  location: string,
  options: ValidateOptions,
  io: ValidateIo,
): Promise<number> {
  const json = isStructured(options.output);
  const answer = (value: unknown): void => io.stdout(formatOutput(options.output, value, () => ''));
  const fail = (message: string): number => {
    if (json) answer({ valid: false, error: message });
    else io.stderr(`tollgate validate: ${message}\n`);
    return 2;
  };
  if (!['text', 'json', 'yaml'].includes(options.output)) {
    return fail(`--output must be text, json or yaml, got "${options.output}"`);
  }
  const now = options.now === undefined ? (io.clock ?? systemClock).now() : rfc3339(options.now);
  if (now === undefined) {
    return fail(`--now "${options.now}" is not an RFC 3339 time (e.g. 2030-01-01T00:00:00Z)`);
  }
  const remote = isRemoteGitUrl(location);
  if (!remote && options.ref !== undefined) return fail('--ref applies to a Git URL, not a folder');
  const ssh = sshAccessFor(location, options);
  if ('problem' in ssh) return fail(ssh.problem);
  if (options.rbac !== undefined && !existsSync(options.rbac))
    return fail(`--rbac ${options.rbac}: no such file`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location) && !remote) {
    return fail(`only http(s) and SSH Git URLs are supported, got ${location.split(':')[0]}://`);
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
      ...(ssh.access ? { ssh: ssh.access } : {}),
      ...(cacheDir ? { cacheDir } : {}),
      parseOn: 'caller',
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
        answer({
          valid: false,
          location: source.location,
          commit: outcome.commit,
          errors: outcome.errors,
        });
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
      const rules = shippedClusterRoleRules(options.rbac);
      const warnings = [
        ...approvalWarnings(policy, now),
        ...(rules ? referenceWarnings(policy, rules) : []),
        ...neverGatedWarnings(policy),
      ];
      if (json) {
        answer({
          valid: true,
          location: source.location,
          commit: policy.commit,
          ...counts,
          warnings,
        });
      } else {
        for (const w of warnings) io.stdout(`warning: ${formatPolicyError(w)}\n`);
        const warned =
          warnings.length === 0
            ? ''
            : `, ${warnings.length} warning${warnings.length === 1 ? '' : 's'}`;
        io.stdout(
          `${source.location}: valid at ${policy.commit} (${counts.tenants} tenants, ${counts.gatePolicies} gate policies, ${counts.resizePolicies} resize policies, ${counts.approvals} approvals)${warned}\n`,
        );
      }
      return 0;
    }
  }
}

export function registerValidate(program: Command): void {
  const command = program
    .command('validate')
    .description(
      'validate a policy folder or Git repository (exit 0 valid, 1 invalid, 2 usage or I/O error)',
    )
    .argument(
      '[location]',
      'policy folder, http(s) Git URL, or SSH one (with --git-ssh-key-file)',
      '.',
    )
    .option('--ref <ref>', 'branch or tag of a Git URL (default main)')
    .option('--path <path>', 'sub-folder that holds the policy')
    .option(
      '--git-token-env <name>',
      'environment variable holding the Git token (used when set)',
      'TOLLGATE_GIT_TOKEN',
    )
    .option('--git-token-file <path>', 'file holding the Git token')
    .option(
      '--rbac <file>',
      'YAML with the ClusterRole(s) tollgate runs with (e.g. kustomize build of your overlay): warn about ObjectCondition kinds they do not let it list and watch (default: the shipped deploy/base/rbac.yaml)',
    )
    .option(
      '--now <time>',
      'judge approvals at this RFC 3339 time instead of now (warns about those expired by then)',
    );
  withOutput(withSshOptions(command)).action(async (location: string, options: ValidateOptions) => {
    process.exitCode = await runValidate(location, options, {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
      env: process.env,
    });
  });
}
