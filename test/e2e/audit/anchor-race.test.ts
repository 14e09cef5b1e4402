/**
 * The tamper anchor and a push racing a fetch: the anchor names the last commit the
 * leader pushed, and another process (a standby, or a new leader at its term start)
 * reads it after fetching. When the leader pushes between that process's fetch and its
 * read of the anchor, the anchor names a commit the fetch could not have seen: the branch
 * grew, it was not rewritten. The soak's seed 10 (30 minutes) found the standby refusing
 * the branch for good that way, then leading for the rest of the run without a push.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { openTestWriter } from './support.ts';
import type { AuditAnchor } from '../../../src/audit/writer.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

let git: GitServer;
before(async () => {
  git = await startGitServer();
});
after(async () => {
  await git?.close();
});

/** The Lease's annotation, shared by both processes as the Lease is. */
function sharedAnchor(): AuditAnchor & { value: string | undefined; rewrites: number } {
  const anchor = {
    value: undefined as string | undefined,
    rewrites: 0,
    read: () => anchor.value,
    write: (value: string) => {
      anchor.value = value;
    },
    rewritten: () => {
      anchor.rewrites += 1;
    },
  };
  return anchor;
}

test('a push that lands between a term start fetch and its read of the anchor is growth, not a rewrite', async () => {
  const url = git.createRepo('anchor-race');
  const anchor = sharedAnchor();
  const leader = await openTestWriter(git, url, 'race', 'replica-a');
  leader.writer.setAnchor(anchor);
  await leader.writer.reconcile();
  const release = async (name: string): Promise<void> => {
    const intent = aDecision('Release', name, 'race').obj();
    await leader.writer.recordIntents([intent]);
    leader.writer.record([outcomeOf(intent)]);
    await leader.writer.flush();
  };
  await release('p0');

  const next = await openTestWriter(git, url, 'race', 'replica-b');
  next.writer.setAnchor(anchor);
  // The leader pushes (and moves the anchor) right after the next process's fetch.
  const fetchOnce = next.repo.sync.bind(next.repo);
  let raced = false;
  next.repo.sync = async () => {
    await fetchOnce();
    if (raced) return;
    raced = true;
    await release('p1');
  };
  await next.writer.reconcile();
  assert.ok(raced, 'the push landed between the fetch and the anchor check');
  assert.equal(anchor.rewrites, 0, 'the branch is not refused');
  const intent = aDecision('Release', 'p2', 'race').obj();
  await next.writer.recordIntents([intent]);
  next.writer.record([outcomeOf(intent)]);
  await next.writer.flush();
  await leader.writer.close();
  await next.writer.close();
});
