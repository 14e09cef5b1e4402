/* Generated from schemas/Settings.schema.json by scripts/gen-types.ts (npm run schemas:types). Do not edit. */

/**
 * Root settings of a policy repository, in `tollgate.yaml` at the top of the policy folder. Exactly one per repository.
 */
export interface Settings {
  /**
   * Version of the tollgate policy language.
   */
  apiVersion: 'tollgate.io/v1alpha1';
  /**
   * Always `Settings`.
   */
  kind: 'Settings';
  /**
   * Identity of this Settings.
   */
  metadata?: {
    /**
     * Name of the Settings, unique among documents of this kind (lower-case DNS label).
     */
    name: string;
    /**
     * Free text for people reading the policy; ignored by tollgate.
     */
    description?: string;
  };
  /**
   * Cluster-wide settings.
   */
  spec: {
    /**
     * Name of this cluster in audit paths and commit trailers.
     */
    cluster: string;
    /**
     * Where and how decisions are written back to Git.
     */
    audit?: {
      /**
       * Branch that receives audit commits.
       */
      branch?: string;
      /**
       * A separate HTTP(S) repository for the audit trail; absent means the policy repository. Never put credentials in it: the token comes from the environment.
       */
      repo?: string;
      /**
       * `strict`: an intent is pushed before its API write is sent. `async`: writes go first and records follow in batches.
       */
      mode?: 'strict' | 'async';
      /**
       * Hours of this cluster's audit folders the branch's tip tree keeps before the newest file, in whole hours (`168h`: a week). Older folders leave the tip's tree, never the history: `tollgate audit`, `explain` and recovery read the history. The longer the window, the more a new leader's first fetch brings. `0h` keeps every folder in the tip's tree. Takes effect at restart.
       */
      window?: string;
      /**
       * Group commit limits.
       */
      batch?: {
        /**
         * Decisions per audit commit, at most.
         */
        maxDecisions?: number;
        /**
         * Longest a decision waits for its commit. A duration: a sequence of numbers with units ms, s, m, h, d.
         */
        maxDelay?: string;
      };
    };
    /**
     * Prometheus that answers the ResizePolicy signal queries.
     */
    prometheus?: {
      /**
       * Base URL of the Prometheus HTTP API.
       */
      url: string;
    };
    /**
     * Global release pacing across all tenants.
     */
    pacing?: {
      /**
       * Released but not yet scheduled (no nodeName), at most this many at once.
       */
      maxInFlight?: number;
      /**
       * Token-bucket rate of gate removals per second.
       */
      releasesPerSecond?: number;
      /**
       * At most this many releases decided in one pass.
       */
      batchSize?: number;
    };
  };
}
