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
     * `Release` or `Cancel` gated pods (a Pod, Pods, Gang or GatePolicy target); `Resume` a ResizePolicy workload paused after a rollback.
     */
    action: 'Release' | 'Cancel' | 'Resume';
    /**
     * A pod (Release, Cancel); a group of pods (Release, Cancel): pods a label selector picks in a namespace, a gang, or every pod of a GatePolicy; or a ResizePolicy workload (Resume). A pod named without its uid, and every group, binds only to pods created before the approval was merged (its commit time in Git), never to a later pod of the same name or group. Both times are whole seconds, so a pod created in the very second of the merge may be newer and is not reached: `tollgate plan` names it, and its uid approves it.
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
           * The pod's `metadata.uid` (`kubectl get pod NAME -o jsonpath='{.metadata.uid}'`). The approval then applies to that one pod only. Without it the approval matches the pod of that name created before the approval was merged: a later pod of the same name (a StatefulSet replica, a re-created job) is not approved.
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
        }
      | {
          kind: 'Pods';
          /**
           * Namespace of the pods; must belong to a tenant.
           */
          namespace: string;
          /**
           * Kubernetes label selector over the pods of the namespace; at least one of matchLabels and matchExpressions.
           */
          selector: {
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
        }
      | {
          kind: 'Gang';
          /**
           * The GatePolicy whose GangComplete condition defines the gang.
           */
          gatePolicy: string;
          /**
           * Namespace of the gang; one of that GatePolicy's tenant's.
           */
          namespace: string;
          /**
           * The value of the GangComplete condition's groupLabel shared by the gang's members.
           */
          gang: string;
        }
      | {
          kind: 'GatePolicy';
          /**
           * Name of the GatePolicy.
           */
          name: string;
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
