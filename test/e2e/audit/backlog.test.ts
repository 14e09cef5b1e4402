/**
 * A term start with a long backlog of leftover commits (a 30-minute seed-3 soak: 770
 * commits left unpushed by a replica's earlier incarnations; its next term pushed them
 * all before recovery and its loops, logged nothing for 3.6 minutes, and was stopped
 * before its loops ever started). On a real Git server (git http-backend):
 * - the backlog lands in bounded pushes, counted in the server's own reflog of the branch
 *   (ceil(N/K) pushes for N commits, K per push);
 * - recovery and the loops start once the leftovers are rebuilt on the remote tip, locally:
 *   the loops' first decision is committed before the last leftover's push, by order of
 *   what happened, not by time; in strict mode its write waits until it is pushed;
 * - a term stopped (its lease lost) after the first push has pushed what it pushed, keeps
 *   the rest, and the next term pushes that: nothing lost or recorded twice (verify);
 * - while Git refuses pushes, the term start still ends and the loops record locally.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { commitMessage, parseTrailers } from '../../../src/audit/message.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import { AuditRepo, type PushOptions, type LocalCommit } from '../../../src/audit/repo.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { auditFilePath, GitAuditWriter } from '../../../src/audit/writer.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { gitServerForFile } from '../security/support.ts';
import { gitCli, successorRecovers } from './support.ts';

const branch = 'tollgate/audit';
const cluster = 'prod';
const git = gitServerForFile('tollgate-audit-backlog-');
const clock = new ManualClock(Date.UTC(2026, 11, 2, 4, 0, 0));

/** The writer's clone, telling `events` what it commits (`commit <batch>`) and pushes (`pushed <file>`). */
class WatchedRepo extends AuditRepo {
  readonly events: string[] = [];
  pushes = 0;
  /**
   * The first push waits for this (a slow Git server); a bound keeps a term start that
   * waits for its pushes (the defect) from waiting forever: it then fails on order.
   */
  holdFirstPush: Promise<void> | undefined;
  override async commitFile(path: string, content: string, message: string) {
    const result = await super.commitFile(path, content, message);
    this.events.push(`commit ${parseTrailers(message).get('Tollgate-Batch')?.[0] ?? '?'}`);
    return result;
  }
  override async push(
    replan?: (pending: readonly LocalCommit[]) => Promise<void>,
    options?: PushOptions,
  ): Promise<number> {
    if (this.pushes === 0 && this.holdFirstPush)
      await Promise.race([
        this.holdFirstPush,
        new Promise((resolve) => setTimeout(resolve, 120_000)),
      ]);
    const before = new Set((await this.unpushed()).map((commit) => commit.path));
    const landed = await super.push(replan, options);
    const after = new Set((await this.unpushed()).map((commit) => commit.path));
    this.pushes += 1;
    for (const path of before) if (!after.has(path)) this.events.push(`pushed ${path}`);
    return landed;
  }
}

async function cloneOf(url: string, dir = git.tempDir()): Promise<WatchedRepo> {
  const repo = new WatchedRepo({
    dir,
    url,
    branch,
    token: git.server().token,
    author: { name: 'tollgate', email: 'tollgate@tollgate.invalid' },
    clock,
    shallowDepth: 0,
    retry: { maxAttempts: 2, maxElapsedMs: 5_000, baseDelayMs: 5, maxDelayMs: 20 },
  });
  await repo.open();
  await repo.fetch();
  return repo;
}

/** Commits `decisions` as one commit each on `repo`'s local tip; returns their files. */
async function commitEach(
  repo: AuditRepo,
  controller: string,
  decisions: readonly Decision[],
): Promise<string[]> {
  const files: string[] = [];
  for (const [index, decision] of decisions.entries()) {
    clock.advance(1_000);
    const batch = decision.outcome.result === 'pending' ? 'intents' : 'records';
    const { path } = await repo.commitFile(
      auditFilePath(cluster, controller, clock.now(), index + 1),
      serializeBatch([decision]),
      commitMessage([decision], { batch, controller, cluster }),
    );
    files.push(path);
  }
  return files;
}

/**
 * A's clone after its earlier term: one commit pushed, then `count` commits left unpushed
 * (Hold records, and one Release intent left open halfway); meanwhile B pushed 3 commits.
 */
async function leftoversBehindTheRemote(name: string, count: number) {
  const url = git.server().createRepo(name);
  const bare = `${git.server().root}/${name}.git`;
  await gitCli(bare, 'config', 'core.logAllRefUpdates', 'always');
  const repo = await cloneOf(url);
  await commitEach(repo, 'base', [aDecision('Hold', 'base').recorded().obj()]);
  await repo.push();
  const open = aDecision('Release', 'left-open').obj();
  const leftovers = Array.from({ length: count }, (_, i) =>
    i === Math.floor(count / 2) ? open : aDecision('Hold', `left-${i}`).recorded().obj(),
  );
  const files = await commitEach(repo, 'a', leftovers);
  const other = await cloneOf(url);
  await commitEach(
    other,
    'b',
    ['b1', 'b2', 'b3'].map((pod) => aDecision('Hold', pod).recorded().obj()),
  );
  await other.push();
  repo.events.length = 0;
  repo.pushes = 0;
  return { url, bare, repo, open, leftovers, files };
}

/**
 * One decision per commit (maxDecisions 1): a term start rebuilds its leftovers in files
 * of at most maxDecisions records, so the backlog stays one commit per leftover and the
 * pushes counted here are those of a backlog of `count` commits (a Git outage's too).
 */
function writerOn(repo: AuditRepo, maxCommitsPerPush: number): GitAuditWriter {
  return new GitAuditWriter({
    store: repo,
    cluster,
    controller: 'a',
    mode: 'strict',
    batch: { maxDecisions: 1, maxDelayMs: 20 },
    maxCommitsPerPush,
    retryIntervalMs: 600_000,
    clock,
  });
}

/** The branch tips the server's reflog holds, oldest first (one per push that moved it). */
async function pushedTips(bare: string): Promise<string[]> {
  const log = await gitCli(bare, 'log', '-g', '--format=%H', `refs/heads/${branch}`);
  return log.trim().split('\n').filter(Boolean).reverse();
}

async function remoteTrail(url: string) {
  const source = await openAuditSource(url, branch, { token: git.server().token });
  try {
    return await readAuditHistory(source);
  } finally {
    source.close();
  }
}

/** Each id the trail holds, with its phases in order. */
function phasesById(history: Awaited<ReturnType<typeof remoteTrail>>): Map<string, string[]> {
  const byId = new Map<string, string[]>();
  for (const commit of history)
    for (const record of commit.records)
      byId.set(record.id, [...(byId.get(record.id) ?? []), record.phase]);
  return byId;
}

describe('a term start with a long backlog of leftover commits', () => {
  it('starts recovery and the loops before the backlog is pushed, and pushes it in ceil(N/K) pushes', async (t) => {
    const count = 300;
    const perPush = 50;
    const { url, bare, repo, open, leftovers, files } = await leftoversBehindTheRemote(
      'order',
      count,
    );
    const tipsBefore = (await pushedTips(bare)).length;
    let release!: () => void;
    repo.holdFirstPush = new Promise((resolve) => (release = resolve));
    const writer = writerOn(repo, perPush);
    assert.equal(
      await successorRecovers(writer, cluster, [open], [{ state: 'not-applied' }], {
        awaitPush: false,
      }),
      1,
      'recovery closed the leftover open intent',
    );
    clock.advance(20); // recovery's outcome is due
    repo.events.push('loops start');
    const first = aDecision('Release', 'first-of-the-term').obj();
    const recorded = writer
      .recordIntents([first])
      .then(() => repo.events.push('first intent pushed'));
    release();
    await recorded;
    writer.record([outcomeOf(first)]);
    await writer.flush();
    await writer.close();

    const events = repo.events;
    const lastLeftover = events.indexOf(`pushed ${files.at(-1)}`);
    const loopsStart = events.indexOf('loops start');
    const firstCommit = events.indexOf('commit intents', loopsStart);
    t.diagnostic(
      `${count} leftovers, ${perPush} per push: loops started after ${events.slice(0, loopsStart).filter((e) => e.startsWith('pushed')).length} were pushed; first intent committed at event ${firstCommit}, last leftover pushed at ${lastLeftover}, ${repo.pushes} pushes in all`,
    );
    assert.ok(lastLeftover > 0, 'the last leftover was pushed');
    assert.ok(loopsStart >= 0 && loopsStart < lastLeftover, 'the loops started first');
    assert.ok(
      firstCommit > loopsStart && firstCommit < lastLeftover,
      "the loops' first decision was committed before the last leftover's push",
    );
    assert.ok(
      events.indexOf('first intent pushed') > lastLeftover,
      'a strict intent is settled only once pushed, after the backlog before it',
    );

    // The server's reflog: one entry per push; the leftovers landed in ceil(N/K) of them.
    const tips = (await pushedTips(bare)).slice(tipsBefore);
    const lastFile = files.at(-1) as string;
    const landedAt = [];
    for (const tip of tips)
      landedAt.push(
        await gitCli(bare, 'cat-file', '-e', `${tip}:${lastFile}`).then(
          () => true,
          () => false,
        ),
      );
    assert.equal(
      landedAt.indexOf(true) + 1,
      Math.ceil(count / perPush),
      `the last leftover landed with push ${landedAt.indexOf(true) + 1} of ${tips.length}`,
    );
    let previous = (await pushedTips(bare))[tipsBefore - 1] as string;
    for (const tip of tips) {
      const gained = Number(
        (await gitCli(bare, 'rev-list', '--count', `${previous}..${tip}`)).trim(),
      );
      assert.ok(gained >= 1 && gained <= perPush, `a push gained ${gained} commits`);
      previous = tip;
    }

    const history = await remoteTrail(url);
    assert.deepEqual(verifyTrail(history).problems, []);
    const phases = phasesById(history);
    for (const decision of leftovers)
      assert.equal(phases.get(decision.id)?.[0], decision === open ? 'intent' : 'record');
    assert.deepEqual(phases.get(open.id), ['intent', 'outcome'], 'recovery closed it once');
    assert.deepEqual(phases.get(first.id), ['intent', 'outcome']);
  });

  it('stopped after its first push keeps the rest; the next term pushes it, nothing lost or doubled', async () => {
    const count = 40;
    const perPush = 10;
    const { url, bare, repo, open, leftovers } = await leftoversBehindTheRemote('stopped', count);
    const commitsBefore = Number(
      (await gitCli(bare, 'rev-list', '--count', `refs/heads/${branch}`)).trim(),
    );
    const writer = writerOn(repo, perPush);
    writer.setFence(() => repo.pushes < 1); // the lease is lost while the first push runs
    await writer.reconcile();
    await assert.rejects(writer.flush(), /not the leader/);
    assert.equal(repo.pushes, 1);
    assert.equal(
      Number((await gitCli(bare, 'rev-list', '--count', `refs/heads/${branch}`)).trim()),
      commitsBefore + perPush,
      'the first push is kept by the remote',
    );
    assert.equal((await repo.unpushed()).length, count - perPush, 'the rest is kept locally');
    await writer.close({ flush: false });

    // The next term on the same cache: its reconcile plans the rest and pushes it.
    const next = await cloneOf(url, repo.gitdir);
    const again = writerOn(next, perPush);
    await successorRecovers(again, cluster, [open], [{ state: 'not-applied' }], {
      awaitPush: false,
    });
    await again.flush();
    await again.close();
    assert.equal((await next.unpushed()).length, 0);

    const history = await remoteTrail(url);
    assert.deepEqual(verifyTrail(history).problems, []);
    const phases = phasesById(history);
    for (const decision of leftovers)
      assert.deepEqual(
        phases.get(decision.id),
        decision === open ? ['intent', 'outcome'] : ['record'],
        `${decision.id}: once`,
      );
  });

  it('ends while Git refuses pushes: recovery and the loops record locally, the backlog lands once Git accepts', async () => {
    const count = 20;
    const { url, bare, repo, open, files } = await leftoversBehindTheRemote('refused', count);
    const writer = writerOn(repo, 5);
    const intentCommits = (): number =>
      repo.events.filter((event) => event === 'commit intents').length;
    const refused = { intentCommits: 0 }; // counted just before the refused intent
    git.server().refusePushes(503);
    try {
      await successorRecovers(writer, cluster, [open], [{ state: 'not-applied' }], {
        awaitPush: false,
      });
      clock.advance(20); // recovery's outcome is due
      // The refused push waits for its retry: the loops' intents are refused at once,
      // neither committed nor cancelled (a pass per event would otherwise add both).
      const first = aDecision('Release', 'first-while-refused').obj();
      refused.intentCommits = intentCommits();
      await assert.rejects(
        writer.recordIntents([first]),
        /audit push failing \(.*503.*\); intents not recorded, writes must not be sent; next push attempt in \d+ s/,
      );
      assert.equal(intentCommits(), refused.intentCommits, 'the refused intent was not committed');
      assert.ok(writer.backlog >= count, `the backlog counts the leftovers: ${writer.backlog}`);
      await assert.rejects(gitCli(bare, 'cat-file', '-e', `refs/heads/${branch}:${files[0]}`));
    } finally {
      git.server().refusePushes(undefined);
    }
    await writer.flush();
    const second = aDecision('Release', 'after-git-is-back').obj();
    await writer.recordIntents([second]);
    assert.equal(
      intentCommits(),
      refused.intentCommits + 1,
      'once a push landed, intents are recorded',
    );
    writer.record([outcomeOf(second)]);
    await writer.close();
    assert.equal((await repo.unpushed()).length, 0);
    const history = await remoteTrail(url);
    assert.deepEqual(verifyTrail(history).problems, []);
  });
});
