/**
 * What one bench phase cost, on both sides of the wire:
 * - the API server's requests in the phase, by verb and resource (`apiserver_request_total`
 *   read before and after: every client's requests, the scheduler's and the kubelet's too,
 *   so two phases that release the same pods differ by what their releasing client did);
 * - the CPU seconds each process of the machine's side spent in the phase (this process,
 *   and the processes the caller names: the API server, etcd, the Git server with the
 *   git-http-backend children it waited for), from /proc, so a phase's wall time can be
 *   read against what every process on the shared cores spent;
 * - with a profile folder: a CPU profile of this process (the bench's own loop, where
 *   tollgate runs in the bench) through the inspector, and the API server's own CPU
 *   profile (`/debug/pprof/profile`, Go's pprof format: `go tool pprof -top FILE`).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';

/** GET with the kubeconfig's identity, the body as served (bytes, for pprof). */
export async function getRawBytes(kc: KubeConfig, path: string): Promise<Buffer> {
  const options: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    https
      .get(`${kc.getCurrentCluster()!.server}${path}`, options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          res.statusCode === 200
            ? resolve(Buffer.concat(chunks))
            : reject(new Error(`GET ${path}: ${res.statusCode}`)),
        );
      })
      .on('error', reject);
  });
}

/** GET with the kubeconfig's identity, the body as text. */
export async function getRaw(kc: KubeConfig, path: string): Promise<string> {
  return (await getRawBytes(kc, path)).toString('utf8');
}

/** Requests served, by "VERB resource[/subresource]", from the API server's metrics text. */
export function requestCounts(metrics: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const label = (name: string): string =>
      new RegExp(`[{,]${name}="([^"]*)"`).exec(line)?.[1] ?? '';
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const sub = label('subresource');
    const key = `${label('verb')} ${label('resource')}${sub === '' ? '' : `/${sub}`}`;
    counts.set(key, (counts.get(key) ?? 0) + value);
  }
  return counts;
}

/** `after - before` per key, the keys that moved only. */
export function countsBetween(
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
): Record<string, number> {
  const moved: Record<string, number> = {};
  for (const [key, value] of [...after].sort(([a], [b]) => a.localeCompare(b))) {
    const delta = value - (before.get(key) ?? 0);
    if (delta > 0) moved[key] = delta;
  }
  return moved;
}

export interface PhaseCost {
  /** API requests in the phase, by verb and resource. */
  readonly requests: Record<string, number>;
  /** CPU seconds spent in the phase, by process (`bench process`: this one). */
  readonly cpuSeconds: Record<string, number>;
  /** This process's CPU profile, when a profile folder was given. */
  readonly profile?: ProfileSummary;
  readonly files: readonly string[];
}

export interface ProfileSummary {
  readonly sampledMs: number;
  /** Share of samples by where the code lives (idle, gc, src/<folder>, a package). */
  readonly byArea: Record<string, number>;
  /** The functions with the most self time: "name (file:line)" and share. */
  readonly top: readonly { readonly frame: string; readonly share: number }[];
  /**
   * Share of the busy samples (idle left out) by whose work they were: the nearest
   * tollgate file (src/, bench/, test/) on the sample's stack, so a library's or Node's
   * time counts for the file that called it; "no tollgate frame: <area>" when none is.
   */
  readonly byOwner: Record<string, number>;
}

interface CpuProfileNode {
  readonly id: number;
  readonly hitCount?: number;
  readonly children?: readonly number[];
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
}
interface CpuProfile {
  readonly nodes: readonly CpuProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux architecture). */
const ticksPerSecond = 100;

/**
 * A process's CPU time in clock ticks from its /proc/PID/stat line: its own user and
 * system time and that of the children it waited for (fields 14 to 17). The command name
 * (field 2) may hold spaces and parentheses, so the fields are counted from its last `)`.
 */
export function cpuTicksOfStat(stat: string): number {
  const end = stat.lastIndexOf(')');
  if (end < 0) throw new Error(`not a /proc/PID/stat line: ${JSON.stringify(stat.slice(0, 80))}`);
  // After the name: state is field 3, so utime (14) is the 12th field from here.
  const fields = stat.slice(end + 2).split(' ');
  const ticks = fields.slice(11, 15).map(Number);
  if (ticks.length !== 4 || ticks.some((n) => !Number.isFinite(n)))
    throw new Error(`not a /proc/PID/stat line: ${JSON.stringify(stat.slice(0, 80))}`);
  return ticks.reduce((a, b) => a + b, 0);
}

/** CPU seconds a process (and its waited-for children) spent so far; undefined when it is gone. */
export function processCpuSeconds(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return cpuTicksOfStat(stat) / ticksPerSecond;
}

/** What each process spent between two readings; a process missing from either is left out. */
export function cpuSecondsBetween(
  before: Record<string, number | undefined>,
  after: Record<string, number | undefined>,
): Record<string, number> {
  const spent: Record<string, number> = {};
  for (const [name, end] of Object.entries(after)) {
    const start = before[name];
    if (start !== undefined && end !== undefined) spent[name] = Number((end - start).toFixed(2));
  }
  return spent;
}

/** This process's CPU seconds and those of the `processes` (name to pid) the caller names. */
function cpuReading(
  processes: Record<string, number | undefined>,
): Record<string, number | undefined> {
  const usage = process.cpuUsage();
  const reading: Record<string, number | undefined> = {
    'bench process': (usage.user + usage.system) / 1e6,
  };
  for (const [name, pid] of Object.entries(processes))
    reading[name] = pid === undefined ? undefined : processCpuSeconds(pid);
  return reading;
}

/** Where a frame's code lives, coarsely: what a reader compares between two phases. */
export function areaOf(url: string, functionName: string): string {
  if (url === '') {
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(garbage collector)') return 'gc';
    return functionName === '(program)' ? 'program (V8, native)' : `native ${functionName}`;
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg !== null) return pkg[1]!;
  const own = /\/(src|bench|test)\/([^/]+)\//.exec(url);
  if (own !== null) return `${own[1]}/${own[2]}`;
  if (url.startsWith('node:')) return 'node core';
  return 'other';
}

/** Self-time shares from a V8 CPU profile. */
export function summarize(profile: CpuProfile, topN = 20): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const hits = new Map<number, number>();
  if (profile.samples !== undefined)
    for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  else for (const n of profile.nodes) hits.set(n.id, n.hitCount ?? 0);
  const total = [...hits.values()].reduce((a, b) => a + b, 0) || 1;
  const byArea: Record<string, number> = {};
  const byFrame = new Map<string, number>();
  for (const [id, count] of hits) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const area = areaOf(url, functionName);
    byArea[area] = (byArea[area] ?? 0) + count / total;
    const file = url.replace(/^.*\/(node_modules|src|bench|test)\//, '$1/');
    const frame = `${functionName || '(anonymous)'}${url === '' ? '' : ` (${file}:${lineNumber + 1})`}`;
    byFrame.set(frame, (byFrame.get(frame) ?? 0) + count / total);
  }
  const top = [...byFrame]
    .sort((a, b) => b[1] - a[1])
    .slice(0, topN)
    .map(([frame, share]) => ({ frame, share }));
  return {
    sampledMs: (profile.endTime - profile.startTime) / 1000,
    byArea: bySize(byArea),
    top,
    byOwner: byOwner(byId, hits),
  };
}

function bySize(shares: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(shares).sort((a, b) => b[1] - a[1]));
}

/** A tollgate file's path from a frame's URL, or undefined for a package, Node or V8. */
function ownFile(url: string): string | undefined {
  if (url.includes('/node_modules/')) return undefined;
  return /\/((?:src|bench|test)\/.*)$/.exec(url)?.[1];
}

/** `ProfileSummary.byOwner`: busy samples by the nearest tollgate file on their stack. */
function byOwner(
  byId: ReadonlyMap<number, CpuProfileNode>,
  hits: ReadonlyMap<number, number>,
): Record<string, number> {
  const parentOf = new Map<number, number>();
  for (const n of byId.values()) for (const child of n.children ?? []) parentOf.set(child, n.id);
  const owners: Record<string, number> = {};
  let busy = 0;
  for (const [id, count] of hits) {
    const { functionName, url } = byId.get(id)!.callFrame;
    if (functionName === '(idle)') continue;
    busy += count;
    let owner: string | undefined;
    for (let at: number | undefined = id; at !== undefined && owner === undefined;) {
      owner = ownFile(byId.get(at)!.callFrame.url);
      at = parentOf.get(at);
    }
    const key = owner ?? `no tollgate frame: ${areaOf(url, functionName)}`;
    owners[key] = (owners[key] ?? 0) + count;
  }
  for (const key of Object.keys(owners)) owners[key] = owners[key]! / (busy || 1);
  return bySize(owners);
}

/**
 * Starts measuring a phase; `end()` returns its cost. With `profileDir`, also profiles this
 * process and asks the API server for a CPU profile of `apiServerSeconds` (started now;
 * pprof takes a duration, so give the phase's expected length).
 */
export async function startPhase(
  adminKc: KubeConfig,
  name: string,
  options: {
    profileDir?: string;
    apiServerSeconds?: number;
    /** The other processes whose CPU seconds to report, by name (pids read at each end). */
    processes?: () => Record<string, number | undefined>;
  } = {},
): Promise<{ end: () => Promise<PhaseCost> }> {
  const processes = options.processes ?? (() => ({}));
  const before = requestCounts(await getRaw(adminKc, '/metrics'));
  const cpuBefore = cpuReading(processes());
  const dir = options.profileDir;
  let session: Session | undefined;
  let apiServer: Promise<Buffer | Error> | undefined;
  if (dir !== undefined) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 1000 });
    await session.post('Profiler.start');
    const seconds = Math.max(1, Math.round(options.apiServerSeconds ?? 30));
    apiServer = getRawBytes(adminKc, `/debug/pprof/profile?seconds=${seconds}`).catch(
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    );
  }
  return {
    end: async () => {
      const cpuSeconds = cpuSecondsBetween(cpuBefore, cpuReading(processes()));
      const requests = countsBetween(before, requestCounts(await getRaw(adminKc, '/metrics')));
      if (dir === undefined || session === undefined) return { requests, cpuSeconds, files: [] };
      const { profile } = (await session.post('Profiler.stop')) as { profile: CpuProfile };
      session.disconnect();
      const files = [join(dir, `${name}.cpuprofile`)];
      writeFileSync(files[0]!, JSON.stringify(profile));
      const pprof = await apiServer!;
      if (pprof instanceof Error)
        process.stderr.write(`# bench: API server profile: ${pprof.message}\n`);
      else {
        const pprofFile = join(dir, `${name}-apiserver.pprof`);
        writeFileSync(pprofFile, pprof);
        files.push(pprofFile, ...pprofTop(pprofFile));
      }
      return { requests, cpuSeconds, profile: summarize(profile), files };
    },
  };
}

/**
 * The API server profile's top functions as text beside it (`go tool pprof -top`), when Go
 * is on the PATH; the file's name, or none (said on stderr).
 */
function pprofTop(pprofFile: string): string[] {
  const out = pprofFile.replace(/\.pprof$/, '.top.txt');
  try {
    const top = execFileSync('go', ['tool', 'pprof', '-top', '-nodecount=40', pprofFile], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    writeFileSync(out, top);
    return [out];
  } catch (error) {
    process.stderr.write(
      `# bench: go tool pprof -top ${pprofFile}: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    return [];
  }
}
