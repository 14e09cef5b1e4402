/**
 * `audit verify`: an integrity check of the audit branch, fed one commit at a time from
 * the tip back (see walkAuditHistory), so memory does not hold the history. Each
 * problem names the commit and, where there is one, the record (file:line and id).
 *
 * - chain: no merges; every commit adds exactly one new file under audit/**.jsonl and
 *   modifies none, and deletes none but the hour folders of its cluster older than the
 *   one it adds to (the tip's window, window.ts: they stay in the history, which is what
 *   is read); the oldest commit read is a root (unless the range was cut with --since);
 *   every file parses as records of a known schema version;
 * - intents: every intent has exactly one outcome, later in the history than the
 *   intent, of a result an outcome may have (succeeded, conflict, failed, expired,
 *   cancelled, unknown), about the same kind and pod; no outcome without its intent; an intent
 *   younger than `graceMs` may still be in flight;
 * - records: no record appears twice (the same intent id twice, or the same line);
 * - confirmations (confirmation.ts: a late outcome kept as a record): each comes after an
 *   outcome of its intent, names that outcome's result and does not contradict it;
 * - checkpoints (checkpoint.ts): each lists exactly the intents open at its place;
 * - signatures (with an allowed-signers list): every commit carries a valid SSH
 *   signature by a listed key; an unsigned commit is a problem then;
 * - released pods (with the pods now in the cluster): every pod the gate-release loop
 *   decided about that has no scheduling gates left has a succeeded Release (or
 *   Expire) decision, or a BreakGlass record (released by hand, recorded at a term
 *   start). Pods only resized are not judged. A pod released by someone else shows up
 *   here until tollgate has recorded it, which is the point.
 *
 * Memory: open intents and outcomes waiting for their intent (both bounded by what is
 * in flight), plus a 128-bit digest per intent id and per no-write record seen, which
 * is what detecting a repeat anywhere in the history costs: 16 bytes a slot in one typed
 * array (DigestSet), 21 to 43 bytes an entry with its free slots; with a spill folder
 * (`spill`, what the command line gives) at most a fixed number of them, the rest in
 * sorted runs on disk with 1/256 of them in memory (digest-set.ts). A digest collision
 * can only report a problem that is not there (a repeat, an outcome before its
 * intent), never hide one: a digest found is reported, a digest not found is exact
 * (about 1.5e-25 at 10^7 entries, see docs/audit.md).
 */
import { CheckpointChain } from './checkpoint.ts';
import { DigestSet, SpillingDigestSet, digest128, type DigestStore } from './digest-set.ts';
import { confirmationIn, contradicts, type ConfirmationValue } from './confirmation.ts';
import type { AuditCommit } from './reader.ts';
import { phaseOf, serializeRecord, type AuditRecord } from './record.ts';
import { verifySshSignature, type AllowedSigner } from './sign.ts';
import { hourKey } from './window.ts';

export { DigestSet, digest128 };

export type VerifyCheck =
  | 'branch'
  | 'chain'
  | 'record'
  | 'intent-outcome'
  | 'duplicate'
  | 'checkpoint'
  | 'signature'
  | 'released-pod';

export interface VerifyProblem {
  readonly check: VerifyCheck;
  readonly message: string;
  readonly commit?: string;
  readonly id?: string;
  /** file:line of the record, when the problem is about one. */
  readonly record?: string;
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
  /** When given, every commit must be signed by one of these keys. */
  readonly allowedSigners?: readonly AllowedSigner[];
  /** Problems kept in the report (all are counted). Default 1,000. */
  readonly maxProblems?: number;
  /**
   * A folder for the digests beyond `digestsInMemory` (default 196,608 per table, 4 MiB),
   * kept there as sorted runs (digest-set.ts) and removed by `finish`: memory then does not
   * grow with the history. Without it every digest stays in memory.
   */
  readonly spill?: { readonly dir: string; readonly digestsInMemory?: number };
}

export interface VerifyReport {
  readonly ok: boolean;
  readonly commits: number;
  readonly records: number;
  readonly intents: number;
  readonly outcomes: number;
  /** Outcomes recovery recorded as `unknown` (it could not tell whether the write was applied). */
  readonly unknownOutcomes: number;
  readonly podsChecked: number;
  readonly signaturesChecked: number;
  /** All problems found; `problems` holds the first `maxProblems` of them. */
  readonly problemCount: number;
  readonly problems: readonly VerifyProblem[];
}

type Located = AuditRecord & { readonly file: string; readonly line?: number };

const short = (oid: string): string => oid.slice(0, 12);
const where = (record: Located): string =>
  record.line === undefined ? record.file : `${record.file}:${record.line}`;

const outcomeResults: ReadonlySet<string> = new Set([
  'succeeded',
  'conflict',
  'failed',
  'expired',
  'cancelled',
  'unknown',
]);

/** A correction record (leftovers.ts) saying the write did succeed, whatever recovery recorded. */
function correctedToSucceeded(record: AuditRecord): boolean {
  if (record.phase !== 'record') return false;
  return record.inputs.some(
    (input) =>
      input.condition === 'OutcomeCorrection' &&
      (input.value as { actual?: { result?: unknown } } | null)?.actual?.result === 'succeeded',
  );
}

interface SeenOutcome {
  readonly commit: string;
  readonly record: Located;
}

/**
 * Feed commits newest first with `add`, then `finish`. Walking backwards, an outcome
 * is met before its intent; an outcome met after its intent was passed lies before it
 * in history.
 */
export class TrailVerifier {
  readonly #options: VerifyOptions;
  readonly #maxProblems: number;
  readonly #problems: VerifyProblem[] = [];
  #problemCount = 0;
  /** Outcomes whose intent has not been met yet (it lies further back). */
  readonly #waiting = new Map<string, SeenOutcome>();
  /** Confirmations whose intent's outcome has not been met yet (it lies further back). */
  readonly #confirmations = new Map<
    string,
    { readonly commit: string; readonly record: Located; readonly value: ConfirmationValue }
  >();
  /** Digests of intent ids already met, and of record lines already met. */
  readonly #seenIntents: DigestStore;
  readonly #seenLines: DigestStore;
  /** Ungated pods now in the cluster, by uid: only these are judged. */
  readonly #ungated = new Map<string, PodSnapshot>();
  /** Of those, the ones the gate-release loop decided about (not every pod of the history). */
  readonly #decidedByGateRelease = new Set<string>();
  readonly #released = new Set<string>();
  readonly #checkpoints = new CheckpointChain();
  #previous: AuditCommit | undefined;
  #commits = 0;
  #records = 0;
  #intents = 0;
  #outcomes = 0;
  #unknownOutcomes = 0;
  #signatures = 0;

  constructor(options: VerifyOptions = {}) {
    this.#options = options;
    this.#maxProblems = options.maxProblems ?? 1_000;
    const spill = options.spill;
    this.#seenIntents = spill
      ? new SpillingDigestSet(spill.dir, 'intents', spill.digestsInMemory)
      : new DigestSet();
    this.#seenLines = spill
      ? new SpillingDigestSet(spill.dir, 'lines', spill.digestsInMemory)
      : new DigestSet();
    for (const pod of options.pods ?? [])
      if (pod.schedulingGates.length === 0) this.#ungated.set(pod.uid, pod);
  }

  problem(problem: VerifyProblem): void {
    this.#problemCount += 1;
    if (this.#problems.length < this.#maxProblems) this.#problems.push(problem);
  }

  add(commit: AuditCommit): void {
    this.#commits += 1;
    this.#checkLink(commit);
    this.#checkChanges(commit);
    this.#checkSignature(commit);
    this.#checkpoints.add(commit);
    const label = `commit ${short(commit.oid)}`;
    for (const error of commit.errors)
      this.problem({ check: 'record', commit: commit.oid, message: `${label}: ${error}` });
    for (let index = commit.records.length - 1; index >= 0; index -= 1)
      this.#checkRecord(commit, commit.records[index] as Located);
    this.#previous = commit;
  }

  #checkLink(commit: AuditCommit): void {
    const label = `commit ${short(commit.oid)} (${commit.summary})`;
    if (commit.parents.length > 1)
      this.problem({
        check: 'chain',
        commit: commit.oid,
        message: `${label} is a merge; the audit branch must be linear`,
      });
    const newer = this.#previous;
    if (newer && newer.parents[0] !== commit.oid)
      this.problem({
        check: 'chain',
        commit: newer.oid,
        message: `commit ${short(newer.oid)} does not follow ${short(commit.oid)}`,
      });
  }

  #checkChanges(commit: AuditCommit): void {
    const label = `commit ${short(commit.oid)} (${commit.summary})`;
    const addedHours = commit.changes
      .filter((change) => change.change === 'added')
      .map((change) => hourKey(change.path));
    for (const change of commit.changes) {
      if (change.change !== 'added' && !droppedFromWindow(change, addedHours))
        this.problem({
          check: 'chain',
          commit: commit.oid,
          message: `${label} ${change.change} ${change.path}; audit files are never changed or removed`,
        });
    }
    const added = commit.changes.filter((change) => change.change === 'added');
    if (added.length !== 1)
      this.problem({
        check: 'chain',
        commit: commit.oid,
        message: `${label} adds ${added.length} files; every audit commit adds exactly one`,
      });
    for (const change of added) {
      if (!change.path.startsWith('audit/') || !change.path.endsWith('.jsonl'))
        this.problem({
          check: 'chain',
          commit: commit.oid,
          message: `${label} adds ${change.path}, outside audit/**.jsonl`,
        });
    }
  }

  #checkSignature(commit: AuditCommit): void {
    const allowed = this.#options.allowedSigners;
    if (!allowed) return;
    const label = `commit ${short(commit.oid)} (${commit.summary})`;
    if (!commit.signature) {
      this.problem({
        check: 'signature',
        commit: commit.oid,
        message: `${label} is not signed; signatures are required (--allowed-signers)`,
      });
      return;
    }
    this.#signatures += 1;
    const result = verifySshSignature(commit.signature.armored, commit.signature.payload, allowed);
    if (!result.ok)
      this.problem({
        check: 'signature',
        commit: commit.oid,
        message: `${label} has a bad signature: ${result.reason}`,
      });
  }

  #checkRecord(commit: AuditCommit, record: Located): void {
    this.#records += 1;
    const label = `${where(record)} in commit ${short(commit.oid)}`;
    if (record.phase === 'record') this.#checkRepeatedLine(commit, record, label);
    if (record.phase === 'record') this.#noteConfirmation(commit, record, label);
    if (phaseOf(record) !== record.phase)
      this.problem({
        check: 'record',
        commit: commit.oid,
        id: record.id,
        record: where(record),
        message: `${label}: phase "${record.phase}" with result "${record.outcome.result}"`,
      });
    if (record.loop === 'gate-release' && this.#ungated.has(record.target.uid))
      this.#decidedByGateRelease.add(record.target.uid);
    if (
      (((record.kind === 'Release' || record.kind === 'Expire') &&
        (record.outcome.result === 'succeeded' || correctedToSucceeded(record))) ||
        record.kind === 'BreakGlass') && // released by hand, recorded at a term start
      this.#ungated.has(record.target.uid)
    )
      this.#released.add(record.target.uid);
    if (record.phase === 'outcome') this.#checkOutcome(commit, record, label);
    else if (record.phase === 'intent') this.#checkIntent(commit, record, label);
  }

  /** Intents and outcomes repeat by id (checked with them); a record without a write by its line. */
  #checkRepeatedLine(commit: AuditCommit, record: Located, label: string): void {
    if (this.#seenLines.add(digest128(serializeRecord(record)))) return;
    this.problem({
      check: 'duplicate',
      commit: commit.oid,
      id: record.id,
      record: where(record),
      message: `${label} repeats a record found later in the history (${record.phase} ${record.id})`,
    });
  }

  #noteConfirmation(commit: AuditCommit, record: Located, label: string): void {
    const value = confirmationIn(record);
    if (value === undefined) return;
    if (value === 'malformed') {
      this.problem({
        check: 'record',
        commit: commit.oid,
        id: record.id,
        record: where(record),
        message: `${label}: ${record.id} has an OutcomeConfirmation input that names no intent and outcomes`,
      });
      return;
    }
    this.#confirmations.set(value.intent, { commit: commit.oid, record, value });
  }

  /** The outcome a confirmation (met earlier, newer in history) names. */
  #checkConfirmed(record: Located, label: string): void {
    const confirmation = this.#confirmations.get(record.id);
    if (!confirmation) return;
    this.#confirmations.delete(record.id);
    const { value } = confirmation;
    const at = `${where(confirmation.record)} in commit ${short(confirmation.commit)}`;
    const base = {
      check: 'intent-outcome' as const,
      commit: confirmation.commit,
      id: record.id,
      record: where(confirmation.record),
    };
    if (contradicts(value.actual, record.outcome))
      this.problem({
        ...base,
        message: `${at}: confirmation of ${record.id} (${value.actual.result}) contradicts its outcome ${record.outcome.result} at ${label}`,
      });
    else if (value.recorded.result !== record.outcome.result)
      this.problem({
        ...base,
        message: `${at}: confirmation of ${record.id} names the outcome ${value.recorded.result}, but its outcome at ${label} is ${record.outcome.result}`,
      });
  }

  #checkOutcome(commit: AuditCommit, record: Located, label: string): void {
    this.#outcomes += 1;
    this.#checkConfirmed(record, label);
    if (record.outcome.result === 'unknown') this.#unknownOutcomes += 1;
    const base = { commit: commit.oid, id: record.id, record: where(record) };
    if (!outcomeResults.has(record.outcome.result))
      this.problem({
        check: 'intent-outcome',
        ...base,
        message: `${label}: outcome of ${record.id} has result "${record.outcome.result}", not one of ${[...outcomeResults].join(', ')}`,
      });
    if (this.#seenIntents.has(digest128(record.id))) {
      this.problem({
        check: 'intent-outcome',
        ...base,
        message: `${label}: outcome of ${record.id} comes before its intent`,
      });
      return;
    }
    const other = this.#waiting.get(record.id);
    if (other) {
      // Named at the later one: the extra outcome; the earlier one stays the answer.
      this.problem({
        check: 'intent-outcome',
        commit: other.commit,
        id: record.id,
        record: where(other.record),
        message: `${where(other.record)} in commit ${short(other.commit)}: ${record.id} has two outcomes (${other.record.outcome.result} here, ${record.outcome.result} earlier at ${label})`,
      });
      this.#waiting.set(record.id, { commit: commit.oid, record });
      return;
    }
    this.#waiting.set(record.id, { commit: commit.oid, record });
  }

  #checkIntent(commit: AuditCommit, record: Located, label: string): void {
    this.#intents += 1;
    const base = { commit: commit.oid, id: record.id, record: where(record) };
    if (!this.#seenIntents.add(digest128(record.id))) {
      this.problem({
        check: 'duplicate',
        ...base,
        message: `${label}: intent ${record.id} is recorded again later in the history`,
      });
      return;
    }
    const outcome = this.#waiting.get(record.id);
    if (!outcome) {
      const grace = this.#options.graceMs ?? 0;
      const now = this.#options.now ?? Date.now();
      if (grace > 0 && now - record.at < grace) return;
      this.problem({
        check: 'intent-outcome',
        ...base,
        message: `intent ${record.id} (${label}) has no outcome`,
      });
      return;
    }
    this.#waiting.delete(record.id);
    const { record: result } = outcome;
    if (result.kind !== record.kind || result.target.uid !== record.target.uid)
      this.problem({
        check: 'intent-outcome',
        commit: outcome.commit,
        id: record.id,
        record: where(result),
        message: `${where(result)} in commit ${short(outcome.commit)}: outcome of ${record.id} is about ${result.kind} of uid ${result.target.uid}, the intent about ${record.kind} of uid ${record.target.uid}`,
      });
  }

  finish(): VerifyReport {
    this.#seenIntents.close();
    this.#seenLines.close();
    const oldest = this.#previous;
    if (oldest === undefined)
      this.problem({
        check: 'branch',
        message: 'no audit commits to verify (the range is empty)',
      });
    else if (!this.#options.partial && oldest.parents.length > 0)
      this.problem({
        check: 'chain',
        commit: oldest.oid,
        message: `commit ${short(oldest.oid)} (${oldest.summary}) is the oldest commit read but has a parent`,
      });
    // With a cut range, an outcome's intent may lie before the cut: not judged.
    if (!this.#options.partial)
      for (const [id, { commit, record }] of this.#waiting)
        this.problem({
          check: 'intent-outcome',
          commit,
          id,
          record: where(record),
          message: `${where(record)} in commit ${short(commit)}: outcome of ${id} has no intent`,
        });
    if (!this.#options.partial)
      for (const [id, { commit, record }] of this.#confirmations)
        this.problem({
          check: 'intent-outcome',
          commit,
          id,
          record: where(record),
          message: `${where(record)} in commit ${short(commit)}: confirmation of ${id} has no outcome before it`,
        });
    for (const { commit, file, message } of this.#checkpoints.finish(!this.#options.partial))
      this.problem({ check: 'checkpoint', commit, record: file, message });
    let podsChecked = 0;
    for (const [uid, pod] of this.#ungated) {
      if (!this.#decidedByGateRelease.has(uid)) continue;
      podsChecked += 1;
      if (!this.#released.has(uid))
        this.problem({
          check: 'released-pod',
          id: uid,
          message: `pod ${pod.namespace}/${pod.name} (uid ${uid}) has no scheduling gates but the trail has no succeeded Release decision for it`,
        });
    }
    return {
      ok: this.#problemCount === 0,
      commits: this.#commits,
      records: this.#records,
      intents: this.#intents,
      outcomes: this.#outcomes,
      unknownOutcomes: this.#unknownOutcomes,
      podsChecked,
      signaturesChecked: this.#signatures,
      problemCount: this.#problemCount,
      problems: this.#problems,
    };
  }
}

/**
 * A file the tip's window dropped (window.ts): deleted from the tree, not from the
 * history, by a commit that adds a file of a later hour of the same cluster. Any other
 * deletion or change is a rewrite of the record.
 */
function droppedFromWindow(
  change: { readonly path: string; readonly change: string },
  addedHours: readonly (string | undefined)[],
): boolean {
  if (change.change !== 'deleted') return false;
  const hour = hourKey(change.path);
  if (hour === undefined) return false;
  const cluster = hour.split('/')[1];
  return addedHours.some(
    (added) => added !== undefined && added.split('/')[1] === cluster && hour < added,
  );
}

/** Verifies a history held in memory (oldest first). */
export function verifyTrail(
  history: readonly AuditCommit[],
  options: VerifyOptions = {},
): VerifyReport {
  const verifier = new TrailVerifier(options);
  for (let index = history.length - 1; index >= 0; index -= 1)
    verifier.add(history[index] as AuditCommit);
  return verifier.finish();
}
