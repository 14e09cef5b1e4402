// checkLive: the one live-read judgment both loops take before a write decided from the
// cache (cluster/stale-guard.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkLive,
  StaleGuard,
  type LiveCheck,
  type StaleGuardPolicy,
} from '../../../src/cluster/stale-guard.ts';

const policy: StaleGuardPolicy = {
  maxCacheLagMs: 2000,
  destructive: ['Cancel', 'ExpireRelease', 'Rollback'],
  requeue: { baseMs: 100, maxMs: 1000 },
  liveReads: { qps: 2, burst: 2, breaker: { failureThreshold: 3, openMs: 5000 } },
};
type Obj = { metadata: { uid: string; resourceVersion: string } };
const decided = { uid: 'u1', resourceVersion: '10' };
const obj = (uid: string, resourceVersion: string): Obj => ({ metadata: { uid, resourceVersion } });

function guard(synced = true): StaleGuard {
  const g = new StaleGuard({ policy, loop: 'gate-release' });
  if (synced) g.markSynced();
  return g;
}

async function judged(options: {
  guard?: StaleGuard;
  kind?: 'Cancel' | 'Release' | 'Rollback';
  lagMs?: number;
  live?: Obj | undefined;
  canRead?: boolean;
  unguarded?: { action: 'liveRead'; reason: string };
}): Promise<{ check: LiveCheck<Obj>; reads: number; sync: boolean }> {
  let reads = 0;
  const result = checkLive<Obj>({
    ...(options.guard ? { guard: options.guard } : {}),
    key: 'ns/p',
    kind: options.kind ?? 'Cancel',
    cacheLagMs: options.lagMs,
    ...(options.unguarded ? { unguarded: options.unguarded } : {}),
    decided,
    ...(options.canRead === false
      ? {}
      : {
          readLive: async () => {
            reads += 1;
            return options.live;
          },
        }),
  });
  const sync = !(result instanceof Promise);
  return { check: await result, reads, sync };
}

describe('checkLive: may a write decided from the cache go on?', () => {
  const cases: {
    name: string;
    run: Parameters<typeof judged>[0];
    action: LiveCheck<Obj>['action'];
    basis?: string;
    reads: number;
  }[] = [
    {
      name: 'a kind the policy does not call destructive goes on from the cache, without a read',
      run: { guard: guard(), kind: 'Release', lagMs: 60_000 },
      action: 'proceed',
      basis: 'cache',
      reads: 0,
    },
    {
      name: 'a destructive kind within the lag bound goes on from the cache',
      run: { guard: guard(), lagMs: 100 },
      action: 'proceed',
      basis: 'cache',
      reads: 0,
    },
    {
      name: 'beyond the lag bound, a live read that finds the object as decided on lets it go on',
      run: { guard: guard(), lagMs: 5000, live: obj('u1', '10') },
      action: 'proceed',
      basis: 'live',
      reads: 1,
    },
    {
      name: 'a live read that finds a newer resourceVersion says it moved',
      run: { guard: guard(), lagMs: 5000, live: obj('u1', '11') },
      action: 'moved',
      reads: 1,
    },
    {
      name: 'a live read that finds another uid under the name says it is gone',
      run: { guard: guard(), lagMs: 5000, live: obj('u2', '10') },
      action: 'gone',
      reads: 1,
    },
    {
      name: 'a live read that finds nothing says it is gone',
      run: { guard: guard(), lagMs: 5000, live: undefined },
      action: 'gone',
      reads: 1,
    },
    {
      name: 'a guard that has not synced since start holds',
      run: { guard: guard(false), lagMs: 100 },
      action: 'hold',
      reads: 0,
    },
    {
      name: 'a live read asked for but impossible (no reader) goes on unchecked',
      run: { guard: guard(), lagMs: 5000, canRead: false },
      action: 'proceed',
      basis: 'unchecked',
      reads: 0,
    },
    {
      name: 'without a guard, the caller’s unguarded answer decides: here a live read',
      run: { unguarded: { action: 'liveRead', reason: 'no guard' }, live: obj('u1', '10') },
      action: 'proceed',
      basis: 'live',
      reads: 1,
    },
    {
      name: 'without a guard or an unguarded answer it goes on unchecked',
      run: {},
      action: 'proceed',
      basis: 'unchecked',
      reads: 0,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const { check, reads, sync } = await judged(c.run);
      assert.equal(check.action, c.action);
      if (c.basis) assert.equal(check.action === 'proceed' && check.basis, c.basis);
      assert.equal(reads, c.reads);
      assert.equal(sync, reads === 0, 'synchronous exactly when no live read is taken');
    });
  }
  it('a failed live read rejects, for the caller to say what it means', async () => {
    await assert.rejects(
      Promise.resolve(
        checkLive<Obj>({
          guard: guard(),
          key: 'ns/p',
          kind: 'Cancel',
          cacheLagMs: 5000,
          decided,
          readLive: () => Promise.reject(new Error('503')),
        }),
      ),
      /503/,
    );
  });
});
