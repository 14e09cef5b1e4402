/**
 * Step-ups the resize loop has promised against a namespace's ResourceQuota, until the
 * view shows the quota's raised `used`: the next pod of that namespace decided in the
 * same pass (or the next, while the view lags) sees the room the step takes.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { ResourceQuotaLike } from '../decide/resize-objects.ts';
import type { PodResizePlan } from '../decide/resize-plan.ts';
import { chargeQuotas, resizeCharge, type QuotaCharge } from '../decide/resize-quota.ts';
import type { Clock } from '../lib/clock.ts';

/** A step-up promised against a namespace's quota, until the view shows it. */
export interface QuotaHold {
  readonly namespace: string;
  readonly charge: QuotaCharge;
  /** The resourceVersion the resize write returned; unset while it is in flight. */
  writtenAt?: { resourceVersion: string; at: number };
}

/** Compares resourceVersions numerically (etcd revisions); a non-numeric one never counts as caught up. */
export function atLeast(seen: string | undefined, wanted: string): boolean {
  if (seen === undefined) return false;
  try {
    return BigInt(seen) >= BigInt(wanted);
  } catch {
    return seen === wanted;
  }
}

export interface QuotaHoldsOptions {
  /** ResourceQuotas of a namespace, when the view has them. */
  readonly quotas?: ((namespace: string) => readonly ResourceQuotaLike[]) | undefined;
  /** The newest resourceVersion the quota source has seen. */
  readonly quotasSeenThrough?: (() => string | undefined) | undefined;
  readonly clock: Clock;
  /** A charge whose write succeeded is dropped after this long even if unconfirmed. */
  readonly chargeMaxAgeMs: number;
}

export class QuotaHolds {
  readonly #holds = new Set<QuotaHold>();
  readonly #options: QuotaHoldsOptions;

  constructor(options: QuotaHoldsOptions) {
    this.#options = options;
  }

  /** The namespace's quotas as they will be once the step-ups still charged are admitted. */
  quotasFor(namespace: string): ResourceQuotaLike[] {
    const seen = this.#options.quotasSeenThrough?.();
    const now = this.#options.clock.now();
    const charges: QuotaCharge[] = [];
    for (const hold of this.#holds) {
      const written = hold.writtenAt;
      if (
        written &&
        (atLeast(seen, written.resourceVersion) || now - written.at >= this.#options.chargeMaxAgeMs)
      ) {
        this.#holds.delete(hold);
        continue;
      }
      if (hold.namespace === namespace) charges.push(hold.charge);
    }
    const quotas = this.#options.quotas?.(namespace) ?? [];
    return quotas.length === 0 ? [] : chargeQuotas(quotas, charges);
  }

  /** Charges a planned step-up against its namespace's quota until the view shows it. */
  charge(pod: V1Pod, plan: PodResizePlan): QuotaHold | undefined {
    const namespace = pod.metadata?.namespace ?? '';
    // A namespace without a quota has nothing to charge.
    const quotas = this.#options.quotas;
    if (!quotas || quotas(namespace).length === 0) return undefined;
    for (const write of plan.writes) {
      const charge = resizeCharge(pod, write.op);
      if (!charge) continue;
      const hold: QuotaHold = { namespace, charge };
      this.#holds.add(hold);
      return hold;
    }
    return undefined;
  }

  /**
   * After the pod's turn: a step not admitted frees its room at once; with no quota
   * source to confirm against, an admitted one is released once its write has ended.
   */
  settle(hold: QuotaHold | undefined): void {
    if (hold && (!hold.writtenAt || !this.#options.quotasSeenThrough)) this.#holds.delete(hold);
  }
}
