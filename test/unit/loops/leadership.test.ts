import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  TermWrites,
  WhileLeader,
  type ElectorLike,
  type LeaderTermLike,
} from '../../../src/loops/leadership.ts';
import { createDispatcher } from '../../../src/dispatch/queue.ts';
import type { WriteRequest } from '../../../src/dispatch/types.ts';
import { silentLogger } from '../../../src/observe/log.ts';

/** An elector driven by hand: begin() and end() a term. */
class HandElector implements ElectorLike {
  #started: ((term: LeaderTermLike) => void)[] = [];
  #stopped: ((term: LeaderTermLike) => void)[] = [];
  #term: AbortController | undefined;
  onStartedLeading(listener: (term: LeaderTermLike) => void): void {
    this.#started.push(listener);
  }
  onStoppedLeading(listener: (term: LeaderTermLike) => void): void {
    this.#stopped.push(listener);
  }
  begin(): void {
    this.#term = new AbortController();
    for (const l of this.#started) l({ signal: this.#term.signal });
  }
  end(): void {
    const term = this.#term!;
    term.abort();
    for (const l of this.#stopped) l({ signal: term.signal });
  }
}

describe('work that runs only while leading', () => {
  it('starts on a term, stops when it ends, and generations never overlap', async () => {
    const elector = new HandElector();
    const log: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const supervisor = new WhileLeader(
      elector,
      async () => {
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        log.push('start');
        await sleep(5);
        return {
          stop: async () => {
            await sleep(20); // a slow stop: the next start must wait for it
            running -= 1;
            log.push('stop');
          },
        };
      },
      silentLogger,
    );
    elector.begin();
    await sleep(10);
    elector.end();
    elector.begin();
    await sleep(60);
    assert.deepEqual(log, ['start', 'stop', 'start']);
    assert.equal(maxRunning, 1);
    await supervisor.close();
    assert.deepEqual(log, ['start', 'stop', 'start', 'stop']);
    assert.equal(running, 0);
  });

  const endings: { name: string; endAfterMs: number | undefined; expected: string[] }[] = [
    {
      name: 'a term that ends before its work begins to start starts nothing',
      endAfterMs: undefined,
      expected: [],
    },
    {
      name: 'a term that ends while the work is starting stops the work as soon as it started',
      endAfterMs: 5,
      expected: ['start', 'stop'],
    },
  ];
  for (const { name, endAfterMs, expected } of endings) {
    it(name, async () => {
      const elector = new HandElector();
      const log: string[] = [];
      const supervisor = new WhileLeader(
        elector,
        async () => {
          await sleep(20);
          log.push('start');
          return { stop: async () => void log.push('stop') };
        },
        silentLogger,
      );
      elector.begin();
      if (endAfterMs !== undefined) await sleep(endAfterMs);
      elector.end();
      await sleep(40);
      assert.deepEqual(log, expected);
      await supervisor.close();
    });
  }

  it('a start that throws leaves the replica standing by and the next term tries again', async () => {
    const elector = new HandElector();
    let attempts = 0;
    const supervisor = new WhileLeader(
      elector,
      () => {
        attempts += 1;
        if (attempts === 1) throw new Error('boom');
        return { stop: async () => undefined };
      },
      silentLogger,
    );
    elector.begin();
    await sleep(5);
    assert.equal(supervisor.generations, 0);
    elector.end();
    elector.begin();
    await sleep(5);
    assert.equal(supervisor.generations, 1);
    await supervisor.close();
  });

  it('nothing starts after close', async () => {
    const elector = new HandElector();
    let starts = 0;
    const supervisor = new WhileLeader(
      elector,
      () => ((starts += 1), { stop: async () => undefined }),
      silentLogger,
    );
    await supervisor.close();
    elector.begin();
    await sleep(5);
    assert.equal(starts, 0);
  });
});

describe('writes bound to the term they were decided under', () => {
  const request = (name: string): WriteRequest => ({
    key: `ns/${name}`,
    target: { namespace: 'ns', name, uid: `uid-${name}`, resourceVersion: '1' },
    op: { type: 'removeGate', gate: 't.io/ready', gateIndex: 0 },
    priority: 0,
    tenant: 't',
    deadline: Date.now() + 60_000,
    decisionId: `d-${name}`,
  });

  it('when the term ends, its queued write is cancelled unsent, its in-flight write finishes with its real result, and a new term writes again', async () => {
    const started: string[] = [];
    let finishA: () => void = () => undefined;
    const terms = new TermWrites();
    // One write at a time; `a` hangs until the test lets it finish, so `b` stays queued.
    const dispatcher = createDispatcher({
      concurrency: 1,
      qps: 1000,
      executor: terms.executor(
        (req) =>
          new Promise((resolve) => {
            started.push(req.target.name);
            if (req.target.name === 'a') finishA = () => resolve({ resourceVersion: '2' });
            else resolve({ resourceVersion: '2' });
          }),
      ),
    });
    const term1 = new AbortController();
    const loops1 = terms.bind(dispatcher, term1.signal);
    const a = loops1.enqueue(request('a'));
    const b = loops1.enqueue(request('b'));
    assert.ok(a.accepted && b.accepted);
    await sleep(20);
    assert.deepEqual(started, ['a'], 'a in flight, b queued');

    term1.abort(new Error('leadership lost'));
    assert.equal((await b.done).result, 'cancelled');
    finishA();
    assert.equal(
      (await a.done).result,
      'succeeded',
      'the in-flight write reports what really happened',
    );
    assert.deepEqual(started, ['a'], 'the queued write of the lost term was never sent');

    const loops2 = terms.bind(dispatcher, new AbortController().signal);
    const c = loops2.enqueue(request('c'));
    assert.ok(c.accepted);
    assert.equal((await c.done).result, 'succeeded');
    await dispatcher.close();
  });

  it('a write enqueued after its term ended is never sent', async () => {
    let sent = 0;
    const terms = new TermWrites();
    const dispatcher = createDispatcher({
      executor: terms.executor(async () => (sent++, { resourceVersion: '2' })),
    });
    const term = new AbortController();
    term.abort(new Error('leadership lost'));
    const late = terms.bind(dispatcher, term.signal).enqueue(request('late'));
    assert.ok(late.accepted);
    assert.equal((await late.done).result, 'cancelled');
    assert.equal(sent, 0);
    await dispatcher.close();
  });
});
