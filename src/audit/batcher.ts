/**
 * Batching by time and size, with no I/O: decisions wait per batch kind until
 * `maxDecisions` are queued or the oldest has waited `maxDelayMs`. In strict mode
 * intents are never held back by time (they are pushed before their writes; callers
 * arriving while a commit is in flight share the next one).
 *
 * Repeated records of decisions without a write (a Hold re-evaluated every pass with
 * the same inputs and reason) are dropped as duplicates: the audit trail records what
 * changed, not every pass, so a quiet cluster produces no commits.
 */
import { createHash } from 'node:crypto';
import type { Decision } from '../decide/decision.ts';
import { batchKinds, canonicalJson, type BatchKind } from './record.ts';

export interface BatchLimits {
  readonly maxDecisions: number;
  readonly maxDelayMs: number;
}

export function validateLimits(limits: BatchLimits, where = 'settings.audit.batch'): BatchLimits {
  if (!Number.isInteger(limits.maxDecisions) || limits.maxDecisions < 1) {
    throw new Error(`${where}.maxDecisions must be a positive integer, got ${limits.maxDecisions}`);
  }
  if (!Number.isFinite(limits.maxDelayMs) || limits.maxDelayMs < 0) {
    throw new Error(
      `${where}.maxDelayMs must be a non-negative number of milliseconds, got ${limits.maxDelayMs}`,
    );
  }
  return limits;
}

interface Queue {
  decisions: Decision[];
  oldestAt: number;
}

export class Batcher {
  readonly #limits: BatchLimits;
  readonly #queues = new Map<BatchKind, Queue>();
  readonly #intentsImmediate: boolean;

  /** `intentsImmediate`: strict mode, intents are due as soon as they are queued. */
  constructor(limits: BatchLimits, options: { intentsImmediate?: boolean } = {}) {
    this.#limits = validateLimits(limits);
    this.#intentsImmediate = options.intentsImmediate ?? true;
  }

  add(batch: BatchKind, decisions: readonly Decision[], now: number): void {
    if (decisions.length === 0) return;
    const queue = this.#queues.get(batch) ?? { decisions: [], oldestAt: now };
    queue.decisions.push(...decisions);
    this.#queues.set(batch, queue);
  }

  get size(): number {
    let total = 0;
    for (const queue of this.#queues.values()) total += queue.decisions.length;
    return total;
  }

  sizeOf(batch: BatchKind): number {
    return this.#queues.get(batch)?.decisions.length ?? 0;
  }

  /** Batch kinds that should be committed now, in commit order (intents first). */
  due(now: number): BatchKind[] {
    return batchKinds.filter((batch) => {
      const queue = this.#queues.get(batch);
      if (!queue || queue.decisions.length === 0) return false;
      return (
        (batch === 'intents' && this.#intentsImmediate) ||
        queue.decisions.length >= this.#limits.maxDecisions ||
        now - queue.oldestAt >= this.#limits.maxDelayMs
      );
    });
  }

  /** When the next time-based batch falls due, or undefined when nothing waits. */
  nextDueAt(): number | undefined {
    let next: number | undefined;
    for (const queue of this.#queues.values()) {
      if (queue.decisions.length === 0) continue;
      const at = queue.oldestAt + this.#limits.maxDelayMs;
      next = next === undefined ? at : Math.min(next, at);
    }
    return next;
  }

  /** Removes and returns everything of `batch`, split into commits of at most `maxDecisions`. */
  take(batch: BatchKind): Decision[][] {
    const queue = this.#queues.get(batch);
    this.#queues.delete(batch);
    if (!queue) return [];
    const chunks: Decision[][] = [];
    for (let start = 0; start < queue.decisions.length; start += this.#limits.maxDecisions) {
      chunks.push(queue.decisions.slice(start, start + this.#limits.maxDecisions));
    }
    return chunks;
  }
}

/**
 * Remembers the last recorded content per decision id (bounded, oldest forgotten
 * first) so an unchanged re-evaluation is not recorded again. It keeps a SHA-256 of the
 * content, not the content: decisions of pods long gone stay until the bound (50,000),
 * and their canonical JSON held about 470 bytes each (23 MB at the bound).
 */
export class RecordDeduper {
  readonly #seen = new Map<string, string>();
  readonly #capacity: number;

  constructor(capacity = 50_000) {
    this.#capacity = capacity;
  }

  /** True when this record says nothing new about its decision. */
  isRepeat(decision: Decision): boolean {
    const fingerprint = createHash('sha256')
      .update(
        canonicalJson([
          decision.kind,
          decision.reason,
          decision.inputs,
          decision.policy,
          decision.outcome,
        ]),
      )
      .digest('base64');
    const previous = this.#seen.get(decision.id);
    if (previous === fingerprint) return true;
    this.#seen.delete(decision.id);
    this.#seen.set(decision.id, fingerprint);
    if (this.#seen.size > this.#capacity) {
      const oldest = this.#seen.keys().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    return false;
  }
}
