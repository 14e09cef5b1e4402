import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { memoryFlagsFor, runMemoryFlags } from '../../../src/cli/memory-flags.ts';

const flagsModule = fileURLToPath(new URL('../../../src/cli/memory-flags.ts', import.meta.url));

describe('tollgate run keeps its young generation small', () => {
  const cases: { args: string[]; nodeFlags: string[]; sets: boolean; why: string }[] = [
    { args: ['run'], nodeFlags: [], sets: true, why: 'the image runs `tollgate run`' },
    {
      args: ['run', '--log-level', 'debug'],
      nodeFlags: ['--max-old-space-size=384'],
      sets: true,
      why: 'the shipped heap cap says nothing about the young generation',
    },
    { args: ['validate', '.'], nodeFlags: [], sets: false, why: 'a short command: speed first' },
    {
      args: ['audit', 'verify', '--repo', 'https://git.example/audit.git'],
      nodeFlags: [],
      sets: true,
      why: "a walk of the whole branch, each commit's objects garbage a moment later",
    },
    { args: ['audit', 'log'], nodeFlags: [], sets: false, why: 'reads a few records' },
    { args: [], nodeFlags: [], sets: false, why: 'no command' },
    {
      args: ['run'],
      nodeFlags: ['--max-semi-space-size=16'],
      sets: false,
      why: "the operator's own semi-space size wins",
    },
    {
      args: ['run'],
      nodeFlags: ['--semi_space_growth_factor=2'],
      sets: false,
      why: 'V8 reads - and _ alike',
    },
    {
      args: ['run'],
      nodeFlags: ['--min-semi-space-size=4'],
      sets: false,
      why: 'any young-generation size flag is the operator choosing',
    },
  ];
  for (const { args, nodeFlags, sets, why } of cases) {
    it(`tollgate ${args.join(' ') || '(nothing)'} with ${nodeFlags.join(' ') || 'no node flags'} ${sets ? 'sets' : 'leaves'} the flags: ${why}`, () => {
      assert.deepEqual(memoryFlagsFor(args, nodeFlags), sets ? runMemoryFlags : []);
    });
  }

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
