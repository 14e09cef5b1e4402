/**
 * Every command that talks to a cluster, `tollgate run` included, finds and loads its
 * kubeconfig as kubectl does: --kubeconfig, else the files $KUBECONFIG lists (merged, the
 * first file to set a name or the current-context wins, missing files skipped), else
 * ~/.kube/config, else the pod's service account; --context picks a context in any of
 * them, and one that does not exist is named with the files it was looked for in.
 * Real files in a temporary folder; the environment is injected.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { clusterConfig } from '../../../src/cli/cluster-options.ts';
import { parseRunConfig, type RawRunSettings } from '../../../src/cli/run-config.ts';
import { connectCluster } from '../../../src/run/view.ts';

const dir = mkdtempSync(join(tmpdir(), 'tollgate-kubeconfig-'));

interface KubeconfigSpec {
  /** Context name → cluster server; each context has its own cluster and a user `admin`. */
  readonly contexts: Record<string, string>;
  /** The bearer token of user `admin` in this file. */
  readonly token: string;
  readonly current?: string;
}

/** A kubeconfig file whose contexts each reach their own server as user `admin`. */
function kubeconfigFile(path: string, spec: KubeconfigSpec): string {
  const names = Object.keys(spec.contexts);
  const lines = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    ...names.map((n) => `  - { name: ${n}, cluster: { server: "${spec.contexts[n]}" } }`),
    `users: [{ name: admin, user: { token: ${spec.token} } }]`,
    'contexts:',
    ...names.map((n) => `  - { name: ${n}, context: { cluster: ${n}, user: admin } }`),
    ...(spec.current ? [`current-context: ${spec.current}`] : []),
    '',
  ];
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, lines.join('\n'));
  return path;
}

const home = join(dir, 'home');
kubeconfigFile(join(home, '.kube', 'config'), {
  contexts: { 'home-ctx': 'https://home.example:6443' },
  token: 'home-token',
  current: 'home-ctx',
});
const first = kubeconfigFile(join(dir, 'first'), {
  contexts: { dev: 'https://dev.example:6443' },
  token: 'first-token',
});
const second = kubeconfigFile(join(dir, 'second'), {
  contexts: { prod: 'https://prod.example:6443', dev: 'https://shadowed.example:6443' },
  token: 'second-token',
  current: 'prod',
});
const missing = join(dir, 'not-there');
const list = (...files: string[]) => files.join(':');

interface Situation {
  readonly name: string;
  readonly flags?: { kubeconfig?: string; context?: string };
  readonly env: NodeJS.ProcessEnv;
  /** The server and token the loaded configuration talks to, or the error it gives. */
  readonly reaches?: { server: string; token: string; context: string };
  readonly refused?: RegExp;
}

const situations: Situation[] = [
  {
    name: '--kubeconfig wins over $KUBECONFIG and ~/.kube/config',
    flags: { kubeconfig: second },
    env: { KUBECONFIG: first, HOME: home },
    reaches: { server: 'https://prod.example:6443', token: 'second-token', context: 'prod' },
  },
  {
    name: '$KUBECONFIG lists two files: merged, the current-context from the first that sets one',
    env: { KUBECONFIG: list(first, second), HOME: home },
    reaches: { server: 'https://prod.example:6443', token: 'first-token', context: 'prod' },
  },
  {
    name: '$KUBECONFIG lists two files defining the same names: the first file wins',
    flags: { context: 'dev' },
    env: { KUBECONFIG: list(first, second), HOME: home },
    reaches: { server: 'https://dev.example:6443', token: 'first-token', context: 'dev' },
  },
  {
    name: '$KUBECONFIG names a file that does not exist: skipped',
    env: { KUBECONFIG: list(missing, second), HOME: home },
    reaches: { server: 'https://prod.example:6443', token: 'second-token', context: 'prod' },
  },
  {
    name: 'neither --kubeconfig nor $KUBECONFIG: ~/.kube/config',
    env: { HOME: home },
    reaches: { server: 'https://home.example:6443', token: 'home-token', context: 'home-ctx' },
  },
  {
    name: '--context picks a context of the second file of $KUBECONFIG',
    flags: { context: 'prod' },
    env: { KUBECONFIG: list(first, second) },
    reaches: { server: 'https://prod.example:6443', token: 'first-token', context: 'prod' },
  },
  {
    name: '--context naming no context: the context, where it was looked for, those there are',
    flags: { context: 'staging' },
    env: { KUBECONFIG: list(first, second) },
    refused: new RegExp(
      `context "staging" is not in KUBECONFIG=${list(first, second)} \\(contexts: dev, prod\\)`,
    ),
  },
];

/** What a loaded configuration talks to: the fields a request is made from. */
function reached(kc: KubeConfig) {
  return {
    server: kc.getCurrentCluster()?.server ?? '',
    token: kc.getCurrentUser()?.token ?? '',
    context: kc.getCurrentContext(),
  };
}

function outcome(load: () => KubeConfig): { reaches: object } | { refused: string } {
  try {
    return { reaches: reached(load()) };
  } catch (error) {
    return { refused: (error as Error).message };
  }
}

function check(situation: Situation, load: () => KubeConfig): void {
  const result = outcome(load);
  if (situation.reaches) assert.deepEqual(result, { reaches: situation.reaches });
  else {
    assert.ok('refused' in result, `refused, got ${JSON.stringify(result)}`);
    assert.match(result.refused, situation.refused as RegExp);
  }
}

/** `tollgate run`: its settings parsed, then its cluster connected, as src/main.ts does. */
function runLoads(flags: Situation['flags'], env: NodeJS.ProcessEnv): KubeConfig {
  const settings: RawRunSettings = {
    policyDir: dir,
    kubeconfig: flags?.kubeconfig,
    kubeContext: flags?.context,
  };
  const parsed = parseRunConfig(settings, {
    env,
    hostname: 'tollgate-0',
    isFile: existsSync,
    isDirectory: existsSync,
  });
  if (!parsed.ok) throw new Error(parsed.problems.join('\n'));
  return connectCluster(parsed.config);
}

describe('tollgate run loads its kubeconfig as kubectl does', () => {
  for (const situation of situations)
    it(situation.name, () => check(situation, () => runLoads(situation.flags, situation.env)));
});

describe('plan, explain, queue and audit verify load their kubeconfig as kubectl does', () => {
  for (const situation of situations)
    it(situation.name, () =>
      check(situation, () => clusterConfig(situation.flags ?? {}, situation.env, 'to read')),
    );
});
