/**
 * Runs work only while this replica leads: starts it when a term begins, stops it when
 * the term ends, and never lets two generations overlap (a new term waits for the old
 * generation's stop to finish). The fence in the dispatcher already refuses writes the
 * moment the term closes; stopping the loops here stops them from deciding at all, so a
 * standby spends nothing on passes whose writes would be refused.
 *
 * Failure modes: a start that throws is logged and retried on the next term (the
 * replica stays a standby in the meantime, still fenced); a stop that throws is logged
 * and the generation is dropped anyway.
 */
import type { Logger } from '../observe/log.ts';

export interface LeaderTermLike {
  readonly signal: AbortSignal;
}

export interface ElectorLike {
  onStartedLeading(listener: (term: LeaderTermLike) => void): void;
  onStoppedLeading(listener: (term: LeaderTermLike) => void): void;
}

/** What runs during one term. */
export interface Generation {
  stop(): Promise<void>;
}

export class WhileLeader {
  readonly #start: (term: LeaderTermLike) => Generation | Promise<Generation>;
  readonly #log: Logger;
  #current: Promise<Generation | undefined> = Promise.resolve(undefined);
  #closed = false;
  /** Terms begun, for tests and logs. */
  generations = 0;

  constructor(
    elector: ElectorLike,
    start: (term: LeaderTermLike) => Generation | Promise<Generation>,
    log: Logger,
  ) {
    this.#start = start;
    this.#log = log;
    elector.onStartedLeading((term) => this.#begin(term));
    elector.onStoppedLeading(() => void this.#end());
  }

  #begin(term: LeaderTermLike): void {
    if (this.#closed) return;
    this.#current = this.#end().then(async () => {
      if (this.#closed || term.signal.aborted) return undefined;
      try {
        const generation = await this.#start(term);
        this.generations += 1;
        // The term may have ended while the loops were starting.
        if (term.signal.aborted) {
          await generation.stop();
          return undefined;
        }
        return generation;
      } catch (error) {
        this.#log.error({ err: error }, 'loops failed to start for this leader term; standing by');
        return undefined;
      }
    });
  }

  #end(): Promise<void> {
    const previous = this.#current;
    this.#current = previous.then(async (generation) => {
      if (!generation) return undefined;
      try {
        await generation.stop();
      } catch (error) {
        this.#log.error({ err: error }, 'loops did not stop cleanly');
      }
      return undefined;
    });
    return this.#current.then(() => undefined);
  }

  /** Stops the running generation, if any, and starts no more. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#end();
  }
}
