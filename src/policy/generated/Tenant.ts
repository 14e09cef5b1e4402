/* Generated from schemas/Tenant.schema.json by scripts/gen-types.ts (npm run schemas:types). Do not edit. */

/**
 * A team: the namespaces it owns, the gate prefixes it may use, its release budget and pacing. No policy can reach outside its tenant.
 */
export interface Tenant {
  /**
   * Version of the tollgate policy language.
   */
  apiVersion: 'tollgate.io/v1alpha1';
  /**
   * Always `Tenant`.
   */
  kind: 'Tenant';
  /**
   * Identity of this Tenant.
   */
  metadata: {
    /**
     * Name of the Tenant, unique among documents of this kind (lower-case DNS label).
     */
    name: string;
    /**
     * Free text for people reading the policy; ignored by tollgate.
     */
    description?: string;
  };
  /**
   * What the tenant owns and may release.
   */
  spec: {
    /**
     * Namespaces the tenant owns; no other tenant may claim them.
     *
     * @minItems 1
     * @maxItems 256
     *
     * Items: A namespace name.
     */
    namespaces: [string, ...string[]];
    /**
     * Prefixes of the scheduling gates the tenant's policies may use. Two tenants may not have overlapping prefixes.
     *
     * @minItems 1
     * @maxItems 32
     *
     * Items: A gate-name prefix: a DNS domain, a slash, and optionally the start of a name. It owns the gates of exactly that domain whose name extends the name start (`pt.example.io/team-` owns `pt.example.io/team-a`); case-sensitive.
     */
    gatePrefixes: [string, ...string[]];
    /**
     * Fair-share weight among tenants.
     */
    weight?: number;
    /**
     * Budget of released-but-unfinished pods. An absent key is unlimited.
     */
    budget?: {
      /**
       * Pods released and not yet finished, at most.
       */
      pods?: number;
      /**
       * Sums of requests by resource name (cpu, memory, nvidia.com/gpu, ...).
       */
      resources?: {
        /**
         * Sum of requests of this resource. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        [k: string]: string | number;
      };
      /**
       * Whether pods in the tenant's namespaces that tollgate did not release count toward the budget once they can be scheduled: pods created without a tollgate gate, pods another controller (Kueue, say) admitted, pods whose gate someone else removed. tollgate tells them apart by the annotation `tollgate.io/released`, which it writes in the same patch that removes its gate. `Charge` (the default) counts them: the budget bounds everything the tenant's namespaces run. `Ignore` counts only the pods tollgate released. A pod that still carries any scheduling gate is never charged either way. Pods released by a tollgate version that did not write the annotation count as never gated. Under `Ignore` the budget no longer bounds what the tenant's namespaces run: `tollgate validate` warns about every tenant set to it, `tollgate plan` about a proposal that sets it.
       */
      neverGatedPods?: 'Charge' | 'Ignore';
      /**
       * How long a node's Ready condition may be False or Unknown (since its last change) before the pods bound to it stop being charged to the budget. Such pods cannot run; the node lifecycle controller evicts them after about 5 minutes (the default toleration of the not-ready and unreachable taints) and their replacements must be releasable. A pod being deleted (deletionTimestamp set) is never charged, whatever this setting. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      unreadyNodeGrace?: string;
    };
    /**
     * What tollgate does with a gate under this tenant's prefixes that no GatePolicy names any more (the policy was renamed or deleted while pods carried its gate; nobody else may remove such a gate): `Review` keeps the pod gated, marks it for review (event, audit record) until an Approval decides; `Release` removes the gate; `Cancel` deletes the pod. Such pods are never charged to the budget while gated.
     */
    orphanedGates?: 'Review' | 'Release' | 'Cancel';
    /**
     * Release pacing of this tenant.
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
