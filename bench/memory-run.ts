/**
 * The `run` contender of bench/memory.ts: a whole `tollgate run` process, started as the
 * image starts it (`node bin/tollgate.js run`, the deployment's NODE_OPTIONS), with a
 * policy that holds every pod of the bench namespace (a tenant budget of 0 pods), a real
 * Git server for policy and audit, and its own lease. Its resident memory is read from
 * /proc once it holds all N pods and has planned, then settled; peak is VmHWM.
 *
 * Everything a real replica does with N held pods is in the figure: the view, the
 * gate-release passes, Hold records pushed to the audit repository, the Released pod
 * condition written through the dispatcher, metrics, Events, leader election.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ControlPlane } from '../test/support/control-plane.ts';
import { pushTree, type GitServer } from '../test/support/git-server.ts';
import { benchPolicyFiles, median, rssOf } from './lib.ts';
import {
  IMAGE_NODE_OPTIONS,
  SHIPPED_LEASE,
  spawnTollgate,
  stopReplica,
} from './tollgate-process.ts';

export interface RunMeasurement {
  readonly pods: number;
  readonly syncMs: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly maxRss: number;
  readonly nodeOptions: string;
}

/** One value of a Prometheus text exposition, or NaN. */
function metric(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

/** Pods the last gate-release pass counted as gated (tenant bench), or NaN before a pass. */
function gatedOf(text: string): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith('tollgate_gated_pods{') && l.includes('tenant="bench"'));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

async function scrape(url: string): Promise<string> {
  try {
    const response = await fetch(`${url}/metrics`);
    return response.ok ? await response.text() : '';
  } catch {
    return '';
  }
}

function peakRssOf(pid: number): number {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Pushes the policy that holds every pod of `namespace` (budget 0), once per bench run. */
export async function holdAllPolicy(
  git: GitServer,
  namespace: string,
  gate: string,
): Promise<string> {
  const url = git.createRepo('policy-memory');
  await pushTree(
    git,
    url,
    benchPolicyFiles({
      namespaces: [namespace],
      // Pacing far above anything: the budget of 0 pods is what holds them.
      pods: 1_000_000,
      gate,
      gatePolicy: 'bench-ready',
      conditions: [{ type: 'Budget' }],
      budgetPods: 0,
    }),
    { message: 'memory bench: hold every pod' },
  );
  return url;
}

export async function measureTollgateRun(options: {
  readonly cp: ControlPlane;
  readonly git: GitServer;
  readonly policyUrl: string;
  readonly pods: number;
  readonly settleMs: number;
  readonly tag: string;
  /** Added to the shipped NODE_OPTIONS, e.g. a control row's own young-generation size. */
  readonly extraNodeOptions?: string;
}): Promise<RunMeasurement> {
  const { cp, git, policyUrl, pods, settleMs, tag } = options;
  const nodeOptions = `${IMAGE_NODE_OPTIONS} ${options.extraNodeOptions ?? ''}`.trim();
  const replica = await spawnTollgate({
    identity: `memory-${tag}`,
    cp,
    git,
    policyUrl,
    auditUrl: git.createRepo(`audit-memory-${tag}`),
    leaseName: `memory-${tag}`,
    timings: SHIPPED_LEASE,
    nodeOptions,
    work: mkdtempSync(join(tmpdir(), 'tollgate-memory-run-')),
  });
  try {
    const pid = replica.child.pid!;
    const deadline = Date.now() + 900_000;
    let text = '';
    while (metric(text, 'tollgate_informer_objects', '{resource="pods"}') !== pods) {
      if (replica.child.exitCode !== null)
        throw new Error(`tollgate run exited ${replica.child.exitCode}`);
      if (Date.now() > deadline) throw new Error(`tollgate run: does not hold ${pods} pods`);
      await sleep(200);
      text = await scrape(replica.url);
    }
    const syncMs = Date.now() - replica.spawnedAt;
    // A pass over all of them has run: it publishes the gated count (no release is logged:
    // the budget holds every pod).
    while (gatedOf(text) !== pods) {
      if (replica.child.exitCode !== null)
        throw new Error(`tollgate run exited ${replica.child.exitCode}`);
      if (Date.now() > deadline) throw new Error(`tollgate run: no pass over ${pods} pods`);
      await sleep(200);
      text = await scrape(replica.url);
    }
    await sleep(settleMs);
    const samples: { rss: number; heapUsed: number; heapTotal: number }[] = [];
    for (let i = 0; i < 5; i++) {
      await sleep(1000);
      const now = await scrape(replica.url);
      samples.push({
        rss: rssOf(pid),
        heapUsed: metric(now, 'nodejs_heap_size_used_bytes'),
        heapTotal: metric(now, 'nodejs_heap_size_total_bytes'),
      });
      text = now;
    }
    return {
      pods: metric(text, 'tollgate_informer_objects', '{resource="pods"}'),
      syncMs,
      rss: median(samples.map((s) => s.rss)),
      heapUsed: median(samples.map((s) => s.heapUsed)),
      heapTotal: median(samples.map((s) => s.heapTotal)),
      maxRss: peakRssOf(pid),
      nodeOptions,
    };
  } finally {
    await stopReplica(replica, 'SIGTERM');
  }
}
