import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  WhileLeader,
  type ElectorLike,
  type LeaderTermLike,
} from '../../../src/loops/leadership.ts';
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
