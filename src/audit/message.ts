/**
 * Commit messages of the audit branch: pure and deterministic, so the same batch always
 * reads the same way in `git log` and tests can pin the exact text.
 *
 *   release 120 pods in team-a, team-b; expire 3; resize 2
 *
 *   Tollgate-Policy: 3f2a...
 *   Tollgate-Controller: tollgate-7d9f-abcde
 *   Tollgate-Cluster: prod-eu
 *   Tollgate-Decisions: 125
 *   Tollgate-Batch: intents
 *
 * Kinds appear in the order of `decisionKinds`, tenants alphabetically, policy commits
 * sorted. An outcome batch adds the results per kind, e.g. "release 3 pods in team-a
 * (2 succeeded, 1 conflict)". Trailers are in git's `Key: value` form so
 * `git log --format=%(trailers:key=Tollgate-Policy)` works.
 */
import { decisionKinds, type Decision, type DecisionKind } from '../decide/decision.ts';
import { batchKinds, batchOf, phaseOf, type BatchKind } from './record.ts';

export interface MessageContext {
  readonly batch: BatchKind;
  readonly controller: string;
  readonly cluster: string;
}

export const trailerKeys = {
  policy: 'Tollgate-Policy',
  controller: 'Tollgate-Controller',
  cluster: 'Tollgate-Cluster',
  decisions: 'Tollgate-Decisions',
  batch: 'Tollgate-Batch',
} as const;

const resultOrder = [
  'pending',
  'succeeded',
  'conflict',
  'failed',
  'expired',
  'cancelled',
  'unknown',
  'recorded',
] as const;

function sortedUnique(values: Iterable<string>): string[] {
  return [...new Set(values)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function describeKind(
  kind: DecisionKind,
  decisions: readonly Decision[],
  batch: BatchKind,
): string {
  const count = decisions.length;
  const verb = kind.toLowerCase();
  let text: string;
  if (kind === 'Release' || kind === 'Hold' || kind === 'Cancel') {
    text = `${verb} ${count} ${count === 1 ? 'pod' : 'pods'}`;
    const tenants = sortedUnique(
      decisions.flatMap((decision) => (decision.tenant ? [decision.tenant] : [])),
    );
    if (tenants.length > 0) text += ` in ${tenants.join(', ')}`;
  } else {
    text = `${verb} ${count}`;
  }
  if (batch === 'outcomes') {
    const byResult = new Map<string, number>();
    for (const decision of decisions)
      byResult.set(decision.outcome.result, (byResult.get(decision.outcome.result) ?? 0) + 1);
    const results = resultOrder
      .filter((result) => byResult.has(result))
      .map((result) => `${byResult.get(result)} ${result}`);
    text += ` (${results.join(', ')})`;
  }
  return text;
}

/** The summary line alone. */
export function summaryLine(decisions: readonly Decision[], batch: BatchKind): string {
  const byKind = new Map<DecisionKind, Decision[]>();
  for (const decision of decisions) {
    const list = byKind.get(decision.kind) ?? [];
    list.push(decision);
    byKind.set(decision.kind, list);
  }
  const parts = decisionKinds
    .filter((kind) => byKind.has(kind))
    .map((kind) => describeKind(kind, byKind.get(kind) ?? [], batch));
  return parts.length > 0 ? parts.join('; ') : 'no decisions';
}

/** Summary, a blank line, trailers; ends with a newline as git writes it. */
export function commitMessage(decisions: readonly Decision[], context: MessageContext): string {
  if (decisions.length === 0)
    throw new Error('an audit commit needs at least one decision (no empty commits)');
  for (const [name, value] of [
    ['controller', context.controller],
    ['cluster', context.cluster],
  ] as const) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(value)) {
      throw new Error(
        `audit ${name} identity "${value}" must be letters, digits, '.', '_' or '-' (it is used in paths and trailers)`,
      );
    }
  }
  const trailers = [
    ...sortedUnique(decisions.map((decision) => decision.policy.commit)).map(
      (sha) => `${trailerKeys.policy}: ${sha}`,
    ),
    `${trailerKeys.controller}: ${context.controller}`,
    `${trailerKeys.cluster}: ${context.cluster}`,
    `${trailerKeys.decisions}: ${decisions.length}`,
    `${trailerKeys.batch}: ${context.batch}`,
  ];
  return `${summaryLine(decisions, context.batch)}\n\n${trailers.join('\n')}\n`;
}

/**
 * The message of a commit rebuilt from leftover records (leftovers.ts
 * `rebuiltCommits`): the batch comes from the records' phases, not from the commits they
 * were left in. Records of one batch kind give exactly the writer's own message. Several
 * consecutive leftover commits merged into one file hold several kinds: the summary is
 * each kind's summary in the order intents, outcomes, records, joined by "; ", and
 * there is one `Tollgate-Batch` trailer per kind, in that order (a repeated trailer, as
 * `Tollgate-Policy` is). `Tollgate-Decisions` counts the file's records either way.
 */
export function rebuiltCommitMessage(
  decisions: readonly Decision[],
  context: Omit<MessageContext, 'batch'>,
): string {
  const byBatch = new Map<BatchKind, Decision[]>();
  for (const decision of decisions) {
    const batch = batchOf(phaseOf(decision));
    const list = byBatch.get(batch) ?? [];
    list.push(decision);
    byBatch.set(batch, list);
  }
  const batches = batchKinds.filter((batch) => byBatch.has(batch));
  const [first] = batches;
  const single = commitMessage(decisions, { ...context, batch: first ?? 'records' });
  if (batches.length < 2) return single;
  const summary = batches.map((batch) => summaryLine(byBatch.get(batch) ?? [], batch)).join('; ');
  const trailers = single
    .slice(single.indexOf('\n\n') + 2)
    .replace(
      /^Tollgate-Batch: .*\n$/m,
      batches.map((batch) => `${trailerKeys.batch}: ${batch}\n`).join(''),
    );
  return `${summary}\n\n${trailers}`;
}

/** Reads the trailers back (repeated keys give several values). */
export function parseTrailers(message: string): Map<string, string[]> {
  const trailers = new Map<string, string[]>();
  const blocks = message.trimEnd().split(/\n\s*\n/);
  const last = blocks.at(-1) ?? '';
  for (const line of last.split('\n')) {
    const match = /^([A-Za-z][A-Za-z0-9-]*):\s*(.*)$/.exec(line);
    if (!match) continue;
    const key = match[1] as string;
    trailers.set(key, [...(trailers.get(key) ?? []), match[2] as string]);
  }
  return trailers;
}
