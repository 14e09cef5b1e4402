import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  MemoryReducer,
  memoryReducingCollection,
  shouldReduce,
} from '../../../src/lib/memory-reducer.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const MiB = 1024 * 1024;

/** A process whose RSS the test sets; a collection brings it to `afterCollect`. */
function aProcess(start: number, afterCollect: (rss: number) => number) {
  const state = { rss: start, collections: 0 };
  const timers = new ManualTimers();
  const reducer = new MemoryReducer({
    timers,
    rss: () => state.rss,
    collect: () => {
      state.collections += 1;
      state.rss = afterCollect(state.rss);
    },
    everyMs: 60_000,
    growthBytes: 16 * MiB,
  });
  return { state, timers, reducer };
}

describe('shouldReduce: RSS grown by the threshold since the base', () => {
  const cases = [
    { rss: 100, base: 100, growth: 16, reduce: false, why: 'no growth' },
    { rss: 115, base: 100, growth: 16, reduce: false, why: 'below the threshold' },
    { rss: 116, base: 100, growth: 16, reduce: true, why: 'at the threshold' },
    { rss: 90, base: 100, growth: 16, reduce: false, why: 'shrunk' },
  ];
  for (const c of cases)
    it(`${c.why}: ${c.reduce ? 'collects' : 'does not collect'}`, () => {
      assert.equal(shouldReduce(c.rss * MiB, c.base * MiB, c.growth * MiB), c.reduce);
    });
});

describe('MemoryReducer: one collection per burst, none while steady', () => {
  it('a steady process is never collected', async () => {
    const { state, timers, reducer } = aProcess(150 * MiB, (rss) => rss);
    reducer.start();
    await timers.advance(10 * 60_000);
    reducer.stop();
    assert.equal(state.collections, 0);
  });

  it('a burst is collected once at the next look, and the RSS after it is the new base', async () => {
    const { state, timers, reducer } = aProcess(150 * MiB, (rss) => rss - 40 * MiB);
    reducer.start();
    await timers.advance(60_000);
    state.rss = 210 * MiB; // a fetch inflated a pack
    await timers.advance(60_000);
    assert.equal(state.collections, 1);
    assert.equal(state.rss, 170 * MiB);
    await timers.advance(5 * 60_000);
    assert.equal(state.collections, 1, 'no collection while RSS stays at the new base');
    reducer.stop();
  });

  it('what a collection cannot give back is not collected again at every look', async () => {
    const { state, timers, reducer } = aProcess(150 * MiB, (rss) => rss); // all of it live
    reducer.start();
    state.rss = 200 * MiB;
    await timers.advance(10 * 60_000);
    reducer.stop();
    assert.equal(state.collections, 1);
  });

  it('growth is counted from the lowest RSS seen: shrinking, then growing back by the threshold collects', async () => {
    const { state, timers, reducer } = aProcess(150 * MiB, (rss) => rss - 10 * MiB);
    reducer.start();
    state.rss = 120 * MiB;
    await timers.advance(60_000);
    state.rss = 136 * MiB;
    await timers.advance(60_000);
    assert.equal(state.collections, 1);
    reducer.stop();
  });

  it('stopped, it looks no more', async () => {
    const { state, timers, reducer } = aProcess(150 * MiB, (rss) => rss);
    reducer.start();
    reducer.stop();
    state.rss = 300 * MiB;
    await timers.advance(10 * 60_000);
    assert.equal(state.collections, 0);
    assert.deepEqual(timers.pending, []);
  });
});

/**
 * A process at its defaults whose event loop is `busy` (the share of the time since the
 * last look it ran), and whose RSS a collection brings down by 60 MiB.
 */
function aProcessAtDefaults(busy: { share: number }) {
  const state = { rss: 150 * MiB, collections: [] as number[] };
  const timers = new ManualTimers();
  const started = timers.clock.now();
  const reducer = new MemoryReducer({
    timers,
    rss: () => state.rss,
    collect: () => {
      state.collections.push(timers.clock.now() - started);
      state.rss -= 60 * MiB;
    },
    busyShare: () => busy.share,
    now: () => timers.clock.now(),
  });
  return { state, timers, reducer };
}

describe('MemoryReducer: a burst given back once the process is quiet', () => {
  it('a burst is given back at the first quiet look, within ten seconds, not a minute later', async () => {
    const { state, timers, reducer } = aProcessAtDefaults({ share: 0.01 });
    reducer.start();
    await timers.advance(1_000);
    state.rss = 230 * MiB; // a relist of 10,000 pods, then nothing to do
    await timers.advance(9_000);
    assert.deepEqual(state.collections, [10_000]);
    assert.equal(state.rss, 170 * MiB);
    reducer.stop();
  });

  it('a busy process is collected at most once a minute, however often its RSS grows', async () => {
    const busy = { share: 0.6 };
    const { state, timers, reducer } = aProcessAtDefaults(busy);
    reducer.start();
    for (let second = 1; second <= 150; second += 1) {
      state.rss = Math.max(state.rss, 150 * MiB) + MiB; // passes over many pods, heap growing
      await timers.advance(1_000);
    }
    reducer.stop();
    // The first at the first look that finds 16 MiB of growth (it has not collected yet:
    // no minute to wait), then a minute apart.
    assert.deepEqual(state.collections, [20_000, 80_000, 140_000]);
  });

  it('a process that goes quiet after a busy spell is collected at its first quiet look', async () => {
    const busy = { share: 0.6 };
    const { state, timers, reducer } = aProcessAtDefaults(busy);
    reducer.start();
    state.rss = 230 * MiB;
    await timers.advance(10_000);
    assert.deepEqual(state.collections, [10_000], 'its start given back');
    state.rss = 250 * MiB; // a wave
    await timers.advance(30_000);
    assert.deepEqual(state.collections, [10_000], 'busy and not yet a minute since');
    busy.share = 0.02;
    await timers.advance(10_000);
    assert.deepEqual(state.collections, [10_000, 50_000]);
    reducer.stop();
  });

  it('a process that goes quiet 10 MiB above its last collection is collected at its first quiet look, and not again while it stays quiet', async () => {
    const busy = { share: 0.6 };
    const { state, timers, reducer } = aProcessAtDefaults(busy);
    reducer.start();
    state.rss = 230 * MiB;
    await timers.advance(10_000);
    assert.deepEqual(state.collections, [10_000], 'its start given back (to 170 MiB)');
    state.rss = 180 * MiB; // the last of a wave's garbage: under the 16 MiB a busy look needs
    await timers.advance(30_000);
    assert.deepEqual(state.collections, [10_000], 'busy: not for 10 MiB');
    busy.share = 0.02;
    await timers.advance(10_000);
    assert.deepEqual(state.collections, [10_000, 50_000], 'given back as it goes quiet');
    state.rss = 128 * MiB; // then a few MiB back, as a quiet process does
    await timers.advance(10_000);
    state.rss = 134 * MiB;
    await timers.advance(5 * 60_000);
    assert.deepEqual(state.collections, [10_000, 50_000], 'quiet since: 16 MiB again');
    reducer.stop();
  });

  it('a quiet, steady process is never collected', async () => {
    const { state, timers, reducer } = aProcessAtDefaults({ share: 0 });
    reducer.start();
    await timers.advance(10 * 60_000);
    reducer.stop();
    assert.deepEqual(state.collections, []);
  });
});

describe('MemoryReducer where RSS cannot be read', () => {
  it('a process without /proc (RSS unreadable) is never collected, and neither construction nor a look throws', async () => {
    const timers = new ManualTimers();
    let collections = 0;
    const unreadable = (): number => {
      throw new Error('ENOENT: no such file or directory, uv_resident_set_memory');
    };
    const off: string[] = [];
    const reducer = new MemoryReducer({
      timers,
      rss: unreadable,
      collect: () => (collections += 1),
      onUnavailable: (error) => off.push(error.message),
    });
    reducer.start();
    await timers.advance(10 * 60_000);
    assert.equal(reducer.check(), false);
    reducer.stop();
    assert.equal(collections, 0);
    assert.deepEqual(off, ['ENOENT: no such file or directory, uv_resident_set_memory']);
    assert.deepEqual(timers.pending, [], 'it stops looking');
  });
});

describe('memoryReducingCollection', () => {
  it('collects without putting gc on the global object', () => {
    const collect = memoryReducingCollection();
    collect();
    assert.equal((globalThis as { gc?: unknown }).gc, undefined);
  });
});

describe('MemoryReducer: the start is a burst like any other', () => {
  it("a busy process's start-up burst (every pod listed, the first passes) is given back at its first look, not a minute later", async () => {
    const { state, timers, reducer } = aProcessAtDefaults({ share: 0.6 });
    reducer.start();
    state.rss = 230 * MiB; // the initial list of 10,000 pods; Released conditions still to write
    await timers.advance(10_000);
    assert.deepEqual(state.collections, [10_000]);
    assert.equal(state.rss, 170 * MiB);
    reducer.stop();
  });
});
