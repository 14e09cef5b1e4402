/* Generated from schemas/GatePolicy.schema.json by scripts/gen-types.ts (npm run schemas:types). Do not edit. */

/**
 * Which gated pods of a tenant are released, under which conditions, in which order and how fast; and what happens when they wait too long.
 */
export interface GatePolicy {
  /**
   * Version of the tollgate policy language.
   */
  apiVersion: 'tollgate.io/v1alpha1';
  /**
   * Always `GatePolicy`.
   */
  kind: 'GatePolicy';
  /**
   * Identity of this GatePolicy.
   */
  metadata: {
    /**
     * Name of the GatePolicy, unique among documents of this kind (lower-case DNS label).
     */
    name: string;
    /**
     * Free text for people reading the policy; ignored by tollgate.
     */
    description?: string;
  };
  /**
   * The gate, the pods and the release rules.
   */
  spec: {
    /**
     * Name of the Tenant this policy belongs to.
     */
    tenant: string;
    /**
     * Full scheduling gate name; must fall under one of the tenant's gate prefixes.
     */
    gate: string;
    /**
     * Kubernetes label selector over the pods of the tenant's namespaces. Empty selects every pod there.
     */
    selector?: {
      /**
       * Labels a pod must carry with exactly these values.
       */
      matchLabels?: {
        [k: string]: string;
      };
      /**
       * Set-based requirements, all of which must hold.
       *
       * @maxItems 32
       */
      matchExpressions?: {
        /**
         * Label key.
         */
        key: string;
        /**
         * How the key relates to the values.
         */
        operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
        /**
         * Values for In and NotIn; must be empty for Exists and DoesNotExist.
         *
         * @maxItems 64
         */
        values?: string[];
      }[];
    };
    /**
     * Hold every pod this policy gates (Hold reason Suspended), expiry included, until a commit sets it back to false; a Cancel approval still applies.
     */
    suspend?: boolean;
    /**
     * Stop admitting and cancel what waits: every pod this policy still gates is deleted (a Cancel record each, reason Drained; needs the cancel component's pod delete grant), even while suspended; pods it already released run on. Nothing is released until a commit sets it back to false.
     */
    drain?: boolean;
    /**
     * Higher is released first, within fair share.
     */
    priority?: number;
    /**
     * All must hold before a pod is released. Each is observable and recorded with its value in the audit trail.
     *
     * @maxItems 16
     */
    conditions?: (
      | {
          type: 'Budget';
        }
      | {
          type: 'ImagePresent';
          /**
           * Ready nodes that must hold every image of the pod.
           */
          minNodes?: number;
        }
      | {
          type: 'ObjectCondition';
          /**
           * The object to observe.
           */
          object: {
            /**
             * API version, e.g. `v1` or `example.com/v1`.
             */
            apiVersion: string;
            /**
             * Kind, e.g. `ConfigMap`.
             */
            kind: string;
            /**
             * Namespace of the object; defaults to the pod's. Must be one of the tenant's namespaces.
             */
            namespace?: string;
            /**
             * Object name.
             */
            name: string;
          };
          /**
           * Checks `status.conditions[type=conditionType].status`.
           */
          conditionType?: string;
          /**
           * Expected condition status.
           */
          status?: string;
          /**
           * Dotted field path compared to `equals`.
           */
          field?: string;
          /**
           * Expected string value of `field`.
           */
          equals?: string;
        }
      | {
          type: 'GangComplete';
          /**
           * Pods with the same value of this label form one gang.
           */
          groupLabel: string;
          /**
           * Annotation (or label) on members giving the gang's expected size.
           */
          sizeAnnotation: string;
        }
      | {
          type: 'Approved';
        }
      | {
          type: 'Schedule';
          /**
           * A pod is released only in a minute (a second, for six fields) one of these expressions matches.
           *
           * @minItems 1
           * @maxItems 16
           */
          windows: [
            {
              /**
               * Five fields (minute hour day-of-month month day-of-week) or six (seconds first). `* 1-4 * * *` is 01:00 to 05:00.
               */
              cron: string;
              /**
               * IANA time zone the expression is read in.
               */
              timeZone: string;
            },
            ...{
              /**
               * Five fields (minute hour day-of-month month day-of-week) or six (seconds first). `* 1-4 * * *` is 01:00 to 05:00.
               */
              cron: string;
              /**
               * IANA time zone the expression is read in.
               */
              timeZone: string;
            }[],
          ];
        }
    )[];
    /**
     * What happens when a pod stays gated too long.
     */
    expiry?: {
      /**
       * Time since the gate was set. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      after: string;
      /**
       * `Review`: keep gated and list for review (a merged Approval decides); `Cancel`: delete the pod with a reason; `Release`: release anyway.
       */
      action: 'Review' | 'Cancel' | 'Release';
    };
    /**
     * Backoff of condition re-checks for a held pod.
     */
    recheck?: {
      /**
       * First re-check delay. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      initial?: string;
      /**
       * Longest re-check delay. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      max?: string;
      /**
       * Re-checks before the pod is only re-examined on change.
       */
      maxAttempts?: number;
    };
    /**
     * Optional per-policy pacing, applied on top of the tenant's.
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
