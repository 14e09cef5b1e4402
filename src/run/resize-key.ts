/**
 * The resize state key, checked at start: without `--resize-state-key-file` each process
 * seals resize state with a random key of its own, so after a restart or a failover the
 * successor rejects (and alerts on) every state its predecessor stored. tollgate still
 * starts (a cluster without ResizePolicies needs no key), but says so loudly:
 * `tollgate_resize_state_key_missing` is 1, and at each leader term while ResizePolicies
 * exist, a log warning and a Warning Event `ResizeStateKeyMissing` on tollgate's Lease.
 * deploy/ and the chart always mount the key (docs/install.md, "The resize state key").
 */
import { Gauge } from 'prom-client';
import type { EventRecord } from '../cluster/events.ts';
import type { Logger } from '../observe/log.ts';
import { registry } from '../observe/metrics.ts';

export const resizeStateKeyMissing = new Gauge({
  name: 'tollgate_resize_state_key_missing',
  help: 'Whether tollgate runs without --resize-state-key-file (1): resize state is sealed with a key of this process alone and is rejected after a restart or failover.',
  registers: [registry],
});

const note =
  'no resize state key configured (--resize-state-key-file, TOLLGATE_RESIZE_STATE_KEY_FILE): resize state on pods is sealed with a key of this process alone, so after a restart or a failover it is rejected and ignored; mount the Secret tollgate-resize-state-key (docs/install.md)';

/**
 * Sets the gauge; returns what to do at each term start: warn and record the Event when
 * no key is configured and the policy in force has ResizePolicies.
 */
export function watchResizeStateKey(
  stateKeyFile: string | undefined,
  resizePolicies: () => number,
  record: (event: EventRecord) => void,
  log: Logger,
): () => void {
  resizeStateKeyMissing.set(stateKeyFile === undefined ? 1 : 0);
  return () => {
    if (stateKeyFile !== undefined || resizePolicies() === 0) return;
    log.warn({ resizePolicies: resizePolicies() }, note);
    record({ type: 'Warning', reason: 'ResizeStateKeyMissing', action: 'SealResizeState', note });
  };
}
