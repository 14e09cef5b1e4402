/**
 * Shared by the audit benches: an AuditStore over a real AuditRepo that times every commit
 * and push (and, given the repo's counting fs, counts the git objects each push reads).
 */
import type { AuditRepo } from '../src/audit/repo.ts';
import type { AuditStore } from '../src/audit/writer.ts';

export function timedStore(
  repo: AuditRepo,
  times: {
    readonly commitMs: number[];
    readonly pushMs: number[];
    readonly pushReads?: { readonly counts: number[]; readonly objectReads: () => number };
  },
  /** Keep isomorphic-git's cache for the life of the writer (the behaviour before releaseCache), to compare. */
  keepGitCache = false,
): AuditStore {
  const timed = async <T>(into: number[], work: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    try {
      return await work();
    } finally {
      into.push(performance.now() - start);
    }
  };
  return {
    commitFile: (path, content, message) =>
      timed(times.commitMs, () => repo.commitFile(path, content, message)),
    push: async () => {
      const before = times.pushReads?.objectReads() ?? 0;
      try {
        return await timed(times.pushMs, () => repo.push());
      } finally {
        times.pushReads?.counts.push((times.pushReads?.objectReads() ?? 0) - before);
      }
    },
    unpushed: () => repo.unpushed(),
    redact: (text) => repo.redact(text),
    maintain: () => repo.maintain(),
    ...(keepGitCache ? {} : { releaseCache: () => repo.releaseCache() }),
  };
}
