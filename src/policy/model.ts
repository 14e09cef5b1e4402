/**
 * The compiled policy: an immutable snapshot of a policy repo at one commit, after
 * parsing, schema validation and semantic checks. Every loop decides against one of
 * these; a new commit produces a new snapshot, and an invalid commit produces none (the
 * last good snapshot stays in force).
 *
 * Quantities are already parsed: cpu in millicores, memory and other resources in
 * their base unit (bytes, or a plain count for extended resources such as
 * nvidia.com/gpu). Durations are milliseconds.
 *
 * The raw document shapes live in `schemas/*.schema.json` (the single source of
 * truth) and `src/policy/generated/`; this file is what the rest of tollgate sees.
 */

/** A map from resource name (`cpu`, `memory`, `nvidia.com/gpu`, ...) to a base-unit amount; cpu is in millicores. */
export type ResourceAmounts = Readonly<Record<string, number>>;

/** Where a compiled object came from, so every decision can name the file that made it. */
export interface Source {
  readonly file: string; // path inside the policy repo, e.g. "tenants/ml-training.yaml"
  readonly document: number; // 0-based index of the YAML document in that file
}

export interface LabelSelector {
  readonly matchLabels: Readonly<Record<string, string>>;
  readonly matchExpressions: readonly {
    readonly key: string;
    readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    readonly values: readonly string[];
  }[];
}

export interface Pacing {
  /** Released but not yet scheduled (no nodeName), at most this many at once. */
  readonly maxInFlight: number;
  /** Token-bucket rate of gate removals. */
  readonly releasesPerSecond: number;
  /** At most this many releases decided in one pass. */
  readonly batchSize: number;
}

export interface Tenant {
  readonly name: string;
  readonly source: Source;
  readonly namespaces: readonly string[];
  readonly gatePrefixes: readonly string[];
  /** Fair-share weight among tenants (default 1). */
  readonly weight: number;
  /** Budget of released-but-unfinished pods: a count and resource sums (requests). Absent key = unlimited. */
  readonly budget: {
    readonly pods?: number;
    readonly resources: ResourceAmounts;
    /** Whether pods tollgate never released (no `tollgate.io/released` mark) count once they can be scheduled (default Charge). */
    readonly neverGatedPods: 'Charge' | 'Ignore';
    /**
     * How long a node's Ready condition may be other than True before the released pods
     * bound to it stop being charged (default 5m, the node lifecycle controller's eviction).
     */
    readonly unreadyNodeGraceMs: number;
  };
  readonly pacing: Pacing;
  /** What happens to a gate under the tenant's prefixes that no GatePolicy names (default Review). */
  readonly orphanedGates: 'Review' | 'Release' | 'Cancel';
}

export type ObjectRef = {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string; // defaults to the pod's namespace for namespaced kinds
  readonly name: string;
};

export type GateCondition =
  | { readonly type: 'Budget' }
  | { readonly type: 'ImagePresent'; readonly minNodes: number }
  | {
      readonly type: 'ObjectCondition';
      readonly object: ObjectRef;
      /** Either a `status.conditions[type=X]` check ... */
      readonly conditionType?: string;
      readonly status?: string; // default "True"
      /** ... or a dotted field path compared to a string, e.g. `data.ready` == "true". */
      readonly field?: string;
      readonly equals?: string;
    }
  | {
      readonly type: 'GangComplete';
      /** Pods with the same value of this label form one gang. */
      readonly groupLabel: string;
      /** Annotation (or label) on members giving the gang's expected size. */
      readonly sizeAnnotation: string;
    }
  | { readonly type: 'Approved' }
  | {
      /** Release only inside one of these windows (decide/schedule.ts). */
      readonly type: 'Schedule';
      readonly windows: readonly { readonly cron: string; readonly timeZone: string }[];
    };

export type ExpiryAction = 'Review' | 'Cancel' | 'Release';

export interface GatePolicy {
  readonly name: string;
  readonly source: Source;
  readonly tenant: string;
  /** The full gate name, under one of the tenant's prefixes. */
  readonly gate: string;
  readonly selector: LabelSelector;
  /** Higher is released first (within fair share). */
  readonly priority: number;
  /** Hold every pod this policy gates (reason Suspended), expiry included. */
  readonly suspend?: boolean;
  /** Cancel every pod this policy still gates (deleted, reason Drained); released pods run on. */
  readonly drain?: boolean;
  readonly conditions: readonly GateCondition[];
  readonly expiry?: { readonly afterMs: number; readonly action: ExpiryAction };
  /** Backoff of condition re-checks for a held pod. */
  readonly recheck: {
    readonly initialMs: number;
    readonly maxMs: number;
    readonly maxAttempts: number;
  };
  /** Optional per-policy pacing, applied on top of the tenant's. */
  readonly pacing?: Partial<Pacing>;
}

export interface Bounds {
  readonly min: number;
  readonly max: number;
  readonly step: number;
}

export interface ResourceBounds {
  readonly cpu?: Bounds; // millicores
  readonly memory?: Bounds; // bytes
}

export interface Signal {
  readonly name: string;
  /** PromQL; `$namespace`, `$pod` and `$container` are substituted before the query is sent. */
  readonly query: string;
  /** Scale up when the value is above this for the whole window. */
  readonly scaleUpAbove?: number;
  /** Scale down when the value is below this for the whole window. */
  readonly scaleDownBelow?: number;
  /** The resources this signal speaks for; absent = cpu and memory. */
  readonly resources?: readonly ('cpu' | 'memory')[];
}

export interface ResizePolicy {
  readonly name: string;
  readonly source: Source;
  readonly tenant: string;
  readonly selector: LabelSelector;
  /** Per-container bounds, keyed by container name. */
  readonly containers: Readonly<Record<string, ResourceBounds>>;
  /** Pod-level resources (spec.resources) bounds, when the workload uses them. */
  readonly pod?: ResourceBounds;
  readonly signals: readonly Signal[];
  /** An SLO query; a value above `above` for longer than `forMs` triggers rollback. */
  readonly slo?: { readonly query: string; readonly above: number; readonly forMs: number };
  readonly windowMs: number;
  /** Fraction past a threshold a signal must reach before it counts (0.1 = 10%). */
  readonly hysteresis: number;
  readonly cooldownMs: number;
  readonly deferredTimeoutMs: number;
  readonly maxAttempts: number;
  readonly rollback: { readonly onOOMKilled: boolean; readonly pauseForReview: boolean };
  /** Whether a resize that restarts a container (its resizePolicy says RestartContainer) is allowed. */
  readonly allowRestart: boolean;
  /** When a workload pauses besides a rollback: restarts since tollgate's last resize, a resize stuck, signals unreadable. */
  readonly pause: {
    readonly restarts: number;
    readonly stuckMs: number;
    readonly unreadableMs: number;
  };
  /** `Observe`: decide and record what would be done, write nothing. Absent = `Act`. */
  readonly mode?: 'Act' | 'Observe';
}

export type DecisionKindName = 'Release' | 'Cancel' | 'ExpireRelease' | 'Rollback' | 'Resize';

export interface StalenessPolicy {
  readonly name: string;
  readonly source: Source;
  /** Cache lag beyond which a destructive decision first takes a live read. */
  readonly maxCacheLagMs: number;
  /** Decision kinds that count as destructive. */
  readonly destructive: readonly DecisionKindName[];
  readonly requeue: { readonly baseMs: number; readonly maxMs: number };
  readonly liveReads: {
    readonly qps: number;
    readonly burst: number;
    readonly breaker: { readonly failureThreshold: number; readonly openMs: number };
  };
}

export type ApprovalAction = 'Release' | 'Cancel' | 'Resume';

export type ApprovalTarget =
  | {
      readonly kind: 'Pod';
      readonly namespace: string;
      readonly name: string;
      /** The pod's uid: the approval binds to that one pod, never to a later one of the same name. */
      readonly uid?: string;
    }
  /** The pods of a namespace a label selector picks. */
  | { readonly kind: 'Pods'; readonly namespace: string; readonly selector: LabelSelector }
  /** One gang of a GatePolicy with a GangComplete condition: members share `groupLabel: gang`. */
  | {
      readonly kind: 'Gang';
      readonly gatePolicy: string;
      readonly namespace: string;
      readonly groupLabel: string;
      readonly gang: string;
    }
  /** Every pod the GatePolicy gates. */
  | { readonly kind: 'GatePolicy'; readonly name: string }
  | {
      readonly kind: 'ResizePolicy';
      readonly name: string;
      readonly namespace?: string;
      readonly pod?: string;
    };

export interface Approval {
  readonly name: string;
  readonly source: Source;
  readonly action: ApprovalAction;
  /** A pod or a group of pods (Release/Cancel), or a ResizePolicy workload (Resume). */
  readonly target: ApprovalTarget;
  readonly approvedBy: string;
  readonly reason: string;
  /** Epoch ms after which the approval no longer counts. */
  readonly expiresAt?: number;
  /**
   * Epoch ms the approval was merged (its file's commit time in Git; for a folder, when it
   * was first read): a pod target without a uid, and every group target, binds only to
   * pods created by then. Set by the policy source (approval-times.ts), not by compile.
   */
  readonly mergedAt?: number;
}

export interface Settings {
  readonly source?: Source;
  /** Name of this cluster in audit paths and trailers. */
  readonly cluster: string;
  readonly audit: {
    readonly branch: string; // default "tollgate/audit"
    /** A separate repo URL for the audit trail; absent = the policy repo. */
    readonly repo?: string;
    readonly mode: 'strict' | 'async';
    readonly batch: { readonly maxDecisions: number; readonly maxDelayMs: number };
    /** Hours of folders the tip's tree keeps (audit/window.ts); 0 keeps them all. */
    readonly windowHours: number;
  };
  readonly prometheus?: { readonly url: string };
  /** Global release pacing across all tenants. */
  readonly pacing: Pacing;
}

export interface Policy {
  /** The commit SHA (or a content hash for a plain directory) this snapshot was built from. */
  readonly commit: string;
  readonly settings: Settings;
  readonly tenants: ReadonlyMap<string, Tenant>;
  readonly gatePolicies: readonly GatePolicy[];
  readonly resizePolicies: readonly ResizePolicy[];
  readonly staleness: StalenessPolicy;
  readonly approvals: readonly Approval[];
}
