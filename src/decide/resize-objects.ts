/**
 * The slices of Kubernetes objects the resize decisions read, and the writes they
 * plan. decide/ may not import the client library or the dispatcher (not even types),
 * so these are structural: a `V1Pod`, `V1Node` or `V1ResourceQuota` from the cluster
 * view is assignable to them as is, and `ResizeWriteOperation` is assignable to the
 * dispatcher's `WriteOperation`.
 */

export type QuantityMap = Readonly<Record<string, string>>;

export interface ResourceRequirementsLike {
  readonly requests?: QuantityMap;
  readonly limits?: QuantityMap;
}

export interface ResizeContainerLike {
  readonly name: string;
  readonly resources?: ResourceRequirementsLike;
  readonly resizePolicy?: readonly {
    readonly resourceName: string;
    readonly restartPolicy: string;
  }[];
}

export interface ResizeConditionLike {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  readonly observedGeneration?: number;
}

export interface TerminatedLike {
  readonly reason?: string;
  readonly finishedAt?: Date | string;
}

export interface ContainerStatusLike {
  readonly name: string;
  readonly restartCount?: number;
  readonly resources?: ResourceRequirementsLike;
  readonly allocatedResources?: QuantityMap;
  readonly state?: { readonly terminated?: TerminatedLike };
  readonly lastState?: { readonly terminated?: TerminatedLike };
}

export interface ResizePodLike {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly resourceVersion?: string;
    readonly generation?: number;
    readonly deletionTimestamp?: Date | string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: {
    readonly nodeName?: string;
    readonly containers: readonly ResizeContainerLike[];
    readonly resources?: ResourceRequirementsLike;
  };
  readonly status?: {
    readonly phase?: string;
    readonly observedGeneration?: number;
    readonly conditions?: readonly ResizeConditionLike[];
    readonly containerStatuses?: readonly ContainerStatusLike[];
    readonly resources?: ResourceRequirementsLike;
  };
}

export interface ResizeNodeLike {
  readonly metadata?: { readonly name?: string };
  readonly status?: {
    readonly allocatable?: QuantityMap;
    readonly nodeInfo?: { readonly kubeletVersion?: string };
    /** Features the kubelet declares (1.35+), e.g. InPlacePodLevelResourcesVerticalScaling. */
    readonly declaredFeatures?: readonly string[];
  };
}

export interface ResourceQuotaLike {
  readonly metadata?: { readonly name?: string; readonly namespace?: string };
  readonly spec?: { readonly hard?: QuantityMap };
  readonly status?: { readonly hard?: QuantityMap; readonly used?: QuantityMap };
}

export interface ResourceListRecord {
  readonly requests?: Readonly<Record<string, string>>;
  readonly limits?: Readonly<Record<string, string>>;
}

export type ResizeWriteOperation =
  | {
      readonly type: 'resize';
      readonly containers: readonly {
        readonly name: string;
        readonly resources: ResourceListRecord;
      }[];
      readonly pod?: ResourceListRecord;
    }
  | {
      readonly type: 'annotate';
      readonly annotations: Readonly<Record<string, string | null>>;
    };

export { timestampMs } from './objects.ts';
