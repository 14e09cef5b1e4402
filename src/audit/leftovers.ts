/**
 * Leftover commits: what an earlier term or process committed to its clone but could not
 * push (Git down, the lease lost). Meanwhile another leader may have led, and its
 * recovery closed the open intents of that time from cluster state. Pushing the
 * leftovers as they are would then give those intents a second outcome. Before they are
 * pushed they are planned here against what the remote recorded since their base:
 *
 * - an intent the remote already holds is dropped (it would be recorded twice);
 * - an outcome whose intent the remote already closed is not replayed as an outcome: the
 *   remote's outcome stays the intent's one outcome. The leftover's is the API's own
 *   answer to the write and recovery's only an inference from the cluster later, so it
 *   is kept as a record naming both (confirmation.ts): a correction (phase `record`, id
 *   `<intent id>:correction`) when the two disagree about what happened (one says the
 *   write was applied, the other not, or the remote's is `unknown`), a confirmation
 *   (`<intent id>:confirmation`) when they agree. Nothing true is lost and the intent
 *   still has exactly one outcome. The same record (the leftover's own line already on
 *   the remote) is just dropped;
 * - a checkpoint is dropped when the remote moved on (the intents it lists as open may
 *   since have been closed there); the writer writes a new one later;
 * - everything else is replayed unchanged, in order.
 *
 * `planLeftovers` is pure; `readLeftovers` and `remoteRecords` read them from the clone,
 * and the writer commits the plan (GitAuditWriter: at term start, before any push, and
 * whenever a push finds the remote moved under commits not yet pushed).
 */
import type { Decision } from '../decide/decision.ts';
import { isCheckpointFile } from './checkpoint.ts';
import {
  confirmationOf,
  contradicts,
  describeOutcome as describe,
  lateReason,
} from './confirmation.ts';
import { parseTrailers, trailerKeys } from './message.ts';
import { walkAuditHistory } from './reader.ts';
import {
  batchKinds,
  parseBatch,
  serializeRecord,
  type AuditRecord,
  type BatchKind,
} from './record.ts';
import type { AuditRepo, LocalCommit } from './repo.ts';

export interface LeftoverCommit {
  readonly path: string;
  /** The writer that made it (its `Tollgate-Controller` trailer), when named. */
  readonly controller?: string;
  /** The batch kind from the commit's trailer; `checkpoint` for a checkpoint file. */
  readonly batch: BatchKind | 'checkpoint';
  readonly records: readonly AuditRecord[];
  /**
   * A commit whose file does not parse as audit records (not written by tollgate's
   * writer): it is replayed as it was, byte for byte, with its own message, and
   * `unreadable` says why it was not planned.
   */
  readonly verbatim?: {
    readonly text: string;
    readonly message: string;
    readonly unreadable: string;
  };
}

/** What the remote recorded since the leftovers' base, for the ids the leftovers hold. */
export interface RemoteRecords {
  readonly intents: ReadonlySet<string>;
  readonly outcomes: ReadonlyMap<string, AuditRecord>;
}

export interface DroppedRecord {
  readonly id: string;
  readonly phase: AuditRecord['phase'];
  readonly why: 'intent already on the remote' | 'outcome already on the remote' | 'checkpoint';
}

export interface LeftoverPlan {
  /** The commits to replay, in order (those left with no record are gone). */
  readonly commits: readonly {
    readonly path: string;
    readonly controller?: string;
    readonly batch: BatchKind;
    readonly records: readonly Decision[];
    /** Replayed as it was (see LeftoverCommit.verbatim). */
    readonly verbatim?: LeftoverCommit['verbatim'];
  }[];
  readonly dropped: readonly DroppedRecord[];
  /** Correction records (phase `record`) for outcomes recovery got wrong. */
  readonly corrections: readonly Decision[];
  /** Confirmation records (phase `record`) for outcomes that agree with the remote's. */
  readonly confirmations: readonly Decision[];
  /** False when the leftovers can be pushed as they are. */
  readonly changed: boolean;
}

/**
 * A correction when the two outcomes disagree about whether the write was applied.
 * `rebased`: the late outcome was not left by an earlier term but met the other one
 * while its push was under way (either may then be recovery's), so the reason says
 * only which came first.
 */
export function correctionOf(
  leftover: AuditRecord,
  remote: AuditRecord,
  at: number,
  rebased = false,
): Decision | undefined {
  if (!contradicts(leftover.outcome, remote.outcome)) return undefined;
  return {
    ...withoutLocation(leftover),
    id: `${leftover.id}:correction`,
    at,
    inputs: [
      {
        condition: 'OutcomeCorrection',
        met: true,
        value: {
          intent: leftover.id,
          recorded: remote.outcome,
          actual: leftover.outcome,
        },
      },
    ],
    reason: rebased
      ? lateReason(
          'correction',
          leftover,
          remote,
          'says otherwise about whether the write was applied',
        )
      : `correction: the outcome recorded for ${leftover.id} is ${describe(remote.outcome)}, from recovery's reading of the cluster; the write's outcome was ${describe(leftover.outcome)} (the API's answer to the write, committed by the writer that sent it but pushed only after that recovery)`,
    outcome: { result: 'recorded' },
  };
}

export function planLeftovers(
  leftovers: readonly LeftoverCommit[],
  remote: RemoteRecords,
  options: {
    readonly now: number;
    readonly remoteMoved: boolean;
    /** Commits of a push under way that found the remote moved (see correctionOf). */
    readonly rebased?: boolean;
  },
): LeftoverPlan {
  const rebased = options.rebased ?? false;
  const commits: LeftoverPlan['commits'][number][] = [];
  const dropped: DroppedRecord[] = [];
  const corrections: Decision[] = [];
  const confirmations: Decision[] = [];
  for (const commit of leftovers) {
    if (commit.verbatim) {
      const batch = commit.batch === 'checkpoint' ? 'records' : commit.batch;
      commits.push({ path: commit.path, batch, records: [], verbatim: commit.verbatim });
      continue;
    }
    if (commit.batch === 'checkpoint') {
      // Kept only when nothing is rewritten (then the leftovers are pushed as they are).
      if (options.remoteMoved)
        dropped.push({ id: commit.path, phase: 'record', why: 'checkpoint' });
      continue;
    }
    const kept: Decision[] = [];
    for (const record of commit.records) {
      if (record.phase === 'intent' && remote.intents.has(record.id)) {
        dropped.push({ id: record.id, phase: record.phase, why: 'intent already on the remote' });
        continue;
      }
      const closed = record.phase === 'outcome' ? remote.outcomes.get(record.id) : undefined;
      if (closed) {
        dropped.push({ id: record.id, phase: record.phase, why: 'outcome already on the remote' });
        const correction = correctionOf(record, closed, options.now, rebased);
        if (correction) corrections.push(correction);
        else if (!sameRecord(record, closed))
          confirmations.push(confirmationOf(withoutLocation(record), closed, options.now));
        continue;
      }
      kept.push(withoutLocation(record));
    }
    if (kept.length > 0)
      commits.push({
        path: commit.path,
        ...(commit.controller === undefined ? {} : { controller: commit.controller }),
        batch: commit.batch,
        records: kept,
      });
  }
  return {
    commits,
    dropped,
    corrections,
    confirmations,
    changed: dropped.length > 0,
  };
}

/** A commit of the rebuild: planned records in one file, or a verbatim commit as it was. */
export interface RebuiltCommit {
  readonly path: string;
  readonly records: readonly Decision[];
  readonly verbatim?: LeftoverCommit['verbatim'];
}

/**
 * The planned commits as the commits that rebuild them on the remote tip. Every commit
 * rewrites the trees along its file's path, its hour folder's the largest (hundreds of
 * files in a busy hour), so rebuilding N leftovers one for one costs N times that
 * folder. Instead the records of consecutive planned commits of the same folder and the
 * same writer are concatenated, in order, and cut into files of at most `maxRecords`
 * records (the writer's `batch.maxDecisions`: no file larger than one it makes itself);
 * a run of R records becomes ceil(R / maxRecords) commits. A verbatim commit stays one
 * commit, as it was, and ends the run. Records are independent lines, each with its own
 * phase: which file holds a line changes nothing readers decide (recovery and verify
 * read a file's lines in order, the branch's files oldest first).
 */
export function rebuiltCommits(
  commits: LeftoverPlan['commits'],
  maxRecords: number,
): RebuiltCommit[] {
  const rebuilt: RebuiltCommit[] = [];
  // `paths[i]`: the file the run's record i was left in; a rebuilt file takes its first record's.
  let run: { key: string; paths: string[]; records: Decision[] } | undefined;
  const close = (): void => {
    if (run) rebuilt.push(...cut(run.paths, run.records, maxRecords));
    run = undefined;
  };
  for (const commit of commits) {
    if (commit.verbatim) {
      close();
      rebuilt.push({ path: commit.path, records: [], verbatim: commit.verbatim });
      continue;
    }
    const key = `${folderOf(commit.path)}\n${commit.controller ?? ''}`;
    if (run?.key !== key) {
      close();
      run = { key, paths: [], records: [] };
    }
    for (const record of commit.records) {
      run.records.push(record);
      run.paths.push(commit.path);
    }
  }
  close();
  return rebuilt;
}

/**
 * The records in files of at most `maxRecords`, each at the path its first record was
 * left in (a name taken by the file before it gets a numeric suffix when committed).
 */
function cut(
  paths: readonly string[],
  records: readonly Decision[],
  maxRecords: number,
): RebuiltCommit[] {
  const size = Math.max(1, Math.floor(maxRecords));
  const files: RebuiltCommit[] = [];
  for (let start = 0; start < records.length; start += size)
    files.push({ path: paths[start] as string, records: records.slice(start, start + size) });
  return files;
}

function folderOf(path: string): string {
  return path.slice(0, path.lastIndexOf('/') + 1);
}

/**
 * Outcomes for the intents a standby's leftovers leave open (GitAuditWriter pushes a
 * standby's leftovers itself). They never reached the remote, so no leader's recovery
 * saw them, and the process that decided them no longer leads. In strict mode a write is
 * sent only once its intent is pushed, so an intent never pushed was never sent:
 * `cancelled`. In async mode the write goes out before its intent is committed, so
 * whether it was applied cannot be told from the trail: `unknown`. Call it after
 * planLeftovers' replay, so outcomes the remote already holds are accounted for.
 */
export function closeUnpushedIntents(
  leftovers: readonly LeftoverCommit[],
  mode: 'strict' | 'async',
  at: number,
): Decision[] {
  const records = leftovers.flatMap((commit) => commit.records);
  const closed = new Set(
    records.filter((record) => record.phase === 'outcome').map((record) => record.id),
  );
  const message =
    mode === 'strict'
      ? 'not sent: its intent never reached Git while its term led, and a strict write is sent only once its intent is pushed (closed by the same replica as a standby, pushing what its terms left unpushed)'
      : 'whether the write was applied cannot be told: its intent never reached Git while its term led, and an async write may go out before its intent is pushed (closed by the same replica as a standby, pushing what its terms left unpushed)';
  return records
    .filter((record) => record.phase === 'intent' && !closed.has(record.id))
    .map((record) => ({
      ...withoutLocation(record),
      at,
      outcome:
        mode === 'strict' ? { result: 'cancelled', message } : { result: 'unknown', message },
    }));
}

/** The leftover's own line already on the remote (its push landed after all). */
function sameRecord(leftover: AuditRecord, remote: AuditRecord): boolean {
  return serializeRecord(leftover) === serializeRecord(remote);
}

function withoutLocation(record: AuditRecord): Decision {
  const {
    v: _v,
    phase: _phase,
    ...decision
  } = record as AuditRecord & {
    file?: string;
    line?: number;
  };
  delete (decision as { file?: string }).file;
  delete (decision as { line?: number }).line;
  return decision;
}

/**
 * The leftover commits' records, read from the clone. A file that does not parse as
 * audit records is kept verbatim (never dropped, never a reason to stop the writer).
 */
export async function readLeftovers(
  repo: AuditRepo,
  left: readonly LocalCommit[],
): Promise<LeftoverCommit[]> {
  const commits: LeftoverCommit[] = [];
  for (const commit of left) {
    if (isCheckpointFile(commit.path)) {
      commits.push({ path: commit.path, batch: 'checkpoint', records: [] });
      continue;
    }
    const trailers = parseTrailers(commit.message);
    const named = trailers.get(trailerKeys.batch)?.[0];
    const batch = batchKinds.find((kind) => kind === named) ?? 'records';
    const controller = trailers.get(trailerKeys.controller)?.[0];
    const text = await repo.readText(commit.blob);
    try {
      commits.push({
        path: commit.path,
        ...(controller === undefined ? {} : { controller }),
        batch,
        records: parseBatch(text, commit.path),
      });
    } catch (error) {
      const unreadable = (error as Error).message;
      commits.push({
        path: commit.path,
        batch,
        records: [],
        verbatim: { text, message: commit.message, unreadable },
      });
    }
  }
  return commits;
}

/**
 * What the remote (its tracking tip) recorded after `base` about the given ids: only
 * commits since the leftovers' base can hold another leader's outcome for them.
 */
export async function remoteRecords(
  repo: AuditRepo,
  base: string | undefined,
  cluster: string,
  ids: ReadonlySet<string>,
): Promise<RemoteRecords> {
  const intents = new Set<string>();
  const outcomes = new Map<string, AuditRecord>();
  const source = { gitdir: repo.gitdir, cache: repo.cache, tip: await repo.trackingTip() };
  const walk = walkAuditHistory(
    { ...source, description: `remote-tracking branch of ${repo.url}`, close: () => undefined },
    { pathPrefix: `audit/${cluster}/` },
  );
  for await (const commit of walk) {
    if (commit.oid === base) break;
    for (const record of commit.records) {
      if (!ids.has(record.id)) continue;
      if (record.phase === 'intent') intents.add(record.id);
      // Newest first: the oldest outcome, the intent's answer, is set last.
      else if (record.phase === 'outcome') outcomes.set(record.id, record);
    }
  }
  return { intents, outcomes };
}
