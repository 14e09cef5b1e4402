// The gate-release loop's steps that are plain functions: the guard step, the records
// that need no write, the intent parts and the stale-guard kind of a write.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Decision } from '../../../src/decide/decision.ts';
import type { PlannedWrite } from '../../../src/decide/release-plan.ts';
import {
  guardKindOf,
  guardWrites,
  intentParts,
  recordsWithoutWrites,
} from '../../../src/loops/gate-release.ts';
import { aPod } from '../../builders/pod.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);

function decided(name: string, kind: Decision['kind'] = 'Release', rv = '5'): Decision {
  return {
    id: `gate-release:${kind}:uid-${name}:${rv}:${now}`,
    at: now,
    loop: 'gate-release',
    kind,
    tenant: 'team-a',
    target: { namespace: 'team-a', name, uid: `uid-${name}`, resourceVersion: rv },
    policy: { commit: 'c', file: 'gates/ready.yaml', name: 'ready' },
    inputs: [],
    reason: 'conditions met',
    outcome: kind === 'Hold' || kind === 'Expire' ? { result: 'recorded' } : { result: 'pending' },
  };
}
function writeOf(decision: Decision, op: PlannedWrite['op'], expiryForced = false): PlannedWrite {
  return {
    key: `team-a/${decision.target.name}`,
    target: decision.target,
    op,
    priority: 0,
    tenant: 'team-a',
    decisionId: decision.id,
    expiryForced,
  };
}
const removeGate: PlannedWrite['op'] = {
  type: 'removeGate',
  gate: 'g',
  gateIndex: 0,
  markReleased: { annotationsPresent: false },
};
const view = { pod: (_ns: string, name: string) => aPod(name, 'team-a').obj() };
/** The guard step's context: this stale-guard, no conflicts. */
const guardedBy = (staleGuard: Parameters<typeof guardWrites>[1]['staleGuard']) => ({
  view,
  staleGuard,
  conflicted: new Map(),
  now,
  conflictWaitMs: 1000,
});
/** A gate removal of the gang `team-a/g-0`. */
const inGang = (d: Decision): PlannedWrite => ({ ...writeOf(d, removeGate), unit: 'team-a/g-0' });

describe('gate-release steps', () => {
  it('guard: a write whose pod the view has not caught up on is skipped with a SkipStale record', () => {
    const a = decided('a');
    const b = decided('b');
    const guarded = guardWrites(
      { decisions: [a, b], writes: [writeOf(a, removeGate), writeOf(b, removeGate)] },
      guardedBy({ isFresh: (key) => key !== 'team-a/a' }),
    );
    assert.deepEqual(
      guarded.toSend.map((s) => s.write.key),
      ['team-a/b'],
    );
    assert.deepEqual([...guarded.skipped.keys()], ['team-a/a']);
    assert.equal(guarded.skips[0]?.record.kind, 'SkipStale');
    assert.equal(
      guarded.skips[0]?.record.reason,
      "Release skipped: the view has not yet seen tollgate's last write to this pod",
    );
  });
  it('guard: a gang is sent whole or held whole: one member the view is behind on holds the others (soak seed 32: a gang released in part for 23 s)', () => {
    const [g0, g1, g2, solo] = ['g-0', 'g-1', 'g-2', 'solo'].map((name) => decided(name));
    const guarded = guardWrites(
      {
        decisions: [g0!, g1!, g2!, solo!],
        writes: [inGang(g0!), inGang(g1!), inGang(g2!), writeOf(solo!, removeGate)],
      },
      guardedBy({ isFresh: (key) => key !== 'team-a/g-1' }),
    );
    assert.deepEqual(
      guarded.toSend.map((s) => s.write.key),
      ['team-a/solo'],
    );
    assert.deepEqual([...guarded.skipped.keys()].sort(), [
      'team-a/g-0',
      'team-a/g-1',
      'team-a/g-2',
    ]);
    assert.match(guarded.skipped.get('team-a/g-0')!, /member of its gang/);
    assert.deepEqual(guarded.held.map((w) => w.key).sort(), [
      'team-a/g-0',
      'team-a/g-1',
      'team-a/g-2',
    ]);
  });
  it('guard: a gang member sent to be decided on a live read takes its gang with it to live reads', () => {
    const [g0, g1] = ['g-0', 'g-1'].map((name) => decided(name));
    const guarded = guardWrites(
      { decisions: [g0!, g1!], writes: [inGang(g0!), inGang(g1!)] },
      guardedBy({
        isFresh: () => true,
        check: (key) =>
          key === 'team-a/g-1'
            ? {
                fresh: false,
                reason: 'behind',
                detail: '',
                retryAfterMs: 10,
                waiting: false,
                decideLive: true,
              }
            : { fresh: true },
      }),
    );
    assert.deepEqual(
      guarded.toSend.map((s) => [s.write.key, s.decideLive === true]),
      [
        ['team-a/g-0', true],
        ['team-a/g-1', true],
      ],
    );
  });
  it('guard: a pod still at a conflicted resourceVersion waits, for at most the wait; once past it, the conflict is done', () => {
    const a = decided('a', 'Release', '5');
    const plan = { decisions: [a], writes: [writeOf(a, removeGate)] };
    const context = (at: number, rv: string) => ({
      view,
      staleGuard: undefined,
      conflicted: new Map([['team-a/a', { resourceVersion: rv, at }]]),
      now,
      conflictWaitMs: 1000,
    });
    assert.equal(guardWrites(plan, context(now - 10, '5')).toSend.length, 0);
    assert.equal(guardWrites(plan, context(now - 5000, '5')).toSend.length, 1);
    assert.deepEqual(guardWrites(plan, context(now - 10, '4')).conflictsPassed, ['team-a/a']);
  });
  it('records without writes: recorded decisions not being written, then the skips', () => {
    const hold = decided('h', 'Hold');
    const release = decided('r');
    const skipped = { ...decided('s'), kind: 'SkipStale' as const };
    const records = recordsWithoutWrites(
      { decisions: [hold, release] },
      {
        toSend: [{ decision: release, write: writeOf(release, removeGate), pod: undefined }],
        skips: [{ write: writeOf(release, removeGate), record: skipped }],
      },
    );
    assert.deepEqual(
      records.map((d) => d.kind),
      ['Hold', 'SkipStale'],
    );
  });
  it('intent parts: the intent batch alone, then each part twice the one before; a small pass is one part', () => {
    assert.deepEqual(intentParts([1, 2, 3, 4, 5, 6, 7, 8], 1), [[1], [2, 3], [4, 5, 6, 7], [8]]);
    assert.deepEqual(intentParts([1, 2, 3, 4, 5], 2), [
      [1, 2],
      [3, 4, 5],
    ]);
    assert.deepEqual(intentParts([1, 2], 2), [[1, 2]]);
    assert.deepEqual(intentParts([], 2), [[]]);
  });
  it('the stale-guard kind comes from the write: an expiry-forced gate removal is ExpireRelease', () => {
    const d = decided('a');
    assert.equal(guardKindOf(writeOf(d, removeGate, true)), 'ExpireRelease');
    assert.equal(guardKindOf(writeOf(d, removeGate, false)), 'Release');
    assert.equal(guardKindOf(writeOf(d, { type: 'delete', reason: 'r' })), 'Cancel');
    assert.equal(guardKindOf(writeOf(d, { type: 'annotate', annotations: {} })), undefined);
  });
});
