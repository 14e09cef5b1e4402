/**
 * Heap measured in a child process of its own, counted in bytes, not timed: `script` (an
 * ES module body, run with --expose-gc) builds what is measured, collects before and
 * after, and writes `{ "count": N, "perPod": B }` to stdout.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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

/**
 * Heap bytes per pod the cluster view holds after listing `pods` Job pods, half gated,
 * half running, each from its own JSON text as the API server sends it: with their parts
 * shared, as the view holds them, or each pod's parts its own copy (a parts table that
 * keeps nothing). Counted in bytes of heap, not timed: a child process with --expose-gc,
 * collected before and after.
 */
export function viewHeapPerPod(pods: number, parts: 'shared' | 'own copies' = 'shared'): number {
  const at = (path: string): string =>
    JSON.stringify(fileURLToPath(new URL(`../../${path}`, import.meta.url)));
  const script = `
    import { createClusterView } from ${at('src/cluster/view.ts')};
    import { SharedParts } from ${at('src/cluster/trim.ts')};
    import { servedJobPod } from ${at('test/builders/served-pod.ts')};
    import { getHeapStatistics } from 'node:v8';
    if (${JSON.stringify(parts)} === 'own copies') SharedParts.prototype.share = (part) => part;
    const settle = () => { for (let i = 0; i < 4; i++) gc(); return getHeapStatistics().used_heap_size; };
    const text = (i) => JSON.stringify(servedJobPod(i, { running: i % 2 === 1 }));
    const source = (target) => ({
      description: target.kind,
      async list({ continueToken }) {
        const total = target.kind === 'Pod' ? ${pods} : 0;
        const from = Number(continueToken ?? 0), to = Math.min(from + 500, total);
        const items = [];
        for (let i = from; i < to; i++) items.push(JSON.parse(text(i)));
        return { items, resourceVersion: '1', continueToken: to < total ? String(to) : undefined };
      },
      watch() { return { stop() {} }; },
    });
    const before = settle();
    const view = createClusterView({ kubeConfig: undefined, sourceFactory: source });
    view.start();
    await view.whenSynced();
    const after = settle();
    const count = [...view.pods()].length;
    process.stdout.write(JSON.stringify({ count, perPod: (after - before) / count }));
    await view.stop();`;
  return heapPerPodInChild(script, pods);
}
