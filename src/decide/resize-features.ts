/**
 * What a node can do for resize, from what it reports, so tollgate never asks a node for
 * a resize it cannot carry out (and does not learn it from the API server's refusals):
 *
 * - in-place resize of containers: the kubelet's version (`status.nodeInfo.kubeletVersion`),
 *   1.33 or later (beta on by default; GA in 1.35); older kubelets, or none reported, no;
 * - pod-level resize (`spec.resources`): the node declares
 *   `InPlacePodLevelResourcesVerticalScaling` in `status.declaredFeatures` (the API server
 *   refuses a pod-level resize on a node that does not).
 *
 * `policyResizeSupport` says per ResizePolicy, over the nodes of the cluster, what will
 * and will not happen: for `tollgate plan` and `/readyz?verbose`.
 */
import type { ResizePolicy } from '../policy/model.ts';
import type { ResizeNodeLike } from './resize-objects.ts';

export const podLevelResizeFeature = 'InPlacePodLevelResourcesVerticalScaling';
const minimumKubelet = { major: 1, minor: 33 };

export interface NodeResizeSupport {
  readonly node: string;
  readonly containers: boolean;
  readonly podLevel: boolean;
  /** Why containers cannot be resized in place here, when they cannot. */
  readonly why?: string;
}

function kubeletVersion(
  node: ResizeNodeLike,
): { text: string; major: number; minor: number } | undefined {
  const text = node.status?.nodeInfo?.kubeletVersion;
  const match = text === undefined ? null : /^v?(\d+)\.(\d+)/.exec(text);
  if (!text || !match) return undefined;
  return { text, major: Number(match[1]), minor: Number(match[2]) };
}

export function nodeResizeSupport(node: ResizeNodeLike): NodeResizeSupport {
  const name = node.metadata?.name ?? '';
  const version = kubeletVersion(node);
  const recent =
    version !== undefined &&
    (version.major > minimumKubelet.major ||
      (version.major === minimumKubelet.major && version.minor >= minimumKubelet.minor));
  const podLevel = recent && (node.status?.declaredFeatures ?? []).includes(podLevelResizeFeature);
  if (recent) return { node: name, containers: true, podLevel };
  return {
    node: name,
    containers: false,
    podLevel: false,
    why: version
      ? `kubelet ${version.text} has no in-place resize, ${minimumKubelet.major}.${minimumKubelet.minor} or later needed`
      : 'the node reports no kubelet version, so in-place resize is not assumed',
  };
}

export interface PolicyResizeSupport {
  readonly policy: string;
  /** One line per kind of resize the policy asks for, e.g. `container resize: 2 of 3 nodes (not c: …)`. */
  readonly lines: readonly string[];
}

/** Per policy: on how many nodes its container (and pod-level) resizes can happen, and why not elsewhere. */
export function policyResizeSupport(
  policy: Pick<ResizePolicy, 'name' | 'pod'>,
  nodes: readonly ResizeNodeLike[],
): PolicyResizeSupport {
  const support = nodes.map(nodeResizeSupport);
  const line = (
    what: string,
    ok: (s: NodeResizeSupport) => boolean,
    why: (s: NodeResizeSupport) => string,
  ) => {
    const not = support.filter((s) => !ok(s));
    const reasons = [...new Set(not.map(why))];
    const detail =
      not.length === 0
        ? ''
        : reasons.length === 1
          ? ` (not ${not.map((s) => s.node).join(', ')}: ${reasons[0]})`
          : ` (not ${not.map((s) => `${s.node}: ${why(s)}`).join('; ')})`;
    return `${what}: ${support.length - not.length} of ${support.length} nodes${detail}`;
  };
  const lines = [
    line(
      'container resize',
      (s) => s.containers,
      (s) => s.why ?? '',
    ),
  ];
  if (policy.pod) {
    lines.push(
      line(
        'pod-level resize',
        (s) => s.podLevel,
        () => `the node does not declare ${podLevelResizeFeature}`,
      ),
    );
  }
  return { policy: policy.name, lines };
}
