import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  countByKind,
  extraFaultKinds,
  faultKinds,
  faultSchedule,
  kindSpecs,
  type Fault,
} from '../../soak/schedule.ts';

const groupOf = (fault: Fault): string => kindSpecs[fault.kind].group;

describe('the soak fault schedule', () => {
  it('is the same for the same seed and differs for another seed', () => {
    assert.deepEqual(faultSchedule(7, 30), faultSchedule(7, 30));
    assert.notDeepEqual(faultSchedule(7, 30), faultSchedule(8, 30));
  });

  for (const { seed, minutes, everyKind } of [
    { seed: 1, minutes: 3, everyKind: false },
    { seed: 1, minutes: 30, everyKind: true },
    { seed: 2, minutes: 30, everyKind: true },
    { seed: 3, minutes: 30, everyKind: true },
  ])
    it(`seed ${seed}, ${minutes} min: no fault in the warm-up, each ends before the chaos ends${everyKind ? ', every kind injected' : ''}`, () => {
      const faults = faultSchedule(seed, minutes);
      assert.ok(faults.length > 0);
      for (const f of faults) {
        assert.ok(f.atMs >= 20_000, `${f.kind} at ${f.atMs}`);
        assert.ok(f.atMs + f.holdMs <= minutes * 60_000, `${f.kind} ends after the chaos`);
      }
      if (everyKind)
        assert.deepEqual(
          faultKinds.filter((kind) => countByKind(faults)[kind] === 0),
          [],
        );
    });

  it('never overlaps two faults of one group, and node failure happens at most once', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const faults = faultSchedule(seed, 30);
      for (const [i, a] of faults.entries())
        for (const b of faults.slice(i + 1))
          if (groupOf(a) === groupOf(b))
            assert.ok(b.atMs >= a.atMs + a.holdMs, `seed ${seed}: ${a.kind} overlaps ${b.kind}`);
      assert.ok(countByKind(faults)['node-failure'] <= 1);
    }
  });

  it('the 3-minute CI variant (seed 1, .ci/run) injects at least twelve kinds', () => {
    const counts = countByKind(faultSchedule(1, 3));
    assert.ok(faultKinds.filter((kind) => counts[kind] > 0).length >= 12, JSON.stringify(counts));
  });

  it('leaves the last 8 minutes of a 30-minute run without restarts, so the replicas then running live long enough to judge their memory', () => {
    for (const seed of [5, 6, 7, 8]) {
      const faults = faultSchedule(seed, 30);
      const restarts = faults.filter((f) => kindSpecs[f.kind].restarts);
      assert.ok(restarts.length >= 20, `seed ${seed}: ${restarts.length} restarts`);
      const last = Math.max(...restarts.map((f) => f.atMs + f.holdMs));
      assert.ok(last <= 22 * 60_000, `seed ${seed}: a restart ends at ${last} ms`);
      const pauses = faults.filter((f) => f.kind === 'replica-sigstop' && f.atMs >= 22 * 60_000);
      assert.ok(pauses.length > 0, `seed ${seed}: no pause in the last 8 minutes`);
    }
  });

  it('the 3-minute CI variant keeps its restarts (runs under 10 minutes have no quiet stretch)', () => {
    const restarts = faultSchedule(1, 3).filter((f) => kindSpecs[f.kind].restarts);
    assert.ok(restarts.length >= 2, `${restarts.length} restarts`);
  });

  it('--all-faults adds API server throttling to the kinds drawn; the default schedule never has it', () => {
    const kinds = [...faultKinds, ...extraFaultKinds];
    assert.ok(countByKind(faultSchedule(1, 30, { kinds }))['api-throttled'] > 0);
    assert.equal(countByKind(faultSchedule(1, 30))['api-throttled'], 0);
  });
});
