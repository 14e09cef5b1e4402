/**
 * Heap measured in a child process of its own, counted in bytes, not timed: `script` (an
 * ES module body, run with --expose-gc) builds what is measured, collects before and
 * after, and writes `{ "count": N, "perPod": B }` to stdout.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

/** The heap bytes per pod `script` reports, once it is checked to have held `pods` pods. */
export function heapPerPodInChild(script: string, pods: number): number {
  const child = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(child.status, 0, child.stderr);
  const { count, perPod } = JSON.parse(child.stdout) as { count: number; perPod: number };
  assert.equal(count, pods);
  return perPod;
}
