/**
 * When each Approval was merged, so an approval that names a pod without its uid binds
 * to the pod that existed then, never to a later pod of the same name (a StatefulSet
 * replica, a re-created job), and an approval of a group (a selector, a gang, a whole
 * GatePolicy) never reaches pods created after it.
 *
 * - A Git source: the commit time of the newest commit that changed the approval's file
 *   up to the commit in force (`git log -1 -- FILE`), from Git, not from the clock.
 * - A folder source has no history: the time the source first read that file with that
 *   content (the source's injected clock).
 * An approval whose time cannot be read (a Git error) keeps the time of the commit in
 * force, a later bound, never none.
 */
import type { Approval, Policy } from './model.ts';

/** The merge time (epoch ms) of the file `file` of the policy, or undefined when unknown. */
export type MergedAtOf = (file: string) => Promise<number | undefined>;

/** The policy with `mergedAt` on every approval whose time `mergedAtOf` knows. */
export async function withApprovalTimes(policy: Policy, mergedAtOf: MergedAtOf): Promise<Policy> {
  if (policy.approvals.length === 0) return policy;
  const times = new Map<string, number | undefined>();
  for (const file of new Set(policy.approvals.map((a) => a.source.file)))
    times.set(file, await mergedAtOf(file));
  const dated = policy.approvals.map((a): Approval => {
    const mergedAt = times.get(a.source.file);
    return mergedAt === undefined ? a : { ...a, mergedAt };
  });
  return { ...policy, approvals: dated };
}

/**
 * A folder source's memory of when it first read each file's content: the same content
 * keeps its first time, a changed content gets the time it was read changed.
 */
export class FirstSeen {
  readonly #seen = new Map<string, { content: string; at: number }>();

  at(file: string, content: string, now: number): number {
    const seen = this.#seen.get(file);
    if (seen && seen.content === content) return seen.at;
    this.#seen.set(file, { content, at: now });
    return now;
  }
}
