/**
 * Bytes allocated while `work` runs, counted by V8's sampling heap profiler through the
 * inspector: every sampled object, collected since or not (a scavenge or a full collection
 * during the work does not hide what it made). Bytes, not time: the figure does not move
 * with the machine's load. Sampled every 256 bytes on average.
 */
import { Session } from 'node:inspector/promises';

export async function bytesAllocatedBy(work: () => unknown): Promise<number> {
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 256,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await work();
    const { profile } = await session.post('HeapProfiler.stopSampling');
    let bytes = 0;
    const walk = (node: (typeof profile)['head']): void => {
      bytes += node.selfSize;
      for (const next of node.children) walk(next);
    };
    walk(profile.head);
    return bytes;
  } finally {
    session.disconnect();
  }
}
