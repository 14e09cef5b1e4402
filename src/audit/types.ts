/**
 * The contract of the audit trail: loops hand decisions to an `AuditSink`; it turns
 * them into deterministic commits on the audit branch (see writer.ts).
 */
import type { Decision } from '../decide/decision.ts';
import type { Carried } from '../decide/release-carried.ts';
import type { AuditSource } from './reader.ts';

/**
 * Strict mode, a failed push waiting for its retry: intents are refused at once, neither
 * committed nor cancelled, so a pass per event during a Git outage does not commit (and
 * try to push) an intent and its cancellation each time. `retryAt` is when the next push
 * is tried; a loop schedules its next pass then.
 */
export class AuditUnavailableError extends Error {
  readonly retryAt: number;
  constructor(cause: string, retryAt: number, now: number) {
    super(
      `audit push failing (${cause}); intents not recorded, writes must not be sent; next push attempt in ${Math.max(0, Math.ceil((retryAt - now) / 1000))} s`,
    );
    this.name = 'AuditUnavailableError';
    this.retryAt = retryAt;
  }
}

export interface AuditSink {
  /**
   * Intents of decisions that write to the API. In strict mode this resolves only when
   * the intents are committed and pushed, so a write is never sent without its record;
   * in async mode it resolves at once. Rejects when the backlog is full and strict, and
   * (AuditUnavailableError, at once) while a failed strict push waits for its retry.
   */
  recordIntents(decisions: readonly Decision[]): Promise<void>;
  /** Outcomes (and decisions without writes, such as Hold or SkipStale): batched by time and size. */
  record(decisions: readonly Decision[]): void;
  /** Commit and push everything pending now. */
  flush(): Promise<void>;
  /**
   * Term start, before recovery: plan what an earlier run or term left unpushed against
   * the remote and rebuild it on the remote tip, locally (its push goes on behind);
   * resolves with that clone to read recovery from (undefined when the sink keeps none).
   * Rejects while the remote cannot be read.
   */
  reconcile?(): Promise<AuditSource | undefined>;
  /**
   * A leader term begins / its recovery is done: in between, the sink remembers the
   * intents it commits and those it accepted an outcome for, so a recovery retried later
   * in the term leaves the term's own intents to the loops that sent them, and does not
   * close twice what an earlier attempt closed (`recordedThisTerm`).
   */
  beginTerm?(): void;
  endTerm?(): void;
  recordedThisTerm?(id: string): boolean;
  /**
   * After reconcile: the open intents and the carried state (Blocked writes, gang
   * memory) as they stand now, kept as commits landed since the term start read them,
   * so recovery and the gate loop do not read the trail again. Undefined before.
   */
  termState?(): { readonly open: readonly Decision[]; readonly carried: Carried } | undefined;
  /**
   * Which of the Blocked writes and gang memory the checkpoints carry are still in force
   * (decide/release-carried.ts `carriedInForce`), asked at each checkpoint; the run sets
   * it at each term start. Absent: the sink writes no checkpoints.
   */
  keepCarriedWhile?(inForce: (carried: Carried) => Carried): void;
  /** Decisions not yet pushed (for metrics and /readyz). */
  readonly backlog: number;
  close(): Promise<void>;
}
