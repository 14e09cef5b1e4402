/**
 * `tollgate plan --policy DIR|URL [--ref R] [--base REF|DIR] [--kubeconfig K]
 *  [--context C] [-o text|json|yaml|markdown] [--now ISO]`: what a policy change would do to the live
 * cluster before it is merged. Read-only: one list of pods and nodes, and one read of
 * each object an ObjectCondition names; no watch, no write, no lease.
 *
 * Both policies are judged by `planReleases` (the gate-release loop's own pure pass) on
 * the same snapshot at the same instant; `src/decide/plan-diff.ts` computes the
 * difference. Resize targets come from `src/decide/plan-resize.ts`: usage-driven (the
 * resize loop's own queries and `decidePodResize`) with `--prometheus-url` or
 * TOLLGATE_PROMETHEUS_URL (the names `tollgate run` uses), else bounds-only, said so in
 * the output. A Prometheus that cannot be reached or a query that fails is exit 2.
 *
 * Exit codes: 0 no difference, 1 the proposed policy is invalid (every error listed),
 * 2 usage or I/O error (including an invalid base), 3 differences found.
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import {
  CoreV1Api,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { clusterConfig, rootCause, unreachable, withCluster } from './cluster-options.ts';
import { fitToLength, formatOutput, isStructured, withOutput } from './output.ts';
import {
  diffPlans,
  formatMarkdown,
  formatText,
  hasDifferences,
  withResize,
} from '../decide/plan-diff.ts';
import {
  observeOnlyPolicies,
  planResize,
  type ResizePlan,
  type SignalsFor,
} from '../decide/plan-resize.ts';
import { observedHistory } from '../decide/plan-observed.ts';
import { openAuditSource, readAuditHistory } from '../audit/reader.ts';
import { neverGatedWarningsOfChange } from './budget-warnings.ts';
import {
  approvalHits,
  formatApprovalHits,
  groupApprovalsHittingNothing,
} from '../decide/approvals.ts';
import type { ResizeNodeLike, ResizePodLike } from '../decide/resize-objects.ts';
import { resizePodsByPolicy } from '../decide/resize-match.ts';
import { defaultStepMs, readResizeSignals, type ResizeReadings } from '../loops/resize-readings.ts';
import { createResizeApiProbe } from '../cluster/resize-api.ts';
import { podLevelProbeCandidate, type ApiResizeSupport } from '../decide/resize-features.ts';
import { createPrometheusClient, type PrometheusClient } from '../signals/prometheus.ts';
import { snapshotOf, type ObjectRefLike, type PodLike } from '../decide/objects.ts';
import { formatPolicyError } from '../policy/errors.ts';
import { isRemoteGitUrl } from '../policy/git.ts';
import type { SshAccess } from '../policy/git-ssh.ts';
import { sshAccessFor, withSshOptions, type SshFlags } from './ssh-options.ts';
import type { Policy } from '../policy/model.ts';
import { PolicyFetchError, PolicySource } from '../policy/source.ts';

export interface PlanOptions extends SshFlags {
  readonly policy?: string;
  readonly ref?: string;
  readonly base?: string;
  readonly path?: string;
  readonly kubeconfig?: string;
  readonly context?: string;
  readonly output: string;
  readonly now?: string;
  readonly gitTokenEnv: string;
  /** Prometheus for usage-driven resize targets (flag --prometheus-url or --prometheus). */
  readonly prometheusUrl?: string;
  readonly prometheus?: string;
  /** The audit trail (folder or http(s) URL) to show observe-only ResizePolicies' history from. */
  readonly audit?: string;
  /** Default `tollgate/audit`. */
  readonly auditBranch?: string;
  /** How far back that history goes, in days. Default 14. */
  readonly auditDays?: string;
  /** Cut text or markdown to this many characters (a code host's comment limit). */
  readonly maxChars?: string;
  /** Also write the whole rendering to this file (what --max-chars left out included). */
  readonly fullOutput?: string;
}

export interface PlanIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
  readonly now: () => number;
}

class UsageError extends Error {}

/** The credential a remote policy or audit repository is read with. */
interface RemoteAccess {
  readonly token?: string;
  readonly ssh?: SshAccess;
}

/** The audit trail's credential: the token, or the deploy key for an SSH URL. */
function auditAccess(options: PlanOptions, args: PlanArguments): RemoteAccess {
  const ssh = sshAccessFor(options.audit as string, options);
  if ('problem' in ssh) throw new UsageError(`--audit: ${ssh.problem}`);
  return {
    ...(args.remote.token ? { token: args.remote.token } : {}),
    ...(ssh.access ? { ssh: ssh.access } : {}),
  };
}

type Loaded =
  { kind: 'ok'; policy: Policy } | { kind: 'invalid'; location: string; errors: string[] };

async function loadPolicy(
  location: string,
  ref: string | undefined,
  path: string | undefined,
  access: RemoteAccess,
  now: number,
): Promise<Loaded> {
  const remote = isRemoteGitUrl(location);
  if (!remote) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location))
      throw new UsageError(`only http(s) and SSH Git URLs are supported, got ${location}`);
    if (!existsSync(location) || !statSync(location).isDirectory())
      throw new UsageError(`policy folder ${location} does not exist`);
  }
  const cacheDir = remote ? mkdtempSync(join(tmpdir(), 'tollgate-plan-')) : undefined;
  try {
    const source = new PolicySource({
      location,
      ...(remote && ref ? { ref } : {}),
      ...(path ? { path } : {}),
      ...(remote && access.token ? { token: access.token } : {}),
      ...(remote && access.ssh ? { ssh: access.ssh } : {}),
      ...(cacheDir ? { cacheDir } : {}),
      // A folder's approvals count as merged at --now (see policy/approval-times.ts).
      clock: { now: () => now },
    });
    const outcome = await source.poll();
    switch (outcome.kind) {
      case 'fetch-failed':
        throw new UsageError(outcome.error.message);
      case 'rejected':
        return {
          kind: 'invalid',
          location: source.location,
          errors: outcome.errors.map(formatPolicyError),
        };
      default:
        return { kind: 'ok', policy: source.current() as Policy };
    }
  } catch (error) {
    if (error instanceof PolicyFetchError) throw new UsageError(error.message);
    throw error;
  } finally {
    if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  }
}

/** Every object an ObjectCondition of either policy could read, resolved per tenant namespace. */
function referencedObjects(policies: readonly Policy[]): ObjectRefLike[] {
  const refs = new Map<string, ObjectRefLike>();
  for (const policy of policies) {
    for (const gp of policy.gatePolicies) {
      const namespaces = policy.tenants.get(gp.tenant)?.namespaces ?? [];
      for (const c of gp.conditions) {
        if (c.type !== 'ObjectCondition') continue;
        for (const namespace of c.object.namespace ? [c.object.namespace] : namespaces) {
          const ref = { ...c.object, namespace };
          refs.set(`${ref.apiVersion}/${ref.kind}/${namespace}/${ref.name}`, ref);
        }
      }
    }
  }
  return [...refs.values()];
}

/**
 * The signal readings of every pod each ResizePolicy of `policy` manages, read with the
 * loop's own queries. A failed query is an I/O error here, never "signals hold": a plan
 * that silently showed no resize because Prometheus was down would mislead the reviewer.
 */
async function signalsOf(
  prometheus: PrometheusClient,
  url: string,
  policy: Policy,
  pods: readonly ResizePodLike[],
  now: number,
): Promise<SignalsFor> {
  const byPolicy = new Map<string, ResizeReadings>();
  for (const [rp, mine] of resizePodsByPolicy(policy, pods)) {
    if (mine.length === 0) continue;
    const readings = await readResizeSignals(
      { prometheus, concurrency: 4 },
      rp,
      mine as Parameters<typeof readResizeSignals>[2],
      now,
      defaultStepMs(rp),
    );
    const failed =
      [...readings.readings.values()].flat().find((r) => r.error !== undefined)?.error ??
      [...readings.slo.values()].find((r) => r.error !== undefined)?.error;
    if (failed !== undefined)
      throw new UsageError(`Prometheus ${url}: ResizePolicy ${rp.name}: ${failed}`);
    byPolicy.set(rp.name, readings);
  }
  return (rp, podKey) => {
    const r = byPolicy.get(rp.name);
    const slo = r?.slo.get(podKey);
    return {
      readings: r?.readings.get(podKey) ?? [],
      ...(slo ? { slo } : {}),
      stepMs: defaultStepMs(rp),
    };
  };
}

function statusOf(error: unknown): number | undefined {
  const e = error as { code?: number; statusCode?: number; response?: { statusCode?: number } };
  return e.code ?? e.statusCode ?? e.response?.statusCode;
}

export async function runPlan(options: PlanOptions, io: PlanIo): Promise<number> {
  const output = options.output;
  try {
    const args = planArguments(options, io);
    const proposed = await loadPolicy(
      options.policy as string,
      options.ref,
      options.path,
      args.remote,
      args.now,
    );
    if (proposed.kind === 'invalid') return reportInvalidProposal(proposed, output, io);
    const base = await loadBase(options, args);
    const kc = clusterConfig(options, io.env, 'to compare with');
    const { pods, nodes } = await readCluster(kc);
    const policies = [base.policy, proposed.policy];
    const { objects, unserved } = await readReferencedObjects(kc, policies, output, io);
    const snapshot = {
      ...snapshotOf(pods, nodes, objects),
      objectProblem: (ref: ObjectRefLike) => unserved.get(kindKey(ref)),
    };
    let diff = diffPlans(base.policy, proposed.policy, snapshot, args.now);
    if (base.policy.resizePolicies.length + proposed.policy.resizePolicies.length > 0) {
      const running = pods as ResizePodLike[];
      const signals =
        args.prometheusUrl === undefined
          ? undefined
          : await resizeSignals(
              args.prometheusUrl,
              base.policy,
              proposed.policy,
              running,
              args.now,
            );
      const api = await askApiAboutResize(kc, proposed.policy, running, nodes);
      const resize = planResize(
        base.policy,
        proposed.policy,
        running,
        nodes,
        args.now,
        signals,
        api,
      );
      diff = withResize(diff, await withObservedHistory(resize, options, args, base, proposed));
    }
    const hits = approvalHits(proposed.policy, pods, args.now);
    const warnings = [
      ...neverGatedWarningsOfChange(base.policy, proposed.policy).map(formatPolicyError),
      ...groupApprovalsHittingNothing(proposed.policy, hits),
    ];
    if (!isStructured(output)) for (const w of warnings) io.stderr(`warning: ${w}\n`);
    const structured = {
      ...diff,
      ...(hits.length > 0 ? { approvals: hits } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
    emitPlan(
      formatOutput(output, structured, () =>
        output === 'markdown'
          ? formatMarkdown(diff) + formatApprovalHits(hits, true)
          : formatText(diff) + formatApprovalHits(hits, false),
      ),
      options,
      args,
      io,
    );
    return hasDifferences(diff) ? 3 : 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (isStructured(output)) io.stdout(formatOutput(output, { error: message }, () => ''));
    else io.stderr(`tollgate plan: ${message}\n`);
    return 2;
  }
}

/**
 * With `--audit`: the observe-only ResizePolicies' would-be decisions of the last
 * `--audit-days` days, read from the audit branch, attached to the resize plan.
 */
async function withObservedHistory(
  resize: ResizePlan,
  options: PlanOptions,
  args: PlanArguments,
  ...policies: { policy: Policy }[]
): Promise<ResizePlan> {
  const names = observeOnlyPolicies(...policies.map((p) => p.policy));
  if (options.audit === undefined || names.length === 0) return resize;
  const days = Number(options.auditDays ?? '14');
  if (!Number.isFinite(days) || days <= 0)
    throw new UsageError(`--audit-days must be a positive number, got "${options.auditDays}"`);
  const source = await openAuditSource(options.audit, options.auditBranch ?? 'tollgate/audit', {
    ...auditAccess(options, args),
  }).catch((error: unknown) => {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  });
  try {
    const commits = await readAuditHistory(source, { since: args.now - days * 86_400_000 });
    return {
      ...resize,
      observed: observedHistory(
        commits.flatMap((c) => c.records),
        names,
      ),
    };
  } finally {
    source.close();
  }
}

/** The whole rendering to --full-output, and to stdout cut to --max-chars. */
function emitPlan(rendered: string, options: PlanOptions, args: PlanArguments, io: PlanIo): void {
  if (options.fullOutput !== undefined) writeFileSync(options.fullOutput, rendered);
  io.stdout(
    args.maxChars === undefined
      ? rendered
      : fitToLength(
          rendered,
          args.maxChars,
          options.fullOutput ?? 'tollgate plan without --max-chars',
        ),
  );
}

/** What `plan`'s flags and environment mean, checked before anything is read. */
interface PlanArguments {
  readonly maxChars: number | undefined;
  readonly now: number;
  readonly baseIsDir: boolean;
  /** How the proposed repository (and the base, a ref of it) is reached. */
  readonly remote: RemoteAccess;
  readonly prometheusUrl: string | undefined;
}

function planArguments(options: PlanOptions, io: PlanIo): PlanArguments {
  if (!options.policy) throw new UsageError('--policy DIR|URL is required');
  if (!['text', 'json', 'yaml', 'markdown'].includes(options.output))
    throw new UsageError(`--output must be text, json, yaml or markdown, got "${options.output}"`);
  const maxChars = options.maxChars === undefined ? undefined : Number(options.maxChars);
  if (maxChars !== undefined && (!Number.isInteger(maxChars) || maxChars < 1000))
    throw new UsageError(
      `--max-chars must be a whole number of at least 1000, got "${options.maxChars}"`,
    );
  if (maxChars !== undefined && isStructured(options.output))
    throw new UsageError('--max-chars cuts text or markdown; json and yaml are never cut');
  const now = options.now === undefined ? io.now() : Date.parse(options.now);
  if (Number.isNaN(now)) throw new UsageError(`--now must be an ISO time, got "${options.now}"`);
  const remote = isRemoteGitUrl(options.policy);
  if (!remote && options.ref !== undefined)
    throw new UsageError('--ref applies to a Git URL, not a folder');
  // The base: a folder if one exists at that path, else a ref of the proposed repository.
  const baseIsDir = options.base !== undefined && existsSync(options.base);
  if (!remote && !baseIsDir)
    throw new UsageError('a policy folder needs --base DIR (the policy currently in force)');
  const token = remote ? io.env[options.gitTokenEnv]?.trim() || undefined : undefined;
  const ssh = sshAccessFor(options.policy, options);
  if ('problem' in ssh) throw new UsageError(ssh.problem);
  if (options.prometheus !== undefined && options.prometheusUrl !== undefined)
    throw new UsageError('give --prometheus-url or --prometheus, not both');
  const prometheusUrl =
    options.prometheusUrl ??
    options.prometheus ??
    (io.env.TOLLGATE_PROMETHEUS_URL?.trim() || undefined);
  if (prometheusUrl !== undefined && !/^https?:\/\/[^/]/i.test(prometheusUrl))
    throw new UsageError(`--prometheus-url must be an http(s) URL, got "${prometheusUrl}"`);
  return {
    maxChars,
    now,
    baseIsDir,
    remote: { ...(token ? { token } : {}), ...(ssh.access ? { ssh: ssh.access } : {}) },
    prometheusUrl,
  };
}

/** An invalid proposal is the plan's answer (exit 1), each error naming file and field. */
function reportInvalidProposal(
  proposed: Extract<Loaded, { kind: 'invalid' }>,
  output: string,
  io: PlanIo,
): number {
  if (isStructured(output)) {
    const answer = { valid: false, location: proposed.location, errors: proposed.errors };
    io.stdout(formatOutput(output, answer, () => ''));
  } else {
    for (const e of proposed.errors) io.stdout(`${e}\n`);
    io.stdout(
      `${proposed.location}: proposed policy invalid, ${proposed.errors.length} error(s)\n`,
    );
  }
  return 1;
}

/** The policy in force: a folder, or a ref of the proposed repository; it must be valid. */
async function loadBase(
  options: PlanOptions,
  args: PlanArguments,
): Promise<Extract<Loaded, { kind: 'ok' }>> {
  const base = args.baseIsDir
    ? await loadPolicy(options.base as string, undefined, options.path, {}, args.now)
    : await loadPolicy(
        options.policy as string,
        options.base ?? 'main',
        options.path,
        args.remote,
        args.now,
      );
  if (base.kind === 'invalid') {
    throw new UsageError(
      `base policy ${base.location} is invalid (${base.errors.length} error(s)): ${base.errors[0]}`,
    );
  }
  return base;
}

/** Every pod and node, or one error naming the context, server and cause. */
async function readCluster(kc: KubeConfig) {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    const pods = (await core.listPodForAllNamespaces()).items as PodLike[];
    const nodes = (await core.listNode()).items;
    return { pods, nodes };
  } catch (error) {
    throw new UsageError(unreachable(kc, error));
  }
}

const kindKey = (ref: ObjectRefLike) => `${ref.kind}.${ref.apiVersion}`;

/**
 * The objects both policies' ObjectConditions name. Kinds the API server does not serve:
 * their objects cannot be judged, so pods whose condition names them hold "unreadable",
 * and the reviewer is told, once per kind. An absent object is a legitimate state an
 * ObjectCondition judges (not met); anything else is an I/O error.
 */
async function readReferencedObjects(
  kc: KubeConfig,
  policies: readonly Policy[],
  output: string,
  io: PlanIo,
): Promise<{ objects: (ObjectRefLike & { object: unknown })[]; unserved: Map<string, string> }> {
  const objectsApi = KubernetesObjectApi.makeApiClient(kc);
  const objects: (ObjectRefLike & { object: unknown })[] = [];
  const unserved = new Map<string, string>();
  for (const ref of referencedObjects(policies)) {
    if (unserved.has(kindKey(ref))) continue;
    try {
      const object = await objectsApi.read({
        apiVersion: ref.apiVersion,
        kind: ref.kind,
        metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
      } as KubernetesObject & { metadata: { name: string } });
      objects.push({ ...ref, object });
    } catch (error) {
      if (/Failed to fetch resource metadata/.test((error as Error).message)) {
        const problem = `${kindKey(ref)} is not served by the API server (a typo, or its CRD is not installed): pods whose ObjectCondition names it hold as unreadable`;
        unserved.set(kindKey(ref), problem);
        if (!isStructured(output)) io.stderr(`warning: ${problem}\n`);
        continue;
      }
      if (statusOf(error) !== 404)
        throw new UsageError(
          `cannot read ${ref.kind} ${ref.namespace ?? ''}/${ref.name}: ${(error as Error).message}`,
        );
    }
  }
  return { objects, unserved };
}

/** Both policies' resize signals from Prometheus, probed first so an unreachable one is an error. */
/**
 * What the API server answers about resize, asked as the plan's user: discovery of
 * pods/resize and a server-side dry-run of a pod-level resize (nothing is stored; without
 * the permission the answer is unknown, said so in the plan).
 */
async function askApiAboutResize(
  kc: KubeConfig,
  policy: Policy,
  pods: readonly ResizePodLike[],
  nodes: readonly ResizeNodeLike[],
): Promise<ApiResizeSupport> {
  const candidate = podLevelProbeCandidate(resizePodsByPolicy(policy, pods), nodes);
  return createResizeApiProbe(kc)(candidate);
}

async function resizeSignals(
  prometheusUrl: string,
  base: Policy,
  proposed: Policy,
  running: readonly ResizePodLike[],
  now: number,
): Promise<{ base: SignalsFor; proposed: SignalsFor }> {
  const prometheus = createPrometheusClient({ url: prometheusUrl });
  // One probe first, so an unreachable Prometheus is an error even when no pod is managed.
  try {
    await prometheus.instant('vector(1)');
  } catch (error) {
    throw new UsageError(`Prometheus ${prometheusUrl} unreachable: ${rootCause(error)}`);
  }
  return {
    base: await signalsOf(prometheus, prometheusUrl, base, running, now),
    proposed: await signalsOf(prometheus, prometheusUrl, proposed, running, now),
  };
}

export function registerPlan(program: Command): void {
  const command = program
    .command('plan')
    .description(
      'show what a proposed policy would change on the live cluster (exit 0 no change, 1 invalid, 2 usage/I/O, 3 changes)',
    )
    .option(
      '--policy <location>',
      'proposed policy: folder, http(s) Git URL, or SSH one (with --git-ssh-key-file)',
    )
    .option('--ref <ref>', 'branch, tag or commit of the proposed policy in a Git URL')
    .option(
      '--base <ref|dir>',
      'policy in force: a folder, or a ref of the same repository (default main)',
    )
    .option('--path <path>', 'sub-folder that holds the policy')
    .option('--now <iso>', 'judge expiries at this instant instead of the current time')
    .option(
      '--max-chars <n>',
      "cut text or markdown to n characters at a line, saying so (a code host's comment limit)",
    )
    .option('--full-output <file>', 'also write the whole rendering to this file')
    .option(
      '--prometheus-url <url>',
      'Prometheus HTTP API for usage-driven resize targets (default $TOLLGATE_PROMETHEUS_URL; without it, bounds only)',
    )
    .option('--prometheus <url>', 'same as --prometheus-url')
    .option(
      '--audit <location>',
      'audit trail (folder, http(s) or SSH Git URL) to show what observe-only ResizePolicies would have done',
    )
    .option('--audit-branch <name>', 'branch of the audit trail', 'tollgate/audit')
    .option('--audit-days <n>', 'how many days of observe-only history to show', '14')
    .option(
      '--git-token-env <name>',
      'environment variable holding the Git token',
      'TOLLGATE_GIT_TOKEN',
    );
  withOutput(withSshOptions(withCluster(command)), ['markdown']).action(
    async (options: PlanOptions) => {
      process.exitCode = await runPlan(options, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
        env: process.env,
        now: () => Date.now(),
      });
    },
  );
}
