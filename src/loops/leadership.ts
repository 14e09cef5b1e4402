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
import type { Dispatcher, WriteExecutor } from '../dispatch/types.ts';
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

/**
 * Binds each write to the leader term it was DECIDED under. The dispatcher's fence only
 * asks "is some term open right now?"; with this, a write queued during a term that has
 * ended is cancelled and never sent, even if a new term has begun meanwhile.
 *
 * A write already IN FLIGHT when its term ends is left to finish: it was sent while the
 * fence was open, aborting the HTTP request would not unsend it, and its real result
 * (applied or not) is what the audit trail must record. Aborting it would record
 * "cancelled" for a gate that may well be gone.
 */
export class TermWrites {
  readonly #sending = new Set<string>();

  /** Wraps the executor so the binding knows which writes have been sent. */
  executor(inner: WriteExecutor): WriteExecutor {
    return async (request, signal) => {
      this.#sending.add(request.decisionId);
      try {
        return await inner(request, signal);
      } finally {
        this.#sending.delete(request.decisionId);
      }
    };
  }

  /** The dispatcher as the loops of one term see it. */
  bind(dispatcher: Dispatcher, term: AbortSignal): Dispatcher {
    const queued = new Map<string, AbortController>();
    const onTermEnd = (): void => {
      for (const [decisionId, controller] of queued) {
        if (!this.#sending.has(decisionId)) controller.abort(term.reason);
      }
      queued.clear();
    };
    term.addEventListener('abort', onTermEnd, { once: true });
    return {
      enqueue: (request) => {
        const controller = new AbortController();
        if (term.aborted) controller.abort(term.reason);
        else queued.set(request.decisionId, controller);
        const signal = request.signal
          ? AbortSignal.any([request.signal, controller.signal])
          : controller.signal;
        const result = dispatcher.enqueue({ ...request, signal });
        if (result.accepted) void result.done.finally(() => queued.delete(request.decisionId));
        else queued.delete(request.decisionId);
        return result;
      },
      whenNotFull: (signal, band) =>
        dispatcher.whenNotFull(signal ? AbortSignal.any([signal, term]) : term, band),
      cancel: (key, reason) => dispatcher.cancel(key, reason),
      get depth() {
        return dispatcher.depth;
      },
      close: (options) => dispatcher.close(options),
    };
  }
}
