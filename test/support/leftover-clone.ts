/**
 * A writer's clone as a term start finds it: commits an earlier term left unpushed on a
 * base the remote has moved past. A real bare repository on disk; "the remote" is the
 * clone's remote-tracking ref, moved by the fixture, so nothing is fetched or pushed
 * over a network (OfflineRepo) and the test reads what the term start rebuilt locally.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import git from 'isomorphic-git';
import * as fs from 'node:fs';
import { commitMessage } from '../../src/audit/message.ts';
import { batchOf, phaseOf, serializeBatch } from '../../src/audit/record.ts';
import { AuditRepo } from '../../src/audit/repo.ts';
import { auditFilePath } from '../../src/audit/writer.ts';
import type { Decision } from '../../src/decide/decision.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../builders/decision.ts';

/** Fetch reads the remote-tracking ref the fixture set; push refuses (nothing leaves the disk). */
export class OfflineRepo extends AuditRepo {
  override fetch(): Promise<string | undefined> {
    return this.trackingTip();
  }

  override push(): Promise<number> {
    return Promise.reject(new Error('offline test clone: pushes are not made'));
  }
}

export const leftoverCluster = 'prod';
const branch = 'tollgate/audit';

/** One commit as the writer makes it: one file of one batch kind. */
async function commitBatch(
  repo: AuditRepo,
  clock: ManualClock,
  controller: string,
  sequence: number,
  decisions: readonly Decision[],
): Promise<void> {
  clock.advance(1_000);
  const batch = batchOf(phaseOf(decisions[0] as Decision));
  await repo.commitFile(
    auditFilePath(leftoverCluster, controller, clock.now(), sequence),
    serializeBatch(decisions),
    commitMessage(decisions, { batch, controller, cluster: leftoverCluster }),
  );
}

export interface LeftoverClone {
  readonly repo: OfflineRepo;
  readonly clock: ManualClock;
  /** The leftover commits' decisions, each commit's in order, oldest commit first. */
  readonly leftovers: readonly (readonly Decision[])[];
  /** The last round's intents: no commit gives them an outcome (recovery's to decide). */
  readonly open: readonly Decision[];
}

/**
 * Controller `old` commits `rounds` rounds of a strict loop into one hour folder, each an
 * intents commit (two Releases), an outcomes commit for the previous round's intents
 * and, every third round, a records commit (a Hold). Its pushes stopped after the base
 * commit; meanwhile controller `other` pushed `remoteCommits` commits into the same
 * folder. With `remoteRecovered`, the first round's intents had been pushed too, and the
 * other leader's recovery closed them as cancelled: the leftovers then start with their
 * succeeded outcomes, which the term start keeps as correction records.
 */
export async function leftoverClone(options: {
  readonly rounds: number;
  readonly remoteCommits: number;
  readonly remoteRecovered?: boolean;
}): Promise<LeftoverClone> {
  const clock = new ManualClock(Date.UTC(2026, 10, 29, 7));
  const repo = new OfflineRepo({
    dir: mkdtempSync(join(tmpdir(), 'tollgate-leftovers-')),
    url: 'http://127.0.0.1:9/audit.git',
    branch,
    author: { name: 't', email: 't@t' },
    clock,
  });
  await repo.open();
  const tracking = `refs/remotes/origin/${branch}`;
  const setRef = (ref: string, value: string) =>
    git.writeRef({ fs, gitdir: repo.gitdir, ref, value, force: true });

  const batches: Decision[][] = [];
  let previous: Decision[] = [];
  for (let round = 1; round <= options.rounds; round += 1) {
    const intents = [aRelease(`r${round}-a`), aRelease(`r${round}-b`)];
    batches.push(intents);
    if (previous.length > 0) batches.push(previous.map((intent) => outcomeOf(intent)));
    if (round % 3 === 0) batches.push([aHold(`r${round}`)]);
    previous = intents;
  }
  const pushed = options.remoteRecovered === true ? 1 : 0;
  await commitBatch(repo, clock, 'old', 0, [aHold('base')]);
  for (const [index, decisions] of batches.slice(0, pushed).entries())
    await commitBatch(repo, clock, 'old', index + 1, decisions);
  await setRef(tracking, (await repo.localTip()) as string);
  for (const [index, decisions] of batches.slice(pushed).entries())
    await commitBatch(repo, clock, 'old', pushed + index + 1, decisions);
  const leftTip = (await repo.localTip()) as string;

  await repo.resetToRemote();
  for (let index = 1; index <= options.remoteCommits; index += 1)
    await commitBatch(repo, clock, 'other', index, [aHold(`other-${index}`)]);
  if (pushed > 0) {
    const cancelled = { result: 'cancelled', message: 'not sent before restart' } as const;
    const recovered = (batches[0] ?? []).map((intent) => outcomeOf(intent, cancelled));
    await commitBatch(repo, clock, 'other', options.remoteCommits + 1, recovered);
  }
  await setRef(tracking, (await repo.localTip()) as string);
  await setRef(`refs/heads/${branch}`, leftTip);
  return { repo, clock, leftovers: batches.slice(pushed), open: previous };
}

function aRelease(name: string): Decision {
  return aDecision('Release', name).intent().obj();
}

function aHold(name: string): Decision {
  return aDecision('Hold', name).recorded().obj();
}
