/**
 * What `tollgate explain --audit` reads of a pod's trail: its last decisions, and when its
 * release was decided with its whole gang (the memory tollgate run keeps for a gang's
 * straggler), even when that Release lies behind more decisions than are shown. A real
 * bare repository on disk, written through the real writer.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { podTrail } from '../../../src/cli/explain.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { localClone } from '../../support/audit-clone.ts';

const gangMet = { present: 3, expected: 3 };

async function trailOf(
  decisions: (at: number) => ReturnType<ReturnType<typeof aDecision>['obj']>[],
) {
  const { dir, clock, store } = await localClone();
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'c0',
    batch: { maxDecisions: 100, maxDelayMs: 10 },
    clock,
  });
  writer.seedOpenIntents([]);
  for (const decision of decisions(clock.now())) {
    if (decision.outcome.result === 'pending') await writer.recordIntents([decision]);
    else writer.record([decision]);
    await writer.flush();
    clock.advance(1000);
  }
  return { dir, at: clock.now() };
}

describe('explain --audit reads the pod trail', () => {
  it('a straggler whose release was decided with its whole gang, behind six newer Holds: the five newest shown, the gang remembered', async () => {
    let releasedAt = 0;
    const { dir } = await trailOf((at) => {
      releasedAt = at;
      const release = aDecision('Release', 'm2')
        .at(at)
        .input('GangComplete', true, gangMet)
        .input('Budget', true, {})
        .obj();
      const holds = Array.from({ length: 6 }, (_, i) =>
        aDecision('Hold', 'm2')
          .id(`gate-release:Hold:uid-team-a-m2:${i + 2}`)
          .at(at + (i + 2) * 1000)
          .input('GangComplete', false, { present: 1, expected: 3 })
          .obj(),
      );
      return [release, outcomeOf(release, { result: 'conflict', message: 'moved' }), ...holds];
    });
    const trail = await podTrail(dir, 'tollgate/audit', 'uid-team-a-m2', 500, { gated: true });
    assert.equal(trail.decisions.length, 5);
    assert.deepEqual(
      trail.decisions.map((d) => d.kind),
      ['Hold', 'Hold', 'Hold', 'Hold', 'Hold'],
    );
    assert.deepEqual(trail.gangReleases, { 'uid-team-a-m2': releasedAt });
  });

  it("a pod released alone (no gang) or another pod's gang release: nothing remembered", async () => {
    const { dir } = await trailOf((at) => [
      aDecision('Release', 'solo').at(at).input('Budget', true, {}).obj(),
      aDecision('Release', 'other').at(at).input('GangComplete', true, gangMet).obj(),
    ]);
    const trail = await podTrail(dir, 'tollgate/audit', 'uid-team-a-solo', 500, { gated: true });
    assert.deepEqual(trail.gangReleases, {});
    assert.deepEqual(
      trail.decisions.map((d) => `${d.kind} ${d.phase}`),
      ['Release intent'],
    );
  });
});
