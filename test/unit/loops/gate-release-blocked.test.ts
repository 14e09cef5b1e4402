/**
 * A restart carries a Blocked write over from the audit trail as the real writer commits
 * it: records and outcomes are separate batches, each committed when its own oldest entry
 * is due, so the failed outcome of the last attempt can reach the branch in a later commit
 * than the Blocked record (a records batch that already held another pod's Hold falls due
 * first). A real bare repository on disk, written through the real writer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { GitAuditWriter, type Timers } from '../../../src/audit/writer.ts';
import type { ManualClock } from '../../../src/lib/clock.ts';
import { recoverBlockedWrites } from '../../../src/loops/gate-release-blocked.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { localClone } from '../../support/audit-clone.ts';

/** Timers on the manual clock: `advance` fires what fell due, then lets the commits finish. */
function manualTimers(clock: ManualClock): Timers & { advance(ms: number): Promise<void> } {
  let pending: { at: number; run: () => void; id: number }[] = [];
  let next = 0;
  return {
    set(run, ms) {
      next += 1;
      pending.push({ at: clock.now() + ms, run, id: next });
      return next;
    },
    clear(handle) {
      pending = pending.filter((timer) => timer.id !== handle);
    },
    async advance(ms) {
      clock.advance(ms);
      const due = pending.filter((timer) => timer.at <= clock.now());
      pending = pending.filter((timer) => timer.at > clock.now());
      for (const timer of due) timer.run();
      for (let turn = 0; turn < 200; turn += 1) await new Promise((r) => setImmediate(r));
    },
  };
}

test('a Blocked record committed before the outcome of the last attempt still blocks after a restart', async () => {
  const { dir, clock, store } = await localClone();
  const timers = manualTimers(clock);
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'c0',
    batch: { maxDecisions: 100, maxDelayMs: 1_000 },
    clock,
    timers,
  });
  writer.seedOpenIntents([]);
  const cancel = aDecision('Cancel', 'doomed').at(clock.now()).obj();
  await writer.recordIntents([cancel]);
  // Another pod's Hold opens the records batch; the last attempt fails 600 ms later.
  writer.record([aDecision('Hold', 'other').at(clock.now()).obj()]);
  await timers.advance(600);
  writer.record([
    outcomeOf(cancel, { result: 'failed', code: 403, message: 'forbidden' }),
    { ...cancel, kind: 'Blocked', at: clock.now(), outcome: { result: 'recorded' } },
  ]);
  await timers.advance(400);
  await timers.advance(600);
  await writer.flush();

  const source = await openAuditSource(dir, 'tollgate/audit');
  try {
    const kindsNewestFirst = (await readAuditHistory(source))
      .reverse()
      .flatMap((commit) => commit.records.filter((r) => r.target.name === 'doomed'))
      .map((r) => `${r.kind} ${r.phase}`);
    assert.deepEqual(
      kindsNewestFirst,
      ['Cancel outcome', 'Blocked record', 'Cancel intent'],
      'the trail as the writer committed it',
    );
    const blocked = await recoverBlockedWrites(source, 'prod', silentLogger);
    assert.deepEqual(Object.keys(blocked), [cancel.target.uid]);
  } finally {
    source.close();
  }
});
