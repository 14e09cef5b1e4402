/**
 * A cluster view whose watch lags on demand: wraps a real informer source so that, while
 * held, its watch events are kept back, and delivered in order on release. Lists pass
 * through. The stale-guard e2e tests hold a view behind tollgate's own writes with it.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ResourceSource } from '../../src/cluster/source.ts';

export type HoldableSource = ResourceSource & { hold(): void; release(): void };

export function holdable(source: ResourceSource): HoldableSource {
  let held = false;
  const backlog: (() => void)[] = [];
  return {
    description: source.description,
    list: (options) => source.list(options),
    watch(start, onEvent, onDone) {
      return source.watch(
        start,
        (type, object: KubernetesObject) => {
          if (held) backlog.push(() => onEvent(type, object));
          else onEvent(type, object);
        },
        onDone,
      );
    },
    hold() {
      held = true;
    },
    release() {
      held = false;
      for (const deliver of backlog.splice(0)) deliver();
    },
  };
}
