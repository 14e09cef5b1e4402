/* Generated from schemas/Approval.schema.json by scripts/gen-types.ts (npm run schemas:types). Do not edit. */

/**
 * A human decision recorded in the policy repository (usually under `approvals/`): release or cancel a held pod, or resume a paused ResizePolicy workload. Merging it is the approval.
 */
export interface Approval {
  /**
   * Version of the tollgate policy language.
   */
  apiVersion: 'tollgate.io/v1alpha1';
  /**
   * Always `Approval`.
   */
  kind: 'Approval';
  /**
   * Identity of this Approval.
   */
  metadata: {
    /**
     * Name of the Approval, unique among documents of this kind (lower-case DNS label).
     */
    name: string;
    /**
     * Free text for people reading the policy; ignored by tollgate.
     */
    description?: string;
  };
  /**
   * What is approved, by whom and why.
   */
  spec: {
    /**
     * `Release` or `Cancel` a gated pod; `Resume` a ResizePolicy workload paused after a rollback.
     */
    action: 'Release' | 'Cancel' | 'Resume';
    /**
     * A pod (Release, Cancel) or a ResizePolicy workload (Resume).
     */
    target:
      | {
          kind: 'Pod';
          /**
           * Namespace of the pod; must belong to a tenant.
           */
          namespace: string;
          /**
           * Pod name.
           */
          name: string;
          /**
           * The pod's `metadata.uid` (`kubectl get pod NAME -o jsonpath='{.metadata.uid}'`). The approval then applies to that one pod only: a later pod of the same name (a StatefulSet replica, a re-created job) is not approved. Without it the approval matches the pod by name.
           */
          uid?: string;
        }
      | {
          kind: 'ResizePolicy';
          /**
           * Name of the ResizePolicy.
           */
          name: string;
          /**
           * Only pods of this namespace (one of the policy tenant's).
           */
          namespace?: string;
          /**
           * Only this pod.
           */
          pod?: string;
        };
    /**
     * Who approved (a person or group, as your review process names them).
     */
    approvedBy: string;
    /**
     * Why; copied into the audit record.
     */
    reason: string;
    /**
     * RFC 3339 time after which the approval no longer counts.
     */
    expiresAt?: string;
  };
}
