/**
 * `tollgate plan` as a pure function: the difference between what one gate-release pass
 * would decide under the current (base) policy and under the proposed one, both run by
 * the loop's own `planReleases` on the same cluster snapshot, at the same instant and from
 * an empty plan state (so every gated pod gets a decision and nothing depends on what a
 * running controller happens to remember).
 *
 * Ordering is total and independent of map or list order in the input: pods by
 * namespace/name, tenants and policies by name. Two runs on the same cluster and policies
 * print the same bytes, which CI comments and golden files rely on.
 */
import type { Decision, DecisionKind } from './decision.ts';
import type { Policy } from '../policy/model.ts';
import { observedLines } from './plan-observed.ts';
import { planReleases, emptyPlanState, type PlanOptions } from './release-plan.ts';
import type { ClusterSnapshot } from './objects.ts';
import { describeResources, type ResizePlan } from './plan-resize.ts';

/** What a pass would do to one gated pod. */
export interface PodOutcome {
  readonly action: 'Release' | 'Hold' | 'Cancel' | 'Review';
  /** The gate has outlived its policy's expiry (an Expire decision precedes the action). */
  readonly expired: boolean;
  readonly reason: string;
  readonly tenant: string;
  readonly policy: string;
  /** Conditions not met, e.g. ["Budget"]. */
  readonly unmet: readonly string[];
}

export interface PodChange {
  readonly pod: string; // namespace/name
  readonly base: PodOutcome | undefined;
  readonly proposed: PodOutcome | undefined;
}

export interface TenantChange {
  readonly tenant: string;
  /** Pods released by one pass. */
  readonly releasedBase: number;
  readonly releasedProposed: number;
  /** Pods held because the tenant's budget is full. */
  readonly budgetHeldBase: number;
  readonly budgetHeldProposed: number;
  /** 'exceeded': more pods wait on the budget under the proposal; 'freed': fewer. */
  readonly budget: 'exceeded' | 'freed' | 'same';
}

export interface PlanDiff {
  readonly baseCommit: string;
  readonly proposedCommit: string;
  readonly pods: readonly PodChange[];
  /** Pods whose gate would expire under the proposal and not under the base. */
  readonly newExpiries: readonly string[];
  readonly tenants: readonly TenantChange[];
  /** Proposed gate policies that no gated pod falls under (selector or gate matches nothing). */
  readonly unmatchedPolicies: readonly string[];
  /** Counts of pods per proposed action, for a one-line summary. */
  readonly totals: Readonly<Record<PodOutcome['action'], number>>;
  /** Resize targets that change; absent when neither policy has a ResizePolicy. */
  readonly resize?: ResizePlan & { readonly note: string };
}

/** Said once in every output of a bounds-only plan, so nobody mistakes it for a usage-driven one. */
export const boundsOnlyNote =
  'Usage-driven resize targets were not computed: no Prometheus was given (--prometheus-url or TOLLGATE_PROMETHEUS_URL). ' +
  "Targets below are bounds-only: each pod's current requests brought inside its policy's min/max, " +
  'which tollgate applies at the next resize a signal triggers.';

export const usageNote =
  "Resize targets are usage-driven: one resize pass now, on the signals each policy's queries return from Prometheus over its window.";

/** Attaches the resize plan (pure; `planResize` computes it) with the note that says how it was computed. */
export function withResize(diff: PlanDiff, resize: ResizePlan): PlanDiff {
  return {
    ...diff,
    resize: { ...resize, note: resize.basis === 'usage' ? usageNote : boundsOnlyNote },
  };
}

const ACTIONS: ReadonlySet<DecisionKind> = new Set(['Release', 'Hold', 'Cancel', 'Review']);

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Pod key -> outcome, from one pass's decisions. */
export function outcomesOf(decisions: readonly Decision[]): Map<string, PodOutcome> {
  const expired = new Set<string>();
  const outcomes = new Map<string, PodOutcome>();
  for (const d of decisions) {
    const key = `${d.target.namespace}/${d.target.name}`;
    if (d.kind === 'Expire') expired.add(key);
    if (!ACTIONS.has(d.kind)) continue;
    outcomes.set(key, {
      action: d.kind as PodOutcome['action'],
      expired: false,
      reason: d.reason,
      tenant: d.tenant ?? '',
      policy: d.policy.name,
      unmet: d.inputs
        .filter((i) => !i.met)
        .map((i) => i.condition)
        .sort(byName),
    });
  }
  for (const key of expired) {
    const o = outcomes.get(key);
    if (o) outcomes.set(key, { ...o, expired: true });
  }
  return outcomes;
}

function sameOutcome(a: PodOutcome | undefined, b: PodOutcome | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.action === b.action &&
    a.expired === b.expired &&
    a.policy === b.policy &&
    a.unmet.join(',') === b.unmet.join(',')
  );
}

function tenantCounts(outcomes: Map<string, PodOutcome>): Map<string, [number, number]> {
  const counts = new Map<string, [number, number]>();
  for (const o of outcomes.values()) {
    const c = counts.get(o.tenant) ?? [0, 0];
    if (o.action === 'Release') c[0] += 1;
    if (o.action === 'Hold' && o.unmet.includes('Budget')) c[1] += 1;
    counts.set(o.tenant, c);
  }
  return counts;
}

export function diffPlans(
  base: Policy,
  proposed: Policy,
  snapshot: ClusterSnapshot,
  now: number,
  options: PlanOptions = {},
): PlanDiff {
  const before = outcomesOf(planReleases(base, snapshot, emptyPlanState, now, options).decisions);
  const after = outcomesOf(
    planReleases(proposed, snapshot, emptyPlanState, now, options).decisions,
  );

  const keys = [...new Set([...before.keys(), ...after.keys()])].sort(byName);
  const pods: PodChange[] = [];
  const newExpiries: string[] = [];
  const totals = { Release: 0, Hold: 0, Cancel: 0, Review: 0 };
  for (const pod of keys) {
    const b = before.get(pod);
    const p = after.get(pod);
    if (p) totals[p.action] += 1;
    if (!sameOutcome(b, p)) pods.push({ pod, base: b, proposed: p });
    if (p?.expired && !b?.expired) newExpiries.push(pod);
  }

  const cb = tenantCounts(before);
  const cp = tenantCounts(after);
  const tenants: TenantChange[] = [];
  for (const tenant of [...new Set([...cb.keys(), ...cp.keys()])].sort(byName)) {
    const [releasedBase, budgetHeldBase] = cb.get(tenant) ?? [0, 0];
    const [releasedProposed, budgetHeldProposed] = cp.get(tenant) ?? [0, 0];
    if (releasedBase === releasedProposed && budgetHeldBase === budgetHeldProposed) continue;
    tenants.push({
      tenant,
      releasedBase,
      releasedProposed,
      budgetHeldBase,
      budgetHeldProposed,
      budget:
        budgetHeldProposed > budgetHeldBase
          ? 'exceeded'
          : budgetHeldProposed < budgetHeldBase
            ? 'freed'
            : 'same',
    });
  }

  const used = new Set([...after.values()].map((o) => o.policy));
  const unmatchedPolicies = proposed.gatePolicies
    .map((g) => g.name)
    .filter((name) => !used.has(name))
    .sort(byName);

  return {
    baseCommit: base.commit,
    proposedCommit: proposed.commit,
    pods,
    newExpiries,
    tenants,
    unmatchedPolicies,
    totals,
  };
}

/** Whether CI should treat the plan as "changes": only what changes decisions counts. */
export function hasDifferences(diff: PlanDiff): boolean {
  return (
    diff.pods.length > 0 ||
    diff.tenants.length > 0 ||
    diff.newExpiries.length > 0 ||
    (diff.resize?.changes.length ?? 0) > 0
  );
}

function policyMove(base: string | null, proposed: string | null): string {
  if (base === proposed) return base ?? 'not managed';
  return `${base ?? 'not managed'} -> ${proposed ?? 'not managed'}`;
}

function uncoveredLine(resize: NonNullable<PlanDiff['resize']>): string[] {
  if (resize.uncovered.length === 0) return [];
  return [
    `Signals without data covering the window (they hold, targets stay current) for ${resize.uncovered.length} pod(s): ${resize.uncovered.join(', ')}`,
  ];
}

/** What each proposed ResizePolicy's resizes can do on the cluster's nodes. */
function featureLines(resize: NonNullable<PlanDiff['resize']>): string[] {
  return resize.features.flatMap((f) => f.lines.map((line) => `${f.policy}: ${line}`));
}

/** Observe-only policies' would-be decisions, when the plan read the audit trail. */
function observedText(resize: NonNullable<PlanDiff['resize']>): string[] {
  if (!resize.observed || resize.observed.length === 0) return [];
  return [
    'Observe-only ResizePolicies, what they would have done (audit trail):',
    ...resize.observed.flatMap(observedLines).map((l) => `  ${l}`),
  ];
}

function resizeText(resize: NonNullable<PlanDiff['resize']>): string[] {
  const features = featureLines(resize);
  const lines: string[] = [
    '',
    resize.note,
    ...uncoveredLine(resize),
    ...(features.length > 0
      ? ["In-place resize on this cluster's nodes:", ...features.map((l) => `  ${l}`)]
      : []),
    ...observedText(resize),
  ];
  if (resize.changes.length === 0) {
    lines.push(
      `No resize target changes (${resize.managedBase} -> ${resize.managedProposed} managed pods).`,
    );
    return lines;
  }
  lines.push(
    `Resize targets that change (${resize.changes.length}; ${resize.basis}; current -> base target -> proposed target):`,
  );
  for (const c of resize.changes) {
    lines.push(`  ${c.pod} [${policyMove(c.basePolicy, c.proposedPolicy)}]`);
    if (c.units.length === 0) lines.push('    no target changes');
    for (const u of c.units) {
      lines.push(
        `    ${u.unit}: ${describeResources(u.current)} -> ${describeResources(u.base)} -> ${describeResources(u.proposed)}`,
      );
    }
  }
  return lines;
}

function resizeMarkdown(resize: NonNullable<PlanDiff['resize']>): string[] {
  const lines: string[] = ['', `#### Resize targets that change (${resize.changes.length})`, ''];
  lines.push(`> ${resize.note}`);
  for (const line of uncoveredLine(resize)) lines.push('>', `> ${line}`);
  const features = featureLines(resize);
  if (features.length > 0) {
    lines.push('>', "> In-place resize on this cluster's nodes:");
    for (const line of features) lines.push(`> - \`${line.replace(/: /, '`: ')}`);
  }
  for (const line of observedText(resize)) lines.push('>', `> ${line.trimStart()}`);
  if (resize.changes.length === 0) {
    lines.push(
      '',
      `No resize target changes (${resize.managedBase} → ${resize.managedProposed} managed pods).`,
    );
    return lines;
  }
  lines.push(
    '',
    '| Pod | Policy | Unit | Current | Base target | Proposed target |',
    '| --- | --- | --- | --- | --- | --- |',
  );
  for (const c of resize.changes) {
    const policy = policyMove(c.basePolicy, c.proposedPolicy).replace(' -> ', ' → ');
    if (c.units.length === 0) lines.push(`| \`${c.pod}\` | ${policy} | | | | |`);
    for (const u of c.units) {
      lines.push(
        `| \`${c.pod}\` | ${policy} | ${u.unit} | ${describeResources(u.current)} | ${describeResources(u.base)} | ${describeResources(u.proposed)} |`,
      );
    }
  }
  return lines;
}

function describe(o: PodOutcome | undefined): string {
  if (!o) return 'not governed';
  const unmet = o.unmet.length > 0 ? ` (waiting on ${o.unmet.join(', ')})` : '';
  return `${o.expired ? 'expired, ' : ''}${o.action}${o.action === 'Hold' ? unmet : ''} [${o.policy}]`;
}

export function formatText(diff: PlanDiff): string {
  const lines: string[] = [
    `tollgate plan: base ${diff.baseCommit} -> proposed ${diff.proposedCommit}`,
  ];
  if (!hasDifferences(diff) && diff.unmatchedPolicies.length === 0) {
    lines.push('No changes: the proposed policy decides every gated pod as the base does.');
    if (diff.resize) lines.push(...resizeText(diff.resize));
    return `${lines.join('\n')}\n`;
  }
  if (diff.pods.length > 0) {
    lines.push('', `Pods whose decision changes (${diff.pods.length}):`);
    for (const c of diff.pods)
      lines.push(`  ${c.pod}: ${describe(c.base)} -> ${describe(c.proposed)}`);
  }
  if (diff.newExpiries.length > 0) {
    lines.push('', `Expiries that would fire (${diff.newExpiries.length}):`);
    for (const p of diff.newExpiries) lines.push(`  ${p}`);
  }
  if (diff.tenants.length > 0) {
    lines.push('', 'Tenants:');
    for (const t of diff.tenants) {
      lines.push(
        `  ${t.tenant}: released ${t.releasedBase} -> ${t.releasedProposed}, held by budget ${t.budgetHeldBase} -> ${t.budgetHeldProposed}${t.budget === 'same' ? '' : ` (budget ${t.budget})`}`,
      );
    }
  }
  if (diff.unmatchedPolicies.length > 0) {
    lines.push('', 'Gate policies that match no gated pod:');
    for (const p of diff.unmatchedPolicies) lines.push(`  ${p}`);
  }
  if (diff.resize) lines.push(...resizeText(diff.resize));
  const t = diff.totals;
  lines.push(
    '',
    `Proposed pass: ${t.Release} release, ${t.Hold} hold, ${t.Cancel} cancel, ${t.Review} review; ${diff.pods.length} pod decision(s) change${diff.resize ? `; ${diff.resize.changes.length} pod resize target(s) change (${diff.resize.basis})` : ''}.`,
  );
  return `${lines.join('\n')}\n`;
}

export function formatMarkdown(diff: PlanDiff): string {
  const lines: string[] = [
    `### tollgate plan`,
    '',
    `Base \`${diff.baseCommit}\` → proposed \`${diff.proposedCommit}\``,
  ];
  if (!hasDifferences(diff) && diff.unmatchedPolicies.length === 0) {
    lines.push('', 'No changes: the proposed policy decides every gated pod as the base does.');
    if (diff.resize) lines.push(...resizeMarkdown(diff.resize));
    return `${lines.join('\n')}\n`;
  }
  if (diff.pods.length > 0) {
    lines.push('', `#### Pods whose decision changes (${diff.pods.length})`, '');
    lines.push('| Pod | Base | Proposed |', '| --- | --- | --- |');
    for (const c of diff.pods) {
      lines.push(`| \`${c.pod}\` | ${describe(c.base)} | ${describe(c.proposed)} |`);
    }
  }
  if (diff.newExpiries.length > 0) {
    lines.push('', `#### Expiries that would fire (${diff.newExpiries.length})`, '');
    for (const p of diff.newExpiries) lines.push(`- \`${p}\``);
  }
  if (diff.tenants.length > 0) {
    lines.push('', '#### Tenants', '', '| Tenant | Released | Held by budget | Budget |');
    lines.push('| --- | --- | --- | --- |');
    for (const t of diff.tenants) {
      lines.push(
        `| ${t.tenant} | ${t.releasedBase} → ${t.releasedProposed} | ${t.budgetHeldBase} → ${t.budgetHeldProposed} | ${t.budget} |`,
      );
    }
  }
  if (diff.unmatchedPolicies.length > 0) {
    lines.push('', '#### Gate policies that match no gated pod', '');
    for (const p of diff.unmatchedPolicies) lines.push(`- \`${p}\``);
  }
  if (diff.resize) lines.push(...resizeMarkdown(diff.resize));
  return `${lines.join('\n')}\n`;
}
