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
 * and what the API server answers (`ApiResizeSupport`, from `loops/resize-api-probe.ts`):
 *
 * - whether it serves `pods/resize` (discovery of the core group);
 * - whether it accepts a pod-level resize (a server-side dry-run of a one-unit increase of
 *   a managed pod's `spec.resources`, on a node that declares the feature: nothing is
 *   stored).
 *
 * `policyResizeSupport` says per ResizePolicy, over the nodes of the cluster and the API
 * server's answer, what will and will not happen: for `tollgate plan` and `/readyz?verbose`.
 */
import { byCodeUnits } from '../lib/compare.ts';
import type { ResizePolicy } from '../policy/model.ts';
import type { ResizeNodeLike, ResizePodLike } from './resize-objects.ts';

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

/** What the API server answered about resize; `undefined` fields were not learnt. */
export interface ApiResizeSupport {
  /** Discovery: `pods/resize` is served with `patch` (false), or discovery failed (undefined). */
  readonly resizeServed?: boolean;
  /** The server-side dry-run of a pod-level resize. */
  readonly podLevel: PodLevelAnswer;
}

export interface PodLevelAnswer {
  /** `refused` only when the API server refused the pod-level change itself. */
  readonly verdict: 'accepted' | 'refused' | 'unknown';
  readonly detail: string;
}

/**
 * The dry-run's answer: accepted (2xx), refused when the API server rejected the change of
 * `spec.resources` as invalid (the pod-level resize it does not support), otherwise unknown
 * (no permission, over the node's allocatable, unreachable: nothing learnt about the feature).
 */
export function podLevelAnswer(
  pod: string,
  answer: { readonly code?: number; readonly message?: string },
): PodLevelAnswer {
  const message = answer.message ?? '';
  if (answer.code !== undefined && answer.code >= 200 && answer.code < 300)
    return {
      verdict: 'accepted',
      detail: `accepted by the API server (server-side dry-run on ${pod})`,
    };
  if ((answer.code === 422 || answer.code === 400) && /spec\.resources\b/.test(message))
    return {
      verdict: 'refused',
      detail: `refused by the API server (dry-run on ${pod}): ${message}`,
    };
  return {
    verdict: 'unknown',
    detail:
      `not learnt from the API server (dry-run on ${pod}: ${answer.code ?? 'no answer'} ${message})`.trim(),
  };
}

/** The API server's answer as lines for plan and /readyz; none when nothing was asked. */
function apiLines(policy: Pick<ResizePolicy, 'pod'>, api: ApiResizeSupport | undefined): string[] {
  if (!api) return [];
  const served =
    api.resizeServed === undefined
      ? 'API server: pods/resize not known (discovery failed)'
      : api.resizeServed
        ? 'API server: pods/resize served'
        : 'API server: pods/resize not served, so nothing is resized';
  return policy.pod ? [served, `API server: pod-level resize ${api.podLevel.detail}`] : [served];
}

/** Why the API server's answer stops this pod's resizes, or this pod's pod-level resize. */
export function apiRefusal(api: ApiResizeSupport | undefined): {
  readonly all?: string;
  readonly podLevel?: string;
} {
  return {
    ...(api?.resizeServed === false
      ? { all: 'the API server does not serve pods/resize (discovery)' }
      : {}),
    ...(api?.podLevel.verdict === 'refused'
      ? { podLevel: `pod-level resize ${api.podLevel.detail}` }
      : {}),
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
  api?: ApiResizeSupport,
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
  return { policy: policy.name, lines: [...lines, ...apiLines(policy, api)] };
}

/**
 * The pod to ask the API server about pod-level resize: the first (by namespace/name) pod
 * of a pod-level ResizePolicy that has pod-level resources, on a node that declares the
 * feature (so a refusal is the API server's, not the node's); undefined when none.
 */
export function podLevelProbeCandidate<P extends ResizePodLike>(
  byPolicy: ReadonlyMap<Pick<ResizePolicy, 'pod'>, readonly P[]>,
  nodes: readonly ResizeNodeLike[],
): P | undefined {
  const able = new Set(
    nodes.filter((n) => nodeResizeSupport(n).podLevel).map((n) => n.metadata?.name ?? ''),
  );
  const key = (p: ResizePodLike) => `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`;
  return [...byPolicy]
    .filter(([rp]) => rp.pod !== undefined)
    .flatMap(([, pods]) => pods)
    .filter((p) => p.spec?.resources?.requests && able.has(p.spec.nodeName ?? ''))
    .sort((a, b) => byCodeUnits(key(a), key(b)))[0];
}

/**
 * What the API server's answer depends on: the nodes (name, kubelet version, declared
 * features) and the pod asked about. The loop asks again when this changes.
 */
export function apiProbeKey(
  nodes: readonly ResizeNodeLike[],
  candidate: ResizePodLike | undefined,
): string {
  const node = (n: ResizeNodeLike) =>
    [
      n.metadata?.name ?? '',
      n.status?.nodeInfo?.kubeletVersion ?? '',
      [...(n.status?.declaredFeatures ?? [])].sort().join('+'),
    ].join('|');
  const pod = candidate ? `${candidate.metadata?.namespace}/${candidate.metadata?.name}` : '';
  return `${nodes.map(node).sort().join(',')}#${pod}`;
}
