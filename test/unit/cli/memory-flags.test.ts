import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  memoryFlagsFor,
  memorySaverFlags,
  runMemoryFlags,
  youngGenerationFlags,
} from '../../../src/cli/memory-flags.ts';

const flagsModule = fileURLToPath(new URL('../../../src/cli/memory-flags.ts', import.meta.url));

describe('tollgate run keeps its young generation small and its heap in memory saver mode', () => {
  const both = [...youngGenerationFlags, ...memorySaverFlags];
  const cases: { args: string[]; nodeFlags: string[]; sets: readonly string[]; why: string }[] = [
    { args: ['run'], nodeFlags: [], sets: both, why: 'the image runs `tollgate run`' },
    {
      args: ['run', '--log-level', 'debug'],
      nodeFlags: ['--max-old-space-size=384'],
      sets: both,
      why: 'the shipped heap cap says nothing about the young generation or memory saving',
    },
    { args: ['validate', '.'], nodeFlags: [], sets: [], why: 'a short command: speed first' },
    {
      args: ['audit', 'verify', '--repo', 'https://git.example/audit.git'],
      nodeFlags: [],
      sets: youngGenerationFlags,
      why: "a walk of the whole branch, each commit's objects garbage a moment later; speed over memory saving",
    },
    { args: ['audit', 'log'], nodeFlags: [], sets: [], why: 'reads a few records' },
    { args: [], nodeFlags: [], sets: [], why: 'no command' },
    {
      args: ['run'],
      nodeFlags: ['--max-semi-space-size=16'],
      sets: memorySaverFlags,
      why: "the operator's own semi-space size wins",
    },
    {
      args: ['run'],
      nodeFlags: ['--semi_space_growth_factor=2'],
      sets: memorySaverFlags,
      why: 'V8 reads - and _ alike',
    },
    {
      args: ['run'],
      nodeFlags: ['--min-semi-space-size=4'],
      sets: memorySaverFlags,
      why: 'any young-generation size flag is the operator choosing',
    },
    {
      args: ['run'],
      nodeFlags: ['--no-memory-saver-mode'],
      sets: youngGenerationFlags,
      why: 'an operator who turns memory saving off on the node command line keeps it off',
    },
    {
      args: ['run'],
      nodeFlags: ['--memory_saver_mode', '--max-semi-space-size=8'],
      sets: [],
      why: 'both chosen by the operator',
    },
  ];
  for (const { args, nodeFlags, sets, why } of cases) {
    it(`tollgate ${args.join(' ') || '(nothing)'} with ${nodeFlags.join(' ') || 'no node flags'} sets ${sets.join(' ') || 'no flags'}: ${why}`, () => {
      assert.deepEqual(memoryFlagsFor(args, nodeFlags), sets);
    });
  }

  it('what `run` sets when the operator chose nothing is every flag', () => {
    assert.deepEqual(memoryFlagsFor(['run'], []), runMemoryFlags);
  });

  /**
   * A process that keeps 300,000 small objects alive: V8 grows the young generation to
   * its maximum (64 MiB of capacity from 1 MiB, tens of MiB resident for good); with the
   * flags applied first it stays half of that or less. V8 sizes the young generation
   * partly by how fast scavenges run, so on a busy machine the flagged size varied from
   * 2 to 24 MiB; the children run with `--predictable` (V8's own switch that turns such
   * time-based heuristics off), where it is the same every run: 19 MiB with the flags, 64
   * MiB without. Capacities read from V8 in each process, no timing in the test.
   */
  function youngCapacity(applied: boolean): { before: number; after: number } {
    const script = `
      import v8 from 'node:v8';
      import { applyMemoryFlags } from ${JSON.stringify(flagsModule)};
      if (${applied}) applyMemoryFlags(['run'], []);
      const capacity = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
      const before = capacity();
      const kept = [];
      for (let i = 0; i < 300000; i++) kept.push({ name: 'pod-' + i, labels: { a: String(i) }, n: i });
      process.stdout.write(JSON.stringify({ before, after: capacity(), kept: kept.length }));
    `;
    const child = spawnSync(
      process.execPath,
      ['--predictable', '--input-type=module', '-e', script],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(child.status, 0, child.stderr);
    return JSON.parse(child.stdout) as { before: number; after: number };
  }

  it('with the flags applied the young generation stays half of what V8 grows it to without them, or less', () => {
    const flagged = youngCapacity(true);
    const unflagged = youngCapacity(false);
    assert.ok(
      flagged.after * 2 <= unflagged.after,
      `young generation with the flags ${flagged.before} -> ${flagged.after} bytes, without ${unflagged.before} -> ${unflagged.after}`,
    );
  });

  it('without them V8 grows it (the control row: the flags are what makes the difference)', () => {
    const { before, after } = youngCapacity(false);
    assert.ok(after >= 32 * before, `young generation ${before} -> ${after} bytes`);
  });
});

describe('tollgate run keeps its old generation near what it holds', () => {
  /**
   * A process holding 150,000 small objects (about 22 MiB, a view's worth) while it makes
   * garbage that outlives its scavenges, as a leader writing thousands of conditions does:
   * V8 lets the old generation grow some way above what the last collection left before it
   * collects again, and the pages stay resident. The most the old generation held, against
   * what is live at the end. Under `--predictable` (V8's time-based heuristics off) the
   * figures are the same every run: 126.9 MiB for 22.5 live with the young-generation flag
   * alone, 49.2 with `--memory-saver-mode` too. Sizes read from V8, no timing.
   */
  function oldGeneration(args: string[]): { most: number; live: number } {
    const script = `
      import v8 from 'node:v8';
      import { applyMemoryFlags } from ${JSON.stringify(flagsModule)};
      applyMemoryFlags(${JSON.stringify(args)}, []);
      const old = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space');
      const live = [];
      for (let i = 0; i < 150000; i++) live.push({ name: 'pod-' + i, labels: { app: 'a' + (i % 100) }, n: i });
      let most = 0;
      let recent = [];
      for (let round = 0; round < 400; round++) {
        for (let i = 0; i < 2000; i++) recent.push({ key: 'w-' + round + '-' + i, v: [i, round] });
        if (recent.length > 20000) recent = recent.slice(10000);
        most = Math.max(most, old().space_size);
      }
      recent = [];
      gc();
      process.stdout.write(JSON.stringify({ most, live: old().space_used_size, kept: live.length }));
    `;
    const child = spawnSync(
      process.execPath,
      ['--predictable', '--expose-gc', '--input-type=module', '-e', script],
      { encoding: 'utf8' },
    );
    assert.equal(child.status, 0, child.stderr);
    return JSON.parse(child.stdout) as { most: number; live: number };
  }

  it('under the flags `run` sets, the old generation never holds three times what is live', () => {
    const { most, live } = oldGeneration(['run']);
    assert.ok(most < 3 * live, `old generation at most ${most} bytes for ${live} live`);
  });

  it('a command that sets no flags lets it grow further (the control row)', () => {
    const { most, live } = oldGeneration(['validate']);
    assert.ok(most >= 3 * live, `old generation at most ${most} bytes for ${live} live`);
  });
});
