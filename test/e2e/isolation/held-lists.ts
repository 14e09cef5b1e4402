/**
 * A slow relist on demand: wraps the view's real pod source so that, while held, each
 * list call waits until released (or until the informer aborts it). Watches pass through.
 * The namespace-added test holds the relist a new namespace starts, so a pass that
 * planned without waiting for it would release next to running pods it has not seen.
 */
import type { ResourceSource, ResourceTarget } from '../../../src/cluster/source.ts';

export interface HeldLists {
  wrap(target: ResourceTarget, source: ResourceSource): ResourceSource;
  hold(): void;
  release(): void;
  /** Pod lists that have waited on a hold so far. */
  readonly waited: number;
}

export function heldPodLists(): HeldLists {
  let gate: { promise: Promise<void>; open: () => void } | undefined;
  let waited = 0;
  const wait = (signal: AbortSignal): Promise<void> => {
    if (!gate) return Promise.resolve();
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    waited += 1;
    const { promise } = gate;
    return new Promise((resolve, reject) => {
      const abort = () => reject(signal.reason as Error);
      signal.addEventListener('abort', abort, { once: true });
      void promise.then(() => {
        signal.removeEventListener('abort', abort);
        resolve();
      });
    });
  };
  return {
    wrap(target, source) {
      if (target.kind !== 'Pod') return source;
      return {
        description: source.description,
        async list(options) {
          await wait(options.signal);
          return source.list(options);
        },
        watch: (start, onEvent, onDone) => source.watch(start, onEvent, onDone),
      };
    },
    hold() {
      let open = () => {};
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate ??= { promise, open };
    },
    release() {
      gate?.open();
      gate = undefined;
    },
    get waited() {
      return waited;
    },
  };
}
