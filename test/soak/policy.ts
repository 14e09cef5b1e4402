/**
 * The soak's policy repository, shaped like policy-examples/: three tenants (ml-training
 * with gangs and eval pods, data-pipeline with Jobs and approved loads, api with an
 * in-place ResizePolicy on a moving Prometheus signal). The soak changes it the way
 * people do, by commits: approvals for held loads, a bad commit and its fix, a tenant's
 * reference to a kind the API server does not serve and its revert. Every commit is the
 * whole tree, pushed one at a time.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { repoRoot } from '../e2e/deploy/tools.ts';
import { pushTree, type GitServer } from '../support/git-server.ts';

export const namespaces = { ml: 'soak-ml', etl: 'soak-etl', api: 'soak-api' } as const;

export const gates = {
  gang: 'ml.tollgate.io/gpu-gang',
  eval: 'ml.tollgate.io/eval',
  job: 'data.tollgate.io/batch',
  load: 'data.tollgate.io/nightly-load',
} as const;

export const foreignGate = 'other.example.com/hold';

/** Per tenant: namespaces, our gate prefix, pod budget (what the watcher holds tollgate to). */
export const tenants = {
  'ml-training': { namespaces: [namespaces.ml], ourPrefix: 'ml.tollgate.io/', pods: 9 },
  'data-pipeline': { namespaces: [namespaces.etl], ourPrefix: 'data.tollgate.io/', pods: 6 },
  api: { namespaces: [namespaces.api], ourPrefix: 'api.tollgate.io/' },
} as const;

/** Resize bounds of the api pods' `app` container (millicores, bytes). */
export const resizeBounds = {
  cpu: { min: 250, max: 2000, step: 250 },
  memory: { min: 128 * 2 ** 20, max: 2 ** 30, step: 128 * 2 ** 20 },
} as const;

export const queueMetric = 'soak_queue_length';

export interface PolicyState {
  /** Approved held loads: pod name -> expiresAt (ISO). */
  readonly approvals: ReadonlyMap<string, string>;
  /** A commit with a GatePolicy of an unknown tenant is the head. */
  readonly bad: boolean;
  /** ml-training's eval policy waits on a kind the API server does not serve. */
  readonly unserved: boolean;
}

const doc = (kind: string, name: string, spec: unknown): string =>
  stringify({ apiVersion: 'tollgate.io/v1alpha1', kind, metadata: { name }, spec });

type Spec = Record<string, unknown>;

/** A file of policy-examples/ with its spec changed for the soak's namespaces and sizes. */
function fromExample(path: string, change: (spec: Spec) => Spec): string {
  const object = parse(readFileSync(join(repoRoot, 'policy-examples', path), 'utf8')) as {
    spec: Spec;
  };
  return stringify({ ...object, spec: change(object.spec) });
}

/** policy-examples' tenants on the soak's namespaces, budgets small enough to bind. */
function tenantFiles(): Record<string, string> {
  const sized = (name: keyof typeof tenants) => (spec: Spec) => {
    const t: { namespaces: readonly string[]; pods?: number } = tenants[name];
    return {
      ...spec,
      namespaces: t.namespaces,
      ...(t.pods === undefined ? {} : { budget: { pods: t.pods } }),
    };
  };
  return Object.fromEntries(
    (['ml-training', 'data-pipeline', 'api'] as const).map((name) => [
      `tenants/${name}.yaml`,
      fromExample(`tenants/${name}.yaml`, sized(name)),
    ]),
  );
}

function gateFiles(state: PolicyState): Record<string, string> {
  const evalConditions: unknown[] = [{ type: 'Budget' }];
  if (state.unserved)
    evalConditions.push({
      type: 'ObjectCondition',
      object: { apiVersion: 'ml.example.com/v1', kind: 'Checkpoint', name: 'latest' },
      conditionType: 'Ready',
      status: 'True',
    });
  return {
    'gates/gpu-gang.yaml': doc('GatePolicy', 'gpu-gang', {
      tenant: 'ml-training',
      gate: gates.gang,
      priority: 100,
      conditions: [
        {
          type: 'GangComplete',
          groupLabel: 'ml.tollgate.io/gang',
          sizeAnnotation: 'ml.tollgate.io/gang-size',
        },
        { type: 'Budget' },
      ],
    }),
    'gates/eval.yaml': doc('GatePolicy', 'eval', {
      tenant: 'ml-training',
      gate: gates.eval,
      priority: 10,
      conditions: evalConditions,
    }),
    'gates/batch.yaml': doc('GatePolicy', 'batch', {
      tenant: 'data-pipeline',
      gate: gates.job,
      conditions: [{ type: 'Budget' }],
    }),
    'gates/nightly-load.yaml': doc('GatePolicy', 'nightly-load', {
      tenant: 'data-pipeline',
      gate: gates.load,
      priority: 50,
      conditions: [{ type: 'Budget' }, { type: 'Approved' }],
    }),
    ...(state.bad
      ? {
          'gates/broken.yaml': doc('GatePolicy', 'broken', {
            tenant: 'nobody',
            gate: 'data.tollgate.io/broken',
          }),
        }
      : {}),
  };
}

function resizeFile(): Record<string, string> {
  const { cpu } = resizeBounds;
  return {
    'resize/api.yaml': doc('ResizePolicy', 'api-frontend', {
      tenant: 'api',
      selector: { matchLabels: { app: 'api-frontend' } },
      containers: {
        app: {
          cpu: { min: `${cpu.min}m`, max: `${cpu.max}m`, step: `${cpu.step}m` },
          memory: { min: '128Mi', max: '1Gi', step: '128Mi' },
        },
      },
      signals: [
        {
          name: 'queue-length',
          query: `sum(${queueMetric}{namespace="$namespace",pod="$pod"})`,
          scaleUpAbove: 100,
          scaleDownBelow: 20,
        },
      ],
      window: '6s',
      hysteresis: 0.1,
      cooldown: '10s',
      deferredTimeout: '1m',
    }),
  };
}

function approvalFiles(state: PolicyState): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [name, expiresAt] of state.approvals)
    files[`approvals/${name}.yaml`] = doc('Approval', name, {
      action: 'Release',
      target: { kind: 'Pod', namespace: namespaces.etl, name },
      approvedBy: 'soak@example.com',
      reason: 'approved by the soak load',
      expiresAt,
    });
  return files;
}

export function soakPolicyFiles(state: PolicyState, prometheusUrl: string): Record<string, string> {
  return {
    'tollgate.yaml': fromExample('tollgate.yaml', (spec) => ({
      ...spec,
      cluster: 'soak',
      prometheus: { url: prometheusUrl },
    })),
    'staleness.yaml': fromExample('staleness.yaml', (spec) => spec),
    ...tenantFiles(),
    ...gateFiles(state),
    ...resizeFile(),
    ...approvalFiles(state),
  };
}

/** The policy repository as the soak's people change it: one commit at a time, in order. */
export class PolicyRepo {
  #state: PolicyState = { approvals: new Map(), bad: false, unserved: false };
  #chain: Promise<unknown> = Promise.resolve();
  commits = 0;
  readonly #git: GitServer;
  readonly #url: string;
  readonly #prometheusUrl: string;

  constructor(git: GitServer, url: string, prometheusUrl: string) {
    this.#git = git;
    this.#url = url;
    this.#prometheusUrl = prometheusUrl;
  }

  get state(): PolicyState {
    return this.#state;
  }

  change(message: string, next: (state: PolicyState) => PolicyState): Promise<void> {
    const push = this.#chain.then(async () => {
      this.#state = next(this.#state);
      await pushTree(this.#git, this.#url, soakPolicyFiles(this.#state, this.#prometheusUrl), {
        message,
        replace: true,
      });
      this.commits += 1;
    });
    this.#chain = push.catch(() => undefined);
    return push;
  }
}
