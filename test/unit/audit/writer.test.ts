/**
 * Batching, strict/async modes and the backlog bound of GitAuditWriter, over an
 * in-memory store and a manual clock (the git side is proven in test/e2e/audit/).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AuditBacklogFullError,
  AuditUnavailableError,
  GitAuditWriter,
  auditFilePath,
  type AuditStore,
  type Timers,
} from '../../../src/audit/writer.ts';
import { parseBatch } from '../../../src/audit/record.ts';
import { parseTrailers } from '../../../src/audit/message.ts';
import type { PushOptions } from '../../../src/audit/repo.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

class MemoryStore implements AuditStore {
  commits: { path: string; content: string; message: string; pushed: boolean }[] = [];
  failPushes = 0;
  failCommits = 0;
  failSyncs = 0;
  afterPush: (() => void) | undefined;
  pushCalls = 0;
  /** What happened, in order: `commit <path>` and `push <commits>`. */
  readonly events: string[] = [];
  async commitFile(path: string, content: string, message: string) {
    if (this.failCommits > 0) {
      this.failCommits -= 1;
      throw new Error('disk full');
    }
    this.commits.push({ path, content, message, pushed: false });
    this.events.push(`commit ${path}`);
    return { oid: String(this.commits.length), path };
  }
  async push(_replan?: unknown, options: PushOptions = {}) {
    this.pushCalls += 1;
    if (this.failPushes > 0) {
      this.failPushes -= 1;
      throw new Error('remote unavailable');
    }
    const chunk = this.commits
      .filter((item) => !item.pushed)
      .slice(0, options.maxCommits ?? this.commits.length);
    let landed = 0;
    for (const commit of chunk) {
      commit.pushed = true;
      landed += parseBatch(commit.content, commit.path).length;
    }
    this.events.push(`push ${chunk.length}`);
    this.afterPush?.();
    return landed;
  }
  async sync() {
    if (this.failSyncs > 0) {
      this.failSyncs -= 1;
      throw new Error('remote unreachable');
    }
  }
  async unpushed() {
    return this.commits
      .filter((item) => !item.pushed)
      .map((item) => ({ decisions: parseBatch(item.content, item.path).length }));
  }
  batches(): string[] {
    return this.commits.map(
      (commit) => parseTrailers(commit.message).get('Tollgate-Batch')?.[0] ?? '?',
    );
  }
}

class ManualTimers implements Timers {
  readonly #clock: ManualClock;
  #pending: { at: number; callback: () => void; id: number }[] = [];
  #next = 0;
  constructor(clock: ManualClock) {
    this.#clock = clock;
  }
  set(callback: () => void, ms: number): unknown {
    this.#next += 1;
    this.#pending.push({ at: this.#clock.now() + ms, callback, id: this.#next });
    return this.#next;
  }
  clear(handle: unknown): void {
    this.#pending = this.#pending.filter((timer) => timer.id !== handle);
  }
  /** Moves the clock and fires due timers, then lets the cycles they started finish. */
  async advance(ms: number): Promise<void> {
    this.#clock.advance(ms);
    const due = this.#pending.filter((timer) => timer.at <= this.#clock.now());
    this.#pending = this.#pending.filter((timer) => timer.at > this.#clock.now());
    for (const timer of due) timer.callback();
    await settle();
  }
}

const settle = async (): Promise<void> => {
  for (let index = 0; index < 20; index += 1) await new Promise((resolve) => setImmediate(resolve));
};

function setup(
  options: {
    mode?: 'strict' | 'async';
    maxDecisions?: number;
    maxDelayMs?: number;
    maxBacklog?: number;
    maxCommitsPerPush?: number;
  } = {},
) {
  const clock = new ManualClock();
  const timers = new ManualTimers(clock);
  const store = new MemoryStore();
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'tollgate-0',
    mode: options.mode ?? 'strict',
    batch: { maxDecisions: options.maxDecisions ?? 100, maxDelayMs: options.maxDelayMs ?? 5_000 },
    ...(options.maxBacklog === undefined ? {} : { maxBacklog: options.maxBacklog }),
    ...(options.maxCommitsPerPush === undefined
      ? {}
      : { maxCommitsPerPush: options.maxCommitsPerPush }),
    clock,
    timers,
  });
  return { clock, timers, store, writer };
}

test('outcomes wait for the delay, then become one commit', async () => {
  const { timers, store, writer } = setup();
  writer.record([
    aDecision('Release', 'p1').succeeded().obj(),
    aDecision('Release', 'p2').succeeded().obj(),
  ]);
  await timers.advance(4_999);
  assert.equal(store.commits.length, 0, 'nothing before maxDelayMs');
  assert.equal(writer.backlog, 2);
  await timers.advance(1);
  assert.equal(store.commits.length, 1);
  assert.deepEqual(store.batches(), ['outcomes']);
  assert.equal(store.commits[0]?.pushed, true);
  assert.equal(writer.backlog, 0);
});

test('reaching maxDecisions commits at once without waiting for the delay, in files of at most maxDecisions', async () => {
  const { store, writer } = setup({ maxDecisions: 3 });
  writer.record(Array.from({ length: 7 }, (_, index) => aDecision('Hold', `p${index}`).obj()));
  await settle();
  assert.deepEqual(
    store.commits.map((commit) => parseBatch(commit.content, commit.path).length),
    [3, 3, 1],
  );
  assert.deepEqual(store.batches(), ['records', 'records', 'records']);
});

test('strict intents resolve only after commit and push, and concurrent callers share one commit', async () => {
  const { store, writer } = setup();
  const first = writer.recordIntents([aDecision('Release', 'p1').obj()]);
  const second = writer.recordIntents([aDecision('Release', 'p2').obj()]);
  const third = writer.recordIntents([aDecision('Release', 'p3').obj()]);
  await Promise.all([first, second, third]);
  assert.equal(store.commits.length, 1, 'one group commit');
  assert.equal(store.commits[0]?.pushed, true);
  assert.match(store.commits[0]?.message ?? '', /^release 3 pods in team-a\n/);
});

test('outcomes follow their intents in a later commit', async () => {
  const { timers, store, writer } = setup();
  const intent = aDecision('Release', 'p1').obj();
  await writer.recordIntents([intent]);
  writer.record([outcomeOf(intent)]);
  await timers.advance(5_000);
  assert.deepEqual(store.batches(), ['intents', 'outcomes']);
});

test('async intents resolve at once and are batched by time like outcomes', async () => {
  const { timers, store, writer } = setup({ mode: 'async' });
  await writer.recordIntents([aDecision('Release', 'p1').obj()]);
  assert.equal(store.commits.length, 0);
  await timers.advance(5_000);
  assert.deepEqual(store.batches(), ['intents']);
});

test('a repeated record with nothing new is not committed again: quiet passes make no commits', async () => {
  const { timers, store, writer } = setup();
  const hold = aDecision('Hold', 'p1').input('Budget', false, { used: 4 }).obj();
  writer.record([hold]);
  await timers.advance(5_000);
  for (let pass = 0; pass < 100; pass += 1) {
    writer.record([hold]);
    await timers.advance(5_000);
  }
  assert.equal(store.commits.length, 1);
  writer.record([{ ...hold, inputs: [{ condition: 'Budget', met: false, value: { used: 5 } }] }]);
  await timers.advance(5_000);
  assert.equal(store.commits.length, 2, 'a changed input is recorded');
});

test('a failing push keeps commits in the backlog, rejects strict intents with their cancellation recorded, and retries later', async () => {
  const { timers, store, writer } = setup();
  store.failPushes = 1;
  const intent = aDecision('Release', 'p1').obj();
  await assert.rejects(
    writer.recordIntents([intent]),
    /audit intents not pushed \(strict mode\), writes must not be sent: remote unavailable/,
  );
  assert.equal(writer.backlog, 2, 'the committed intent and its queued cancellation');
  await timers.advance(5_000);
  assert.equal(writer.backlog, 0);
  assert.deepEqual(store.batches(), ['intents', 'outcomes']);
  const outcome = parseBatch(store.commits[1]?.content ?? '', 'x')[0];
  assert.equal(outcome?.id, intent.id);
  assert.equal(outcome?.outcome.result, 'cancelled');
});

test('a full backlog rejects strict intents with a clear error and refuses records, counted', async () => {
  const { store, writer } = setup({ maxBacklog: 3 });
  store.failPushes = 100;
  await assert.rejects(
    writer.recordIntents([aDecision('Release', 'p1').obj(), aDecision('Release', 'p2').obj()]),
  );
  assert.equal(writer.backlog, 4, 'two intents committed, two cancellations queued');
  await assert.rejects(
    writer.recordIntents([aDecision('Release', 'p3').obj()]),
    (error: unknown) => {
      assert.ok(error instanceof AuditBacklogFullError);
      assert.match(error.message, /audit backlog full: 4 decisions not yet pushed \(limit 3\)/);
      return true;
    },
  );
  writer.record([aDecision('Hold', 'p9').obj()]);
  assert.equal(writer.backlog, 4, 'the record without a write was refused');
  writer.record([aDecision('Release', 'p1').succeeded().obj()]);
  assert.equal(writer.backlog, 5, 'outcomes are still accepted');
});

test('nothing recorded means no commit and no push, even on flush', async () => {
  const { store, writer } = setup();
  await writer.flush();
  await writer.close();
  assert.equal(store.commits.length, 0);
  assert.equal(store.pushCalls, 0);
});

test('file names are dated in UTC, one folder per hour (a commit rewrites at most an hour of entries), and carry controller and sequence', () => {
  assert.equal(
    auditFilePath('prod', 'tollgate-0', Date.UTC(2026, 10, 29, 6, 48, 12), 123),
    'audit/prod/2026/11/29/06/T064812Z-tollgate-0-000123.jsonl',
  );
});

test('recordIntents refuses decisions that are not intents, naming the decision', async () => {
  const { writer } = setup();
  await assert.rejects(
    writer.recordIntents([aDecision('Release', 'p1').succeeded().obj()]),
    /gate-release:Release:uid-team-a-p1:1 has outcome "succeeded"/,
  );
});

test('intents that could not even be committed are rejected and never recorded later, with no cancellation', async () => {
  const { timers, store, writer } = setup();
  store.failCommits = 1;
  await assert.rejects(
    writer.recordIntents([aDecision('Release', 'p1').obj()]),
    /audit commit failed: disk full/,
  );
  assert.equal(writer.backlog, 0);
  await timers.advance(60_000);
  await writer.flush();
  assert.equal(store.commits.length, 0);
});

test('a writer whose fence is closed (lease lost) commits and pushes nothing: intents are refused, outcomes dropped and counted', async () => {
  const { store, writer } = setup();
  let leading = true;
  writer.setFence(() => leading);
  const sent = aDecision('Release', 'p1').obj();
  await writer.recordIntents([sent]);
  assert.deepEqual(store.batches(), ['intents']);

  leading = false; // a stall past the lease: the successor closes `sent` at its term start
  writer.record([outcomeOf(sent), aDecision('Hold', 'p2').obj()]);
  await assert.rejects(
    writer.recordIntents([aDecision('Release', 'p3').obj()]),
    /not the leader .* writes must not be sent/,
  );
  await assert.rejects(writer.flush(), /not the leader/);
  assert.deepEqual(store.batches(), ['intents'], 'no outcome, record or intent after the lease');
  assert.equal(writer.backlog, 0, 'dropped, not kept for later');
});

test('commits made while leading but not pushed when the lease is lost stay local until the next term reconciles them', async () => {
  const { store, writer } = setup({ mode: 'async', maxDelayMs: 10 });
  let leading = true;
  writer.setFence(() => leading);
  store.failPushes = 1;
  writer.record([outcomeOf(aDecision('Release', 'p1').obj())]);
  await assert.rejects(writer.flush(), /remote unavailable/);
  leading = false;
  await assert.rejects(writer.flush(), /not the leader/);
  assert.equal(store.commits[0]?.pushed, false, 'not pushed without the lease');
  leading = true;
  await writer.reconcile();
  await writer.flush();
  assert.equal(store.commits[0]?.pushed, true);
  assert.equal(writer.backlog, 0);
});

test('reconcile rejects while the remote cannot be read, so leftovers are never planned against a stale remote', async () => {
  const { store, writer } = setup({ mode: 'async', maxDelayMs: 10 });
  store.failPushes = 1;
  writer.record([outcomeOf(aDecision('Release', 'p1').obj())]);
  await assert.rejects(writer.flush(), /remote unavailable/);
  store.failSyncs = 1;
  await assert.rejects(writer.reconcile(), /remote unreachable/);
  await writer.reconcile();
  await writer.flush();
  assert.equal(store.commits[0]?.pushed, true);
});

test('reconcile does not wait for leftovers it cannot push: they stay in the backlog, pushed behind with retries', async () => {
  const { store, writer, timers } = setup({ mode: 'async', maxDelayMs: 10 });
  store.failPushes = 3;
  writer.record([outcomeOf(aDecision('Release', 'p1').obj())]);
  await assert.rejects(writer.flush(), /remote unavailable/);
  await writer.reconcile();
  await settle();
  assert.equal(store.commits[0]?.pushed, false, 'the push after reconcile failed too');
  assert.equal(writer.backlog, 1, 'the leftover is in the backlog');
  writer.record([aDecision('Hold', 'p2').obj()]);
  await timers.advance(60_000);
  await timers.advance(60_000);
  assert.deepEqual(
    store.commits.map((commit) => commit.pushed),
    [true, true],
    'the retries pushed the leftover and the record made after reconcile',
  );
  assert.equal(writer.backlog, 0);
});

test("an outcome accepted during a term's recovery marks its intent as this term's, so a recovery retry does not close it again", async () => {
  const { writer } = setup({ mode: 'async' });
  const intent = aDecision('Release', 'left-open').obj();
  writer.beginTerm();
  writer.record([outcomeOf(intent, { result: 'cancelled', message: 'not sent' })]);
  assert.equal(writer.recordedThisTerm(intent.id), true, 'queued, not yet pushed');
  writer.endTerm();
  writer.beginTerm();
  assert.equal(writer.recordedThisTerm(intent.id), false, 'a new term starts empty');
});

describe('a backlog is pushed in bounded pushes', () => {
  /** A writer whose store holds `leftovers` unpushed commits of one record each. */
  async function backlogOf(leftovers: number, maxCommitsPerPush: number) {
    const { store, writer, clock } = setup({ mode: 'async', maxDelayMs: 10, maxCommitsPerPush });
    store.failPushes = leftovers;
    for (let seq = 0; seq < leftovers; seq += 1) {
      writer.record([aDecision('Hold', `left-${seq}`).obj()]);
      await writer.flush().catch(() => undefined);
    }
    store.failPushes = 0;
    store.events.length = 0;
    return { store, writer, clock };
  }

  const pushes = (store: MemoryStore): string[] =>
    store.events.filter((event) => event.startsWith('push'));

  test('N commits land in ceil(N/K) pushes of at most K commits each', async () => {
    for (const [leftovers, perPush, expected] of [
      [10, 3, ['push 3', 'push 3', 'push 3', 'push 1']],
      [6, 3, ['push 3', 'push 3']],
      [2, 100, ['push 2']],
    ] as const) {
      const { store, writer } = await backlogOf(leftovers, perPush);
      assert.equal(writer.backlog, leftovers);
      await writer.flush();
      assert.deepEqual(pushes(store), expected, `${leftovers} commits, ${perPush} per push`);
      assert.equal(writer.backlog, 0);
    }
  });

  test('a lease lost after the first push stops the backlog there: N-K commits stay local for the next term', async () => {
    const { store, writer } = await backlogOf(10, 4);
    writer.setFence(() => pushes(store).length === 0);
    await assert.rejects(writer.flush(), /not the leader/);
    assert.deepEqual(pushes(store), ['push 4']);
    assert.equal(store.commits.filter((commit) => !commit.pushed).length, 6);
    assert.equal(writer.backlog, 6, 'the rest is kept, counted in the backlog');
    writer.setFence(() => true);
    await writer.reconcile();
    await writer.flush();
    assert.deepEqual(pushes(store), ['push 4', 'push 4', 'push 2']);
    assert.equal(store.commits.length, 10, 'nothing recorded twice');
  });

  test('a decision recorded while the backlog is pushed is committed between two pushes, before the last one', async () => {
    const { store, writer, clock } = await backlogOf(9, 3);
    store.afterPush = () => {
      store.afterPush = undefined;
      writer.record([aDecision('Hold', 'after-the-first-push').obj()]);
      clock.advance(10);
    };
    await writer.flush();
    const committed = store.events.findIndex((event) => event.includes('commit'));
    assert.ok(committed > 0, `committed after a push: ${store.events.join(', ')}`);
    assert.ok(
      committed < store.events.lastIndexOf('push 3'),
      `committed before the backlog's last push: ${store.events.join(', ')}`,
    );
    assert.equal(writer.backlog, 0);
  });
});

describe('a Git server that stays down, strict mode: the loops are told at once and nothing churns', () => {
  const intentCommits = (store: MemoryStore): number =>
    store.batches().filter((batch) => batch === 'intents').length;

  test('intents asked while a failed push waits for its retry are refused at once: not committed, no cancellation, no push', async () => {
    const { store, writer } = setup();
    store.failPushes = 1_000;
    await assert.rejects(writer.recordIntents([aDecision('Release', 'p1').obj()]));
    const [commits, pushes, backlog] = [store.commits.length, store.pushCalls, writer.backlog];
    await assert.rejects(writer.recordIntents([aDecision('Release', 'p2').obj()]), (error) => {
      assert.ok(error instanceof AuditUnavailableError, String(error));
      assert.match(
        error.message,
        /audit push failing \(remote unavailable\); intents not recorded, writes must not be sent; next push attempt in 5 s/,
      );
      return true;
    });
    assert.equal(store.commits.length, commits, 'no commit');
    assert.equal(store.pushCalls, pushes, 'no push attempt');
    assert.equal(writer.backlog, backlog, 'no cancellation queued');
  });

  test('a pass every second for ten minutes of Git down makes no more intent commits and pushes than the retries', async () => {
    const { timers, store, writer } = setup();
    store.failPushes = 1_000_000;
    for (let second = 0; second < 600; second += 1) {
      await writer.recordIntents([aDecision('Release', `p${second}`).obj()]).catch(() => undefined);
      await timers.advance(1_000);
    }
    // Retries 5, 10, 20, then every 30 s: 22 in ten minutes, each may carry one pass's intents.
    assert.ok(store.pushCalls <= 24, `${store.pushCalls} push attempts`);
    assert.ok(intentCommits(store) <= 24, `${intentCommits(store)} commits of intents`);
  });

  test('the retry interval doubles to at most 30 s, so releases resume within 30 s of Git coming back', async () => {
    const { timers, store, writer } = setup();
    store.failPushes = 1_000_000;
    await writer.recordIntents([aDecision('Release', 'p0').obj()]).catch(() => undefined);
    for (let second = 0; second < 31 * 60; second += 1) await timers.advance(1_000);
    store.failPushes = 0;
    const before = store.pushCalls;
    await timers.advance(30_000);
    assert.equal(store.pushCalls, before + 1, 'the next retry came within 30 s');
    assert.equal(writer.backlog, 0, 'and pushed the backlog');
    await writer.recordIntents([aDecision('Release', 'p1').obj()]);
    assert.equal(store.commits.at(-1)?.pushed, true, 'intents are accepted and pushed again');
  });

  test('records committed while a retry waits are pushed by the retry, not one push per record', async () => {
    const { timers, store, writer } = setup({ mode: 'async', maxDelayMs: 1_000 });
    store.failPushes = 1_000_000;
    writer.record([aDecision('Hold', 'p0').obj()]);
    await timers.advance(1_000);
    const pushes = store.pushCalls;
    // Retries 1 s after the failure, then 2 s after that: two in the next five seconds.
    for (let index = 1; index <= 10; index += 1) {
      writer.record([aDecision('Hold', `p${index}`).obj()]);
      await timers.advance(500);
    }
    assert.ok(store.commits.length >= 5, `${store.commits.length} commits`);
    assert.ok(store.pushCalls - pushes <= 2, `${store.pushCalls - pushes} push attempts`);
    store.failPushes = 0;
    await timers.advance(4_000);
    assert.equal(writer.backlog, 0, 'the retry pushed all of them');
  });
});
