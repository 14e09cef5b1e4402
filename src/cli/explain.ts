/**
 * `tollgate explain <namespace>/<pod>`: why a pod waits and when it would go, judged by
 * the gate-release phases (src/decide/explain.ts) on the live cluster with the policy in
 * a folder (a checkout of the policy repo). Needs only read access: list/watch of pods,
 * nodes and the objects ObjectConditions name (the same informers `tollgate run` uses).
 * Exit codes: 0 explained, 1 the pod is not gated by tollgate (or the policy is invalid),
 * 2 usage or I/O.
 */
import * as fs from 'node:fs';
import type { Command } from 'commander';
import git from 'isomorphic-git';
import { openAuditSource, walkAuditHistory } from '../audit/reader.ts';
import type { AuditRecord } from '../audit/record.ts';
import { gangReleasesOf, type GangReleases } from '../decide/release-gang-memory.ts';
import { createClusterView } from '../cluster/view.ts';
import {
  explainPods,
  explainReleasedPod,
  type BudgetView,
  type Explanation,
  type PodExplanation,
} from '../decide/explain.ts';
import type { ClusterSnapshot, PodLike } from '../decide/objects.ts';
import { formatPolicyError } from '../policy/errors.ts';
import { loadPolicyFromDirectory } from '../policy/load.ts';
import type { Policy } from '../policy/model.ts';
import { redactUrl } from '../observe/log.ts';
import { formatDuration } from '../lib/clock.ts';
import { managedNamespaces, referencedObjects } from '../run/view.ts';
import { clusterConfig, reachCluster, withCluster, type ClusterFlags } from './cluster-options.ts';
import { formatOutput, withOutput } from './output.ts';

export interface ExplainIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly now: () => number;
  /** Where $KUBECONFIG and HOME are read (default: the process's). */
  readonly env?: NodeJS.ProcessEnv;
}

export interface ClusterReadOptions extends ClusterFlags {
  readonly policyDir: string;
  /** The audit branch's repository (folder or URL) to take the pod's last decisions from. */
  readonly audit?: string;
  readonly auditBranch?: string;
  /** Audit commits walked back from the tip. */
  readonly auditCommits?: string;
  readonly output: string;
  /** How long to wait for the cluster view and referenced objects. */
  readonly syncTimeoutMs?: number;
}

export class UsageError extends Error {}

/** Where the policy explained against lives: its Git remote and commit, when the folder is a checkout. */
export interface PolicyCheckout {
  /** The `origin` remote (credentials removed), or the folder when there is none. */
  readonly location: string;
  /** HEAD's commit, or undefined for a folder that is no Git checkout (a content hash is used). */
  readonly commit: string | undefined;
}

export async function policyCheckout(dir: string): Promise<PolicyCheckout> {
  try {
    const root = await git.findRoot({ fs, filepath: dir });
    const commit = await git.resolveRef({ fs, dir: root, ref: 'HEAD' });
    const url = (await git.getConfig({ fs, dir: root, path: 'remote.origin.url' })) as
      string | undefined;
    return { location: url ? redactUrl(url) : dir, commit };
  } catch {
    return { location: dir, commit: undefined };
  }
}

export interface ClusterExplained {
  readonly policy: Policy;
  readonly checkout: PolicyCheckout;
  readonly explanations: Explanation[];
  /** The pod asked about, as the view had it (undefined when absent). */
  readonly target?: PodLike;
  /** The pod's audit trail, when a reader was given and the pod is in the view. */
  readonly trail?: PodTrail;
}

/** Reads the asked pod's audit trail (explain --audit). */
export type TrailReader = (pod: PodLike) => Promise<PodTrail>;

/** Loads the policy, lists the cluster read-only and explains every governed gated pod. */
export async function explainCluster(
  options: ClusterReadOptions,
  io: ExplainIo,
  target?: { namespace: string; name: string },
  readTrail?: TrailReader,
): Promise<ClusterExplained> {
  if (!['text', 'json', 'yaml'].includes(options.output))
    throw new UsageError(`-o must be text, json or yaml, got "${options.output}"`);
  const checkout = await policyCheckout(options.policyDir);
  const loaded = await loadPolicyFromDirectory(
    options.policyDir,
    checkout.commit ? { commit: checkout.commit } : {},
  );
  if (!loaded.ok) {
    for (const error of loaded.errors) io.stderr(`${formatPolicyError(error)}\n`);
    throw new UsageError(`${options.policyDir}: invalid policy`);
  }
  const policy = loaded.policy;
  const kubeConfig = clusterConfig(options, io.env ?? process.env, 'to read the pods from');
  await reachCluster(kubeConfig);
  const view = createClusterView({ kubeConfig, namespaces: managedNamespaces(policy) });
  const references = referencedObjects(policy);
  view.watchObjects(references);
  view.start();
  try {
    await view.whenSynced(AbortSignal.timeout(options.syncTimeoutMs ?? 30_000));
    await objectsListed(view, references, options.syncTimeoutMs ?? 30_000);
    const pod = target ? view.pod(target.namespace, target.name) : undefined;
    const trail = pod && readTrail ? await readTrail(pod) : undefined;
    return {
      policy,
      checkout,
      explanations: explainPods(policy, view, io.now(), trail?.gangReleases),
      ...(pod ? { target: pod } : {}),
      ...(trail ? { trail } : {}),
    };
  } catch (error) {
    if ((error as Error).name === 'TimeoutError' || (error as Error).name === 'AbortError')
      throw new UsageError('the cluster could not be listed in time (check --kubeconfig and RBAC)');
    throw error;
  } finally {
    await view.stop();
  }
}

/** Until every referenced object is listed or readably refused (its problem is then shown as the Hold reason). */
async function objectsListed(
  view: ClusterSnapshot,
  references: ReturnType<typeof referencedObjects>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (references.some((r) => /not (listed|watched) yet/.test(view.objectProblem?.(r) ?? ''))) {
    if (Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function auditCommitCount(text: string | undefined): number {
  const n = Number(text ?? 500);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--audit-commits must be a whole number above 0, got "${text}"`);
  return n;
}

/** One decision about the pod, as the audit branch holds it. */
export interface AuditedDecision {
  readonly at: string;
  readonly kind: string;
  readonly phase: string;
  readonly reason: string;
  readonly outcome: string;
}

/** What explain reads of a pod's audit trail. */
export interface PodTrail {
  /** Its last decisions, newest first. */
  readonly decisions: AuditedDecision[];
  /** When its release was decided with its whole gang (tollgate run's memory for a straggler). */
  readonly gangReleases: GangReleases;
}

const audited = (record: AuditRecord): AuditedDecision => ({
  at: new Date(record.at).toISOString(),
  kind: record.kind,
  phase: record.phase,
  reason: record.reason,
  outcome: record.outcome.result,
});

/**
 * The pod's last `keep` decisions (newest first) within the newest `commits` audit
 * commits, matched by uid, and, for a gated pod, whether its release was decided with
 * its whole gang: tollgate run remembers that for a gang's straggler, so explain reads
 * on past the decisions shown until it finds such a Release or the commits end. Reads
 * the audit branch only; a token comes from TOLLGATE_GIT_TOKEN for an http(s) location.
 */
export async function podTrail(
  location: string,
  branch: string,
  uid: string,
  commits: number,
  options: { readonly gated: boolean; readonly keep?: number },
): Promise<PodTrail> {
  const keep = options.keep ?? 5;
  const token = process.env.TOLLGATE_GIT_TOKEN?.trim() || undefined;
  const source = await openAuditSource(location, branch, token ? { token } : {});
  const decisions: AuditedDecision[] = [];
  let gangReleases: GangReleases = {};
  try {
    for await (const commit of walkAuditHistory(source, { limit: commits })) {
      const mine = commit.records.filter((r) => r.target.uid === uid).reverse();
      decisions.push(...mine.slice(0, keep - decisions.length).map(audited));
      if (options.gated) gangReleases = { ...gangReleasesOf(mine), ...gangReleases };
      const gangKnown = !options.gated || Object.hasOwn(gangReleases, uid);
      if (decisions.length >= keep && gangKnown) break;
    }
    return { decisions, gangReleases };
  } finally {
    source.close();
  }
}

export function formatDecisions(decisions: readonly AuditedDecision[]): string {
  const lines = ['Decisions:  (newest first, from the audit branch)'];
  if (decisions.length === 0) lines.push('  (none recorded in the commits read)');
  for (const d of decisions)
    lines.push(`  ${d.at} ${d.kind} (${d.phase}, ${d.outcome}): ${d.reason}`);
  const held = heldSince(decisions);
  if (held) lines.push(`Held:       for this reason since ${held.at} (the newest Hold decision)`);
  return `${lines.join('\n')}\n`;
}

/** The newest decision when it is a Hold: since when the pod waits for its current reason. */
export function heldSince(decisions: readonly AuditedDecision[]): AuditedDecision | undefined {
  return decisions[0]?.kind === 'Hold' ? decisions[0] : undefined;
}

const value = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** Where the policy came from, where the pod is in its life, and its own conditions. */
function podLines(e: PodExplanation, location: string): { source: string; life: string[] } {
  return {
    source: `Source:     ${location} at ${e.source.commit}: ${e.source.file}`,
    life: [
      `State:      ${e.life.state} since ${e.life.since ?? 'unknown'}: ${e.life.detail}`,
      'Pod conditions:',
      ...(e.podConditions.length === 0
        ? ['  (none shown)']
        : e.podConditions.map(
            (c) =>
              `  ${c.type} ${c.status}${c.reason ? ` (${c.reason})` : ''} since ${c.since ?? 'unknown'}`,
          )),
    ],
  };
}

/** Why released pods no longer take from the budget, when some do not. */
function notChargedText(budget: BudgetView): string {
  const { nodeNotReady, terminating } = budget.notCharged;
  const parts = [
    ...(nodeNotReady > 0
      ? [
          `${nodeNotReady} on nodes not Ready for ${formatDuration(budget.unreadyNodeGraceMs)} or more`,
        ]
      : []),
    ...(terminating > 0 ? [`${terminating} being deleted`] : []),
  ];
  return parts.length > 0 ? ` (not charged: ${parts.join(', ')})` : '';
}

/** A tenant charged above its pod limit (pods charged again when their node came back Ready). */
function overLimitText(budget: BudgetView): string {
  const { used, limit } = budget.pods;
  return limit !== null && used > limit
    ? ` (over its limit by ${used - limit}: no pod of the tenant is released until it is under it)`
    : '';
}

/** The text form of one explanation; stable, so it can be checked byte for byte. */
export function formatExplanation(e: Explanation, location: string): string {
  const pod = podLines(e, location);
  const lines = [
    `Pod:        ${e.pod}`,
    `Tenant:     ${e.tenant}`,
    `Policy:     ${e.policy ?? '(none selects it)'}`,
    pod.source,
    `Gate:       ${e.gate}`,
    `Gated:      since ${e.gatedSince ?? 'unknown'}`,
    ...pod.life,
    `Waiting:    ${e.waiting}: ${e.reason}`,
    `Order:      ${e.position} of ${e.queueLength} in tenant ${e.tenant}'s release order`,
    'Conditions:',
    ...(e.conditions.length === 0
      ? ['  (none judged)']
      : e.conditions.map(
          (c) => `  ${c.met ? 'met    ' : 'not met'} ${c.condition}: ${value(c.value)}`,
        )),
    `Budget:     pods ${e.budget.pods.used}/${e.budget.pods.limit ?? 'unlimited'}${Object.entries(
      e.budget.resources,
    )
      .map(([name, r]) => `, ${name} ${r.used}/${r.limit}`)
      .join('')}${overLimitText(e.budget)}${notChargedText(e.budget)}`,
    `Pacing:     ${
      e.pacing
        ? `${e.pacing.releasesPerSecond}/s, batch ${e.pacing.batchSize}, max in flight ${e.pacing.maxInFlight}`
        : '-'
    }`,
    `Expiry:     ${e.expiry ? `${e.expiry.deadline}, then ${e.expiry.action}` : 'none'}`,
    `Estimate:   ${e.estimate.releaseAt ?? 'unknown'} (${e.estimate.basis})`,
  ];
  return `${lines.join('\n')}\n`;
}

/** The text form of a pod tollgate no longer gates: where it is, and why it is not running yet. */
export function formatReleasedPod(e: PodExplanation, location: string): string {
  const pod = podLines(e, location);
  const lines = [
    `Pod:        ${e.pod}`,
    `Tenant:     ${e.tenant}`,
    "Gate:       none of tollgate's (released, or never gated)",
    pod.source,
    ...pod.life,
  ];
  return `${lines.join('\n')}\n`;
}

function splitTarget(target: string): { namespace: string; name: string } {
  const match = /^([^/]+)\/([^/]+)$/.exec(target);
  if (!match) throw new UsageError(`expected <namespace>/<pod>, got "${target}"`);
  return { namespace: match[1] as string, name: match[2] as string };
}

/** The gated pod's explanation, or the released pod's, or undefined outside every tenant. */
function explanationFor(
  explained: ClusterExplained,
  target: string,
): { gated: Explanation } | { released: PodExplanation } | undefined {
  const gated = explained.explanations.find((e) => e.pod === target);
  if (gated) return { gated };
  const released = explained.target && explainReleasedPod(explained.policy, explained.target);
  return released ? { released } : undefined;
}

export async function runExplain(
  target: string,
  options: ClusterReadOptions,
  io: ExplainIo,
): Promise<number> {
  try {
    const readTrail: TrailReader | undefined =
      options.audit === undefined
        ? undefined
        : (pod) =>
            podTrail(
              options.audit!,
              options.auditBranch ?? 'tollgate/audit',
              pod.metadata?.uid ?? '',
              auditCommitCount(options.auditCommits),
              { gated: (pod.spec?.schedulingGates ?? []).length > 0 },
            );
    const explained = await explainCluster(options, io, splitTarget(target), readTrail);
    const found = explanationFor(explained, target);
    if (!found) {
      io.stderr(
        `tollgate explain: ${target} is not a pod tollgate governs (not found, or in no tenant's namespace)\n`,
      );
      return 1;
    }
    const location = explained.checkout.location;
    const pod = 'gated' in found ? found.gated : found.released;
    const decisions = explained.trail?.decisions;
    const value = { ...pod, policySource: location, ...(decisions ? { decisions } : {}) };
    const text = () =>
      ('gated' in found
        ? formatExplanation(found.gated, location)
        : formatReleasedPod(found.released, location)) +
      (decisions ? formatDecisions(decisions) : '');
    io.stdout(formatOutput(options.output, value, text));
    return 0;
  } catch (error) {
    io.stderr(`tollgate explain: ${(error as Error).message}\n`);
    return 2;
  }
}

export function registerExplain(program: Command): void {
  const command = program
    .command('explain')
    .description('Why a gated pod waits and when it would be released (read-only)')
    .argument('<namespace/pod>', 'the pod')
    .option('--policy-dir <dir>', 'a checkout of the policy repository', '.')
    .option(
      '--audit <location>',
      "the audit repository (folder or URL; token in TOLLGATE_GIT_TOKEN): show the pod's last decisions",
    )
    .option('--audit-branch <branch>', 'the audit branch', 'tollgate/audit')
    .option('--audit-commits <n>', 'audit commits to read back from the tip', '500');
  withOutput(withCluster(command)).action(async (target: string, options: ClusterReadOptions) => {
    process.exitCode = await runExplain(target, options, {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
      now: () => Date.now(),
    });
  });
}
