/* Generated from schemas/ResizePolicy.schema.json by scripts/gen-types.ts (npm run schemas:types). Do not edit. */

/**
 * In-place resize (`pods/resize`) of running pods within bounds, driven by Prometheus signals, with cooldown, Deferred/Infeasible handling and rollback.
 */
export interface ResizePolicy {
  /**
   * Version of the tollgate policy language.
   */
  apiVersion: 'tollgate.io/v1alpha1';
  /**
   * Always `ResizePolicy`.
   */
  kind: 'ResizePolicy';
  /**
   * Identity of this ResizePolicy.
   */
  metadata: {
    /**
     * Name of the ResizePolicy, unique among documents of this kind (lower-case DNS label).
     */
    name: string;
    /**
     * Free text for people reading the policy; ignored by tollgate.
     */
    description?: string;
  };
  /**
   * Which pods, which bounds, which signals.
   */
  spec: {
    /**
     * Name of the Tenant this policy belongs to.
     */
    tenant: string;
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
     * Per-container bounds keyed by container name.
     */
    containers?: {
      /**
       * Bounds of one container.
       */
      [k: string]: {
        /**
         * Bounds in cpu.
         */
        cpu?: {
          /**
           * Lowest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
           */
          min: string | number;
          /**
           * Highest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
           */
          max: string | number;
          /**
           * Granularity of each change; greater than zero. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
           */
          step: string | number;
        };
        /**
         * Bounds in memory.
         */
        memory?: {
          /**
           * Lowest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
           */
          min: string | number;
          /**
           * Highest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
           */
          max: string | number;
          /**
           * Granularity of each change; greater than zero. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
           */
          step: string | number;
        };
      };
    };
    /**
     * Pod-level resources (spec.resources) bounds, when the workload uses them.
     */
    pod?: {
      /**
       * Bounds in cpu.
       */
      cpu?: {
        /**
         * Lowest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        min: string | number;
        /**
         * Highest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        max: string | number;
        /**
         * Granularity of each change; greater than zero. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        step: string | number;
      };
      /**
       * Bounds in memory.
       */
      memory?: {
        /**
         * Lowest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        min: string | number;
        /**
         * Highest value tollgate sets. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        max: string | number;
        /**
         * Granularity of each change; greater than zero. A Kubernetes quantity (500m, 2, 1.5Gi, 256Mi) or a plain number.
         */
        step: string | number;
      };
    };
    /**
     * PromQL signals; `$namespace`, `$pod` and `$container` are substituted before a query is sent.
     *
     * @minItems 1
     * @maxItems 16
     *
     * Items: One signal.
     */
    signals: [
      {
        /**
         * Signal name, unique in the policy.
         */
        name: string;
        /**
         * PromQL returning one value per pod (or container).
         */
        query: string;
        /**
         * Scale up when the value stays above this for the whole window.
         */
        scaleUpAbove?: number;
        /**
         * Scale down when the value stays below this for the whole window.
         */
        scaleDownBelow?: number;
        /**
         * The resources this signal speaks for: cpu and memory are each decided on their own signals only. Default both (a signal that says nothing about a resource should name the other one). Whatever it speaks for, a signal that cannot be read (query error or no samples) holds every step-down of the pod.
         *
         * @minItems 1
         */
        resources?: ['cpu' | 'memory', ...('cpu' | 'memory')[]];
      },
      ...{
        /**
         * Signal name, unique in the policy.
         */
        name: string;
        /**
         * PromQL returning one value per pod (or container).
         */
        query: string;
        /**
         * Scale up when the value stays above this for the whole window.
         */
        scaleUpAbove?: number;
        /**
         * Scale down when the value stays below this for the whole window.
         */
        scaleDownBelow?: number;
        /**
         * The resources this signal speaks for: cpu and memory are each decided on their own signals only. Default both (a signal that says nothing about a resource should name the other one). Whatever it speaks for, a signal that cannot be read (query error or no samples) holds every step-down of the pod.
         *
         * @minItems 1
         */
        resources?: ['cpu' | 'memory', ...('cpu' | 'memory')[]];
      }[],
    ];
    /**
     * An SLO query; a value above `above` for longer than `for` triggers rollback.
     */
    slo?: {
      /**
       * PromQL of the SLO indicator.
       */
      query: string;
      /**
       * Breach threshold.
       */
      above: number;
      /**
       * How long a breach must last. A duration: a sequence of numbers with units ms, s, m, h, d.
       */
      for: string;
    };
    /**
     * Window over which a signal must stay past its threshold. A duration: a sequence of numbers with units ms, s, m, h, d.
     */
    window?: string;
    /**
     * Fraction past a threshold a signal must reach before it counts (0.1 = 10%).
     */
    hysteresis?: number;
    /**
     * Minimum time between two resizes of one pod. A duration: a sequence of numbers with units ms, s, m, h, d.
     */
    cooldown?: string;
    /**
     * How long a Deferred resize may wait before it is retried smaller. A duration: a sequence of numbers with units ms, s, m, h, d.
     */
    deferredTimeout?: string;
    /**
     * Attempts of one resize before giving up.
     */
    maxAttempts?: number;
    /**
     * Rollback behaviour.
     */
    rollback?: {
      /**
       * Roll back a memory decrease when a container is OOMKilled.
       */
      onOOMKilled?: boolean;
      /**
       * After a rollback, stop automating the workload until an Approval resumes it.
       */
      pauseForReview?: boolean;
    };
    /**
     * When to pause automation for a workload (besides a rollback with pauseForReview): recorded as a Pause with its cause, a TollgateResizePaused Event, resumed by an Approval with action Resume.
     */
    pause?: {
      /**
       * Container restarts (summed over the pod's containers) since tollgate's last resize of the pod that pause it.
       */
      onRestarts?: number;
      /**
       * A tollgate resize the kubelet has neither carried out nor answered (no Deferred, Infeasible or Error) this long after the request pauses the pod. A duration.
       */
      onStuckFor?: string;
      /**
       * A signal or the SLO unreadable (query error or no samples) for a pod this long pauses the pod. Counted from when it became unreadable, a time stored on the pod (sealed), so a restart of tollgate keeps counting. A duration.
       */
      onUnreadableFor?: string;
    };
    /**
     * Whether a resize that restarts a container (its resizePolicy says RestartContainer) is allowed.
     */
    allowRestart?: boolean;
    /**
     * `Act` carries decisions out. `Observe` decides exactly as `Act` would and records each decision in the audit trail (reason starting `observe-only: would`, once per change), but writes nothing to the cluster: the way to roll resize out on a service before trusting it.
     */
    mode?: 'Act' | 'Observe';
  };
}
