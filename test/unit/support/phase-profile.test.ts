/**
 * The bench's phase cost (bench/phase-profile.ts): the API server's requests between two
 * readings of its metrics, by verb and resource, and where a CPU profile's samples fell.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  areaOf,
  countsBetween,
  cpuSecondsBetween,
  cpuTicksOfStat,
  processCpuSeconds,
  requestCounts,
  summarize,
} from '../../../bench/phase-profile.ts';

/** One apiserver_request_total line as the API server writes it. */
const requestLine = (
  verb: string,
  resource: string,
  value: number,
  options: { subresource?: string; code?: string } = {},
): string =>
  `apiserver_request_total{code="${options.code ?? '200'}",component="apiserver",dry_run="",group="",resource="${resource}",scope="resource",subresource="${options.subresource ?? ''}",verb="${verb}",version="v1"} ${value}`;

describe('the API requests of a phase', () => {
  const before = requestCounts(
    [
      '# HELP apiserver_request_total Counter of apiserver requests',
      requestLine('PATCH', 'pods', 100),
      requestLine('PATCH', 'pods', 2, { code: '409' }),
      requestLine('POST', 'pods', 7, { subresource: 'binding', code: '201' }),
      'apiserver_request_duration_seconds_count{verb="PATCH"} 99',
    ].join('\n'),
  );

  it('sums every response code of one verb and resource, and keeps subresources apart', () => {
    assert.deepEqual(
      [...before],
      [
        ['PATCH pods', 102],
        ['POST pods/binding', 7],
      ],
    );
  });

  it('reports only what moved between two readings, new kinds of request included', () => {
    const after = requestCounts(
      [
        requestLine('PATCH', 'pods', 150),
        requestLine('PATCH', 'pods', 2, { code: '409' }),
        requestLine('POST', 'pods', 7, { subresource: 'binding', code: '201' }),
        requestLine('POST', 'events', 50, { code: '201' }),
      ].join('\n'),
    );
    assert.deepEqual(countsBetween(before, after), { 'PATCH pods': 50, 'POST events': 50 });
  });
});

describe("where a CPU profile's samples fell", () => {
  it('names the area of a frame by its package, its source folder, or what V8 calls it', () => {
    const table: [url: string, fn: string, area: string][] = [
      ['', '(idle)', 'idle'],
      ['', '(garbage collector)', 'gc'],
      ['', '(program)', 'program (V8, native)'],
      [
        'file:///app/node_modules/@kubernetes/client-node/dist/x.js',
        'f',
        '@kubernetes/client-node',
      ],
      ['file:///app/node_modules/isomorphic-git/index.js', 'f', 'isomorphic-git'],
      ['file:///app/src/decide/release-plan.ts', 'f', 'src/decide'],
      ['node:internal/streams/readable', 'f', 'node core'],
    ];
    for (const [url, fn, area] of table) assert.equal(areaOf(url, fn), area, url || fn);
  });

  it('shares self time by the samples, not by the call tree', () => {
    const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 9 });
    const summary = summarize({
      startTime: 0,
      endTime: 4_000_000,
      nodes: [
        { id: 1, callFrame: frame('(root)') },
        { id: 2, callFrame: frame('(idle)') },
        { id: 3, callFrame: frame('planReleases', 'file:///app/src/decide/release-plan.ts') },
      ],
      samples: [2, 2, 3, 2],
    });
    assert.equal(summary.sampledMs, 4000);
    assert.deepEqual(summary.byArea, { idle: 0.75, 'src/decide': 0.25 });
    assert.deepEqual(summary.top[1], {
      frame: 'planReleases (src/decide/release-plan.ts:10)',
      share: 0.25,
    });
  });
});

describe("whose work a CPU profile's busy samples were", () => {
  it('gives a library or core frame to the nearest tollgate file above it on the stack, and idle to no one', () => {
    const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0 });
    const git = 'file:///app/node_modules/isomorphic-git/index.cjs';
    const summary = summarize({
      startTime: 0,
      endTime: 6_000_000,
      nodes: [
        { id: 1, callFrame: frame('(root)'), children: [2, 3, 6, 7] },
        { id: 2, callFrame: frame('(idle)') },
        { id: 3, callFrame: frame('commitFile', 'file:///app/src/audit/repo.ts'), children: [4] },
        { id: 4, callFrame: frame('writeObject', git), children: [5] },
        { id: 5, callFrame: frame('stat') },
        { id: 6, callFrame: frame('resume', 'file:///app/node_modules/undici/lib/client.js') },
        { id: 7, callFrame: frame('(garbage collector)') },
      ],
      samples: [2, 2, 4, 5, 6, 7],
    });
    assert.deepEqual(summary.byOwner, {
      'src/audit/repo.ts': 0.5,
      'no tollgate frame: undici': 0.25,
      'no tollgate frame: gc': 0.25,
    });
  });
});

describe('the CPU seconds of a phase, by process', () => {
  /** A /proc/PID/stat line: utime, stime, cutime, cstime are fields 14 to 17 (in clock ticks). */
  const statLine = (comm: string, ticks: [number, number, number, number]): string =>
    `4242 (${comm}) S 1 4242 4242 0 -1 4194560 2000 0 0 0 ${ticks.join(' ')} 20 0 12 0 100 123456789 5000`;

  it("counts a process's own CPU and that of the children it waited for (a Git server's git-http-backend)", () => {
    assert.equal(cpuTicksOfStat(statLine('node', [150, 50, 700, 100])), 1000);
  });

  it('reads the fields after the command name even when the name holds spaces and parentheses', () => {
    assert.equal(cpuTicksOfStat(statLine('kube (api) server', [1, 2, 3, 4])), 10);
  });

  it('refuses a line that is not a stat line, naming it', () => {
    assert.throws(() => cpuTicksOfStat('no parentheses here'), /not a \/proc\/PID\/stat line/);
  });

  it('reads this process from /proc as getrusage counts it, and a process that is gone as undefined', () => {
    let x = 0;
    for (let i = 0; i < 5e6; i++) x += Math.sqrt(i);
    assert.ok(x > 0);
    const usage = process.cpuUsage();
    const fromProc = processCpuSeconds(process.pid);
    assert.ok(fromProc !== undefined);
    // Ticks are hundredths of a second; both read the same kernel counters a moment apart.
    assert.ok(
      Math.abs(fromProc - (usage.user + usage.system) / 1e6) < 0.1,
      `/proc says ${fromProc} s, getrusage ${(usage.user + usage.system) / 1e6} s`,
    );
    assert.equal(processCpuSeconds(2 ** 22 + 1), undefined);
  });

  it('reports what each named process spent between two readings; a process that left is left out', () => {
    assert.deepEqual(
      cpuSecondsBetween(
        { 'kube-apiserver': 10.5, etcd: 2, 'git server': 1, gone: 3 },
        { 'kube-apiserver': 14.25, etcd: 2.5, 'git server': 4, gone: undefined },
      ),
      { 'kube-apiserver': 3.75, etcd: 0.5, 'git server': 3 },
    );
  });
});
