/**
 * The observe-only history of ResizePolicies for `tollgate plan`: what tollgate recorded
 * it would have done (`mode: Observe`: decisions whose inputs carry `mode: Observe`), per
 * policy, from the audit trail. The way to judge a policy before switching it to `Act`
 * in the same pull request: how many would-be resizes, rollbacks and holds, and the
 * latest of them. Pure: the records are read by the caller.
 */
import type { Decision } from './decision.ts';

export interface ObservedPolicyHistory {
  readonly policy: string;
  /** Would-be decisions recorded for the policy. */
  readonly decisions: number;
  /** Epoch ms of the first and the last, when there are any. */
  readonly since?: number;
  readonly until?: number;
  /** Count per decision kind, kinds in name order. */
  readonly byKind: Readonly<Record<string, number>>;
  /** The newest `limit`, newest first. */
  readonly recent: readonly {
    readonly at: number;
    readonly pod: string;
    readonly kind: string;
    readonly reason: string;
  }[];
}

function observed(d: Pick<Decision, 'loop' | 'inputs'>): boolean {
  return (
    d.loop === 'resize' && d.inputs.some((i) => i.condition === 'mode' && i.value === 'Observe')
  );
}

/** Per named policy (in the order given), its observe-only decisions among `records`. */
export function observedHistory(
  records: readonly Pick<
    Decision,
    'id' | 'at' | 'loop' | 'kind' | 'target' | 'policy' | 'inputs' | 'reason'
  >[],
  policies: readonly string[],
  limit = 5,
): ObservedPolicyHistory[] {
  const seen = new Set<string>();
  const mine = records.filter((r) => {
    if (!observed(r) || seen.has(r.id)) return false;
    seen.add(r.id);
    return true;
  });
  return policies.map((policy) => {
    const list = mine.filter((r) => r.policy.name === policy).sort((a, b) => a.at - b.at);
    const byKind: Record<string, number> = {};
    for (const r of list) byKind[r.kind] = (byKind[r.kind] ?? 0) + 1;
    const first = list[0];
    const last = list.at(-1);
    return {
      policy,
      decisions: list.length,
      ...(first && last ? { since: first.at, until: last.at } : {}),
      byKind: Object.fromEntries(Object.entries(byKind).sort(([a], [b]) => (a < b ? -1 : 1))),
      recent: list
        .slice(-limit)
        .reverse()
        .map((r) => ({
          at: r.at,
          pod: `${r.target.namespace}/${r.target.name}`,
          kind: r.kind,
          reason: r.reason,
        })),
    };
  });
}

/** Text lines of one policy's observe-only history. */
export function observedLines(h: ObservedPolicyHistory): string[] {
  if (h.decisions === 0) return [`${h.policy}: no observe-only decision recorded yet`];
  const kinds = Object.entries(h.byKind)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ');
  return [
    `${h.policy}: ${h.decisions} would-be decision(s) from ${new Date(h.since ?? 0).toISOString()} to ${new Date(h.until ?? 0).toISOString()} (${kinds}); latest:`,
    ...h.recent.map((r) => `  ${new Date(r.at).toISOString()} ${r.pod} ${r.kind}: ${r.reason}`),
  ];
}
