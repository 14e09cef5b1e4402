/**
 * `audit verify`: pure checks over a read history (and optionally the pods now in the
 * cluster). Each problem names the commit, file or decision and says what is wrong.
 *
 * - chain: parents are linear (no merges; each commit's parent is the previous one),
 *   every commit adds exactly one new file under audit/ and modifies or deletes none,
 *   and every file parses as records of a known schema version;
 * - intents: every intent (by decision id) has an outcome, unless it is younger than
 *   `graceMs` (in flight);
 * - released pods: every pod the trail knows (any decision on its uid) that now has
 *   no scheduling gates has a succeeded Release (or Expire) decision. A pod released
 *   by someone else shows up here, which is the point.
 */
import type { AuditCommit } from './reader.ts';

export type VerifyCheck = 'chain' | 'intent-outcome' | 'released-pod' | 'record';

export interface VerifyProblem {
  readonly check: VerifyCheck;
  readonly message: string;
  readonly commit?: string;
  readonly id?: string;
}

/** A pod as the cluster shows it now. */
export interface PodSnapshot {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly schedulingGates: readonly string[];
}

export interface VerifyOptions {
  readonly pods?: readonly PodSnapshot[];
  readonly now?: number;
  readonly graceMs?: number;
  /** True when the history was cut (by --since): the first commit's parent is then not checked. */
  readonly partial?: boolean;
}

export interface VerifyReport {
  readonly ok: boolean;
  readonly commits: number;
  readonly records: number;
  readonly intents: number;
  readonly outcomes: number;
  readonly podsChecked: number;
  readonly problems: readonly VerifyProblem[];
}

const short = (oid: string): string => oid.slice(0, 12);

export function verifyTrail(
  history: readonly AuditCommit[],
  options: VerifyOptions = {},
): VerifyReport {
  const problems: VerifyProblem[] = [];
  const intents = new Map<string, { at: number; commit: string }>();
  const outcomes = new Set<string>();
  const released = new Set<string>();
  const knownUids = new Set<string>();
  let records = 0;

  for (const [index, commit] of history.entries()) {
    const where = `commit ${short(commit.oid)} (${commit.summary})`;
    if (commit.parents.length > 1)
      problems.push({
        check: 'chain',
        commit: commit.oid,
        message: `${where} is a merge; the audit branch must be linear`,
      });
    const previous = history[index - 1];
    if (previous && commit.parents[0] !== previous.oid) {
      problems.push({
        check: 'chain',
        commit: commit.oid,
        message: `${where} does not follow ${short(previous.oid)}`,
      });
    }
    if (!previous && !options.partial && commit.parents.length > 0) {
      problems.push({
        check: 'chain',
        commit: commit.oid,
        message: `${where} is the oldest commit read but has a parent`,
      });
    }
    for (const change of commit.changes) {
      if (change.change !== 'added') {
        problems.push({
          check: 'chain',
          commit: commit.oid,
          message: `${where} ${change.change} ${change.path}; audit files are never changed or removed`,
        });
      }
    }
    const added = commit.changes.filter((change) => change.change === 'added');
    if (added.length !== 1) {
      problems.push({
        check: 'chain',
        commit: commit.oid,
        message: `${where} adds ${added.length} files; every audit commit adds exactly one`,
      });
    }
    for (const change of added) {
      if (!change.path.startsWith('audit/') || !change.path.endsWith('.jsonl')) {
        problems.push({
          check: 'chain',
          commit: commit.oid,
          message: `${where} adds ${change.path}, outside audit/**.jsonl`,
        });
      }
    }
    for (const error of commit.errors)
      problems.push({ check: 'record', commit: commit.oid, message: `${where}: ${error}` });
    for (const record of commit.records) {
      records += 1;
      knownUids.add(record.target.uid);
      if (record.phase === 'intent') intents.set(record.id, { at: record.at, commit: commit.oid });
      else if (record.phase === 'outcome') outcomes.add(record.id);
      if (
        (record.kind === 'Release' || record.kind === 'Expire') &&
        record.outcome.result === 'succeeded'
      )
        released.add(record.target.uid);
    }
  }

  const now = options.now ?? Date.now();
  const grace = options.graceMs ?? 0;
  for (const [id, intent] of intents) {
    if (outcomes.has(id)) continue;
    if (grace > 0 && now - intent.at < grace) continue;
    problems.push({
      check: 'intent-outcome',
      id,
      commit: intent.commit,
      message: `intent ${id} (commit ${short(intent.commit)}) has no outcome`,
    });
  }

  let podsChecked = 0;
  for (const pod of options.pods ?? []) {
    if (!knownUids.has(pod.uid) || pod.schedulingGates.length > 0) continue;
    podsChecked += 1;
    if (!released.has(pod.uid)) {
      problems.push({
        check: 'released-pod',
        id: pod.uid,
        message: `pod ${pod.namespace}/${pod.name} (uid ${pod.uid}) has no scheduling gates but the trail has no succeeded Release decision for it`,
      });
    }
  }

  return {
    ok: problems.length === 0,
    commits: history.length,
    records,
    intents: intents.size,
    outcomes: outcomes.size,
    podsChecked,
    problems,
  };
}
