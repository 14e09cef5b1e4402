/**
 * `tollgate audit log | show | verify`: read the audit branch from a clone folder or a
 * remote URL. Exit codes: 0 ok, 1 verify found problems, 2 usage or I/O error.
 *
 * The token (for a URL) comes from an environment variable (default
 * TOLLGATE_GIT_TOKEN) or a file, never from a flag, and never appears in output.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DigestSpillError } from '../audit/digest-set.ts';
import type { Command } from 'commander';
import { decisionKinds } from '../decide/decision.ts';
import { parseDuration } from '../lib/clock.ts';
import {
  openAuditSource,
  readAuditCommit,
  readAuditHistory,
  walkAuditHistory,
  type AuditCommit,
  type AuditSource,
} from '../audit/reader.ts';
import { parseAllowedSigners, type AllowedSigner } from '../audit/sign.ts';
import {
  TrailVerifier,
  type PodSnapshot,
  type VerifyOptions,
  type VerifyReport,
} from '../audit/verify.ts';
import type { ClusterFlags } from './cluster-options.ts';
import { formatOutput, isStructured, withOutput } from './output.ts';
import { redactUrl } from '../observe/log.ts';
import { sshAccessFor, withSshOptions, type SshFlags } from './ssh-options.ts';

interface SourceOptions extends SshFlags {
  readonly repo?: string;
  readonly branch: string;
  readonly gitTokenEnv: string;
  readonly gitTokenFile?: string;
  readonly output: string;
}

class UsageError extends Error {}

function outputFormat(value: string): 'text' | 'json' | 'yaml' {
  if (value !== 'text' && value !== 'json' && value !== 'yaml')
    throw new UsageError(`--output must be text, json or yaml, got "${value}"`);
  return value;
}

/** "2026-11-29T07:00:00Z", "2026-11-29", or a duration back from now ("2h", "7d"). */
export function parseSince(text: string, now: number): number {
  if (/^\d+(\.\d+)?(ms|s|m|h|d)/.test(text)) return now - parseDuration(text);
  const time = Date.parse(text);
  if (Number.isNaN(time))
    throw new UsageError(
      `--since "${text}" is neither a time (2026-11-29T07:00:00Z) nor a duration back from now (2h, 7d)`,
    );
  return time;
}

async function open(options: SourceOptions): Promise<AuditSource> {
  const location = options.repo ?? process.env.TOLLGATE_AUDIT_REPO;
  if (!location) throw new UsageError('give --repo URL|DIR (or set TOLLGATE_AUDIT_REPO)');
  const ssh = sshAccessFor(location, options);
  if ('problem' in ssh) throw new UsageError(ssh.problem);
  // log, show and verify walk the history: objects through the system git when it is there.
  if (ssh.access)
    return openAuditSource(location, options.branch, { ssh: ssh.access, systemGit: true });
  let token: string | undefined;
  if (options.gitTokenFile) {
    try {
      token = readFileSync(options.gitTokenFile, 'utf8').trim();
    } catch (error) {
      throw new Error(
        `--git-token-file ${options.gitTokenFile}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
        { cause: error },
      );
    }
  } else {
    token = process.env[options.gitTokenEnv] || undefined;
  }
  return openAuditSource(location, options.branch, {
    systemGit: true,
    ...(token === undefined ? {} : { token }),
  });
}

function withSourceOptions(command: Command): Command {
  command
    .option(
      '--repo <url|dir>',
      'audit repository URL (http(s), or SSH with --git-ssh-key-file) or a local clone folder (default $TOLLGATE_AUDIT_REPO)',
    )
    .option('--branch <name>', 'audit branch', 'tollgate/audit')
    .option(
      '--git-token-env <name>',
      'environment variable holding the Git token',
      'TOLLGATE_GIT_TOKEN',
    )
    .option('--git-token-file <path>', 'file holding the Git token');
  return withOutput(withSshOptions(command));
}

const time = (ms: number): string => new Date(ms).toISOString();

function describeRecordText(record: AuditCommit['records'][number]): string {
  const outcome =
    record.outcome.result + ('message' in record.outcome ? `: ${record.outcome.message}` : '');
  return `  ${time(record.at)} ${record.phase.padEnd(7)} ${record.kind.padEnd(10)} ${record.target.namespace}/${record.target.name} [${outcome}] ${record.reason} (${record.id})`;
}

export function registerAudit(program: Command): void {
  const audit = program
    .command('audit')
    .description('read and verify the audit trail of decisions in Git');

  withSourceOptions(audit.command('log'))
    .description('list audit records, newest commit last')
    .option('--pod <ns/name>', 'only records about this pod')
    .option('--since <time>', 'only commits since a time or a duration back (2h, 7d)')
    .option('--kind <kind>', `only this decision kind (${decisionKinds.join(', ')})`)
    .action(auditLog);

  withSourceOptions(audit.command('show').argument('<commit>', 'commit id (full or abbreviated)'))
    .description('show one audit commit: message, files and records')
    .action(auditShow);

  withSourceOptions(audit.command('verify'))
    .description(
      'check the trail: every intent has exactly one outcome after it, no record twice, the chain is intact, signatures (with --allowed-signers), every released pod has a Release decision (with --kubeconfig)',
    )
    .option(
      '--kubeconfig <path>',
      'also check the pods in this cluster (or give --context: $KUBECONFIG, else ~/.kube/config)',
    )
    .option('--context <name>', 'also check the pods in the cluster of this kubeconfig context')
    .option('--grace <duration>', 'intents younger than this may still be in flight', '0s')
    .option(
      '--since <time>',
      'only commits since a time or a duration back (the chain check then starts there)',
    )
    .option(
      '--allowed-signers <file>',
      'SSH allowed-signers file (git gpg.ssh.allowedSignersFile format); every commit must be signed by one of its keys',
    )
    .action(auditVerify);
}

/** `tollgate audit log`: records by commit, filtered by pod and decision kind. */
async function auditLog(
  options: SourceOptions & { pod?: string; since?: string; kind?: string },
): Promise<void> {
  const format = outputFormat(options.output);
  if (options.kind && !(decisionKinds as readonly string[]).includes(options.kind)) {
    throw new UsageError(
      `--kind "${options.kind}" is not a decision kind (${decisionKinds.join(', ')})`,
    );
  }
  if (options.pod && !/^[^/]+\/[^/]+$/.test(options.pod))
    throw new UsageError(`--pod "${options.pod}" must be NAMESPACE/NAME`);
  const since = options.since ? parseSince(options.since, Date.now()) : undefined;
  const source = await open(options);
  try {
    const history = await readAuditHistory(source, since === undefined ? {} : { since });
    const entries = history
      .map((commit) => ({
        commit,
        records: commit.records.filter(
          (record) =>
            (!options.kind || record.kind === options.kind) &&
            (!options.pod || `${record.target.namespace}/${record.target.name}` === options.pod),
        ),
      }))
      .filter((entry) => entry.records.length > 0 || (!options.kind && !options.pod));
    if (isStructured(format)) {
      const out = entries.map(({ commit, records }) => ({
        commit: commit.oid,
        committedAt: time(commit.committedAt * 1000),
        summary: commit.summary,
        trailers: Object.fromEntries(commit.trailers),
        records,
      }));
      process.stdout.write(formatOutput(format, out, () => ''));
      return;
    }
    for (const { commit, records } of entries) {
      process.stdout.write(
        `${commit.oid.slice(0, 12)} ${time(commit.committedAt * 1000)} ${commit.summary}\n`,
      );
      for (const record of records) process.stdout.write(`${describeRecordText(record)}\n`);
    }
    if (entries.length === 0)
      process.stdout.write(`no audit records in ${redactUrl(source.description)}\n`);
  } finally {
    source.close();
  }
}

/** `tollgate audit show`: one audit commit, its message, files and records. */
async function auditShow(commitId: string, options: SourceOptions): Promise<void> {
  const format = outputFormat(options.output);
  const source = await open(options);
  try {
    const commit = await readAuditCommit(source, commitId);
    if (isStructured(format)) {
      const shown = { ...commit, trailers: Object.fromEntries(commit.trailers) };
      process.stdout.write(formatOutput(format, shown, () => ''));
      return;
    }
    process.stdout.write(
      `commit ${commit.oid}\nAuthor: ${commit.author.name} <${commit.author.email}>\nDate:   ${time(commit.author.timestamp * 1000)}\n\n`,
    );
    process.stdout.write(`${commit.message.replace(/^/gm, '    ')}\n`);
    for (const change of commit.changes) process.stdout.write(`${change.change} ${change.path}\n`);
    for (const record of commit.records) process.stdout.write(`${describeRecordText(record)}\n`);
    for (const error of commit.errors) process.stdout.write(`error: ${error}\n`);
  } finally {
    source.close();
  }
}

/** `tollgate audit verify`: the integrity check; exit 1 on any problem. */
async function auditVerify(options: VerifyCommandOptions): Promise<void> {
  const format = outputFormat(options.output);
  const verifyOptions = await verifyOptionsFrom(options);
  const source = await open(options);
  try {
    const report = await verifySource(source, options.branch, verifyOptions);
    process.stdout.write(formatOutput(format, report, () => verifyText(report, verifyOptions)));
    if (!report.ok) process.exitCode = 1;
  } finally {
    source.close();
  }
}

interface VerifyCommandOptions extends SourceOptions, ClusterFlags {
  readonly grace: string;
  readonly since?: string;
  readonly allowedSigners?: string;
}

type CliVerifyOptions = VerifyOptions & { readonly since?: number };

async function verifyOptionsFrom(options: VerifyCommandOptions): Promise<CliVerifyOptions> {
  let graceMs: number;
  try {
    graceMs = parseDuration(options.grace);
  } catch (error) {
    throw new UsageError(`--grace: ${(error as Error).message}`);
  }
  const now = Date.now();
  const since = options.since ? parseSince(options.since, now) : undefined;
  let allowedSigners: AllowedSigner[] | undefined;
  if (options.allowedSigners) {
    let text: string;
    try {
      text = readFileSync(options.allowedSigners, 'utf8');
    } catch (error) {
      throw new Error(
        `--allowed-signers ${options.allowedSigners}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
        { cause: error },
      );
    }
    allowedSigners = parseAllowedSigners(text, options.allowedSigners);
    if (allowedSigners.length === 0)
      throw new UsageError(`--allowed-signers ${options.allowedSigners} lists no key`);
  }
  return {
    now,
    graceMs,
    partial: since !== undefined,
    ...(since === undefined ? {} : { since }),
    ...(allowedSigners ? { allowedSigners } : {}),
    ...(options.kubeconfig !== undefined || options.context !== undefined
      ? { pods: await listPods(options) }
      : {}),
  };
}

/** Every pod of the cluster given by --kubeconfig/--context, for the Release check. */
async function listPods(flags: ClusterFlags): Promise<PodSnapshot[]> {
  // The Kubernetes client loads only here: a verify of the trail alone does without it.
  const { clusterConfig, unreachable } = await import('./cluster-options.ts');
  const { CoreV1Api } = await import('@kubernetes/client-node');
  const kc = clusterConfig(flags, process.env, 'to check the pods of');
  let list;
  try {
    list = await kc.makeApiClient(CoreV1Api).listPodForAllNamespaces();
  } catch (error) {
    throw new Error(unreachable(kc, error), { cause: error });
  }
  return list.items.map((pod) => ({
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    schedulingGates: (pod.spec?.schedulingGates ?? []).map((gate) => gate.name),
  }));
}

/**
 * Streams the branch from its tip through the verifier. A missing branch and a commit
 * that cannot be read are problems (exit 1), not usage errors: the trail is what is broken.
 */
export async function verifySource(
  source: AuditSource,
  branch: string,
  options: CliVerifyOptions,
): Promise<VerifyReport> {
  const spillDir = options.spill === undefined ? digestFolder() : undefined;
  try {
    return await verifyInto(
      new TrailVerifier(
        spillDir === undefined ? options : { ...options, spill: { dir: spillDir } },
      ),
      source,
      branch,
      options,
    );
  } finally {
    if (spillDir !== undefined) rmSync(spillDir, { recursive: true, force: true });
  }
}

/**
 * A new folder under the system's temporary folder for the digests verify does not keep in
 * memory (a history of any length is then verified in the same memory); without one
 * (no writable temporary folder), every digest stays in memory, and stderr says so.
 */
function digestFolder(): string | undefined {
  try {
    return mkdtempSync(join(tmpdir(), 'tollgate-verify-'));
  } catch (error) {
    process.stderr.write(
      `tollgate audit verify: no folder for its digests under ${tmpdir()} (${(error as Error).message}); every digest is kept in memory (set TMPDIR to a writable folder)\n`,
    );
    return undefined;
  }
}

async function verifyInto(
  verifier: TrailVerifier,
  source: AuditSource,
  branch: string,
  options: CliVerifyOptions,
): Promise<VerifyReport> {
  if (source.tip === undefined) {
    verifier.problem({
      check: 'branch',
      message: `branch ${branch} not found in ${redactUrl(source.description)}`,
    });
    return verifier.finish();
  }
  let last: string | undefined = source.tip;
  try {
    for await (const commit of walkAuditHistory(
      source,
      options.since === undefined ? {} : { since: options.since },
    )) {
      verifier.add(commit);
      last = commit.parents[0];
    }
  } catch (error) {
    // Verify's own folder failing is not the trail's fault: said as an error, not a problem.
    if (error instanceof DigestSpillError) throw error;
    verifier.problem({
      check: 'chain',
      ...(last === undefined ? {} : { commit: last }),
      message: `commit ${last?.slice(0, 12) ?? '?'} cannot be read: ${(error as Error).message}`,
    });
  }
  return verifier.finish();
}

function verifyText(report: VerifyReport, options: CliVerifyOptions): string {
  const counts = [
    `${report.commits} commits`,
    `${report.records} records`,
    `${report.intents} intents`,
    `${report.outcomes} outcomes`,
    ...(report.unknownOutcomes > 0
      ? [
          `${report.unknownOutcomes} of them unknown (recovery could not tell whether the write was applied: pod gone; see \`tollgate audit log\`)`,
        ]
      : []),
    ...(options.pods ? [`${report.podsChecked} released pods checked`] : []),
    ...(options.allowedSigners ? [`${report.signaturesChecked} signatures checked`] : []),
  ];
  const lines = [`${report.ok ? 'ok' : 'FAILED'}: ${counts.join(', ')}`];
  for (const problem of report.problems) lines.push(`  [${problem.check}] ${problem.message}`);
  if (report.problemCount > report.problems.length)
    lines.push(`  ... and ${report.problemCount - report.problems.length} more problems`);
  return `${lines.join('\n')}\n`;
}
