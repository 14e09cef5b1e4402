/**
 * Priority bands of the write dispatcher (see `WriteBand` in types.ts). A band is chosen
 * by what a write does for safety, never by a GatePolicy's priority: Cancel deletes are
 * safety by operation; a resize rollback or an expiry mark says so with `band`.
 */
import type { WriteBand, WriteRequest } from './types.ts';

export const writeBands: readonly WriteBand[] = ['safety', 'work', 'background'];

/** The band a request is served in: its own, or the default of its operation. */
export function bandOf(request: Pick<WriteRequest, 'band' | 'op'>): WriteBand {
  if (request.band) return request.band;
  switch (request.op.type) {
    case 'delete':
      return 'safety';
    case 'event':
    case 'podCondition':
      return 'background';
    default:
      return 'work';
  }
}

/** Lower is served first. */
export function bandRank(band: WriteBand): number {
  return band === 'safety' ? 0 : band === 'work' ? 1 : 2;
}

/**
 * The band of a gate-release loop write: a Cancel (delete), an expiry's Review mark
 * (annotate) and an expiry-forced release are safety writes; other releases are work.
 */
export function releaseWriteBand(write: {
  readonly op: { readonly type: string };
  readonly expiryForced: boolean;
}): WriteBand {
  return write.op.type === 'delete' || write.op.type === 'annotate' || write.expiryForced
    ? 'safety'
    : 'work';
}
