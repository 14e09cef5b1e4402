/* Generated from schemas/StalenessPolicy.schema.json by scripts/gen-types.ts (npm run schemas:types). Do not edit. */

/**
 * How tollgate avoids acting on a stale cache. At most one per repository; without one the defaults below apply.
 */
export interface StalenessPolicy {
  /**
   * Version of the tollgate policy language.
   */
  apiVersion: 'tollgate.io/v1alpha1';
  /**
   * Always `StalenessPolicy`.
   */
  kind: 'StalenessPolicy';
  /**
   * Identity of this StalenessPolicy.
   */
  metadata: {
    /**
     * Name of the StalenessPolicy, unique among documents of this kind (lower-case DNS label).
     */
    name: string;
    /**
     * Free text for people reading the policy; ignored by tollgate.
     */
    description?: string;
  };
  /**
   * Staleness limits and live-read budget.
   */
  spec: {
    /**
     * Cache lag beyond which a destructive decision first takes a live read. A duration: a sequence of numbers with units ms, s, m, h, d.
     */
    maxCacheLag?: string;
    /**
     * Decision kinds that count as destructive.
     */
    destructive?: ('Release' | 'Cancel' | 'ExpireRelease' | 'Rollback' | 'Resize')[];
    /**
     * Backoff of a decision skipped as stale.
     */
    requeue?: {
      /**
       * First delay. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      base?: string;
      /**
       * Longest delay. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      max?: string;
    };
    /**
     * Budget of live reads against the API server.
     */
    liveReads?: {
      /**
       * Sustained live reads per second.
       */
      qps?: number;
      /**
       * Live reads allowed in a burst.
       */
      burst?: number;
      /**
       * Circuit breaker on failing live reads.
       */
      breaker?: {
        /**
         * Consecutive failures that open the breaker.
         */
        failureThreshold?: number;
        /**
         * How long the breaker stays open. A duration: a sequence of numbers with units ms, s, m, h, d.
         */
        open?: string;
      };
    };
  };
}
