/**
 * Since when a pod's signals have been unreadable decides when it pauses
 * (`pause.onUnreadableFor`), so that time survives a restart of tollgate: it is stored
 * on the pod, sealed, in `tollgate.io/resize-state` (once when the clock starts, once
 * when it stops), and a tollgate with no memory of the pod counts from it. The clock
 * starting warns the pod's owner (a Warning Event); its stopping is a recovery, recorded
 * in Git and told with a Normal Event, never a Warning that the pod is held.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PodMemo, PodResizeInput, PodResizePlan } from '../../../src/decide/resize-plan.ts';
import { stateAnnotation } from '../../../src/decide/resize-state.ts';
import { resizeEventOf } from '../../../src/decide/resize-events.ts';
import { decideResizeFor, sealedValue, steady } from '../../builders/resize.ts';
import {
  aResizedPod,
  decideCase,
  minute,
  now,
  pausePolicy,
  unreadable,
} from '../../builders/resize-pause.ts';

const quiet = [{ signal: 'queue', samples: steady(50, now) }];

/** A pod tollgate resized long ago, with `unreadableSince` stored when given. */
const aPod = (unreadableSince?: number) =>
  aResizedPod({ requestedAt: now - 300 * minute, unreadableSince });

/** The `unreadableSince` the plan stores on the pod: a number, null (cleared), or undefined (no write). */
function storedSince(plan: PodResizePlan): number | null | undefined {
  const write = plan.writes.find(
    (w) => w.op.type === 'annotate' && w.op.annotations[stateAnnotation] !== undefined,
  );
  if (write?.op.type !== 'annotate') return undefined;
  const state = sealedValue('uid-web-0', stateAnnotation, write.op.annotations[stateAnnotation]);
  return (state?.unreadableSince as number | undefined) ?? null;
}

test('since when signals are unreadable is stored on the pod and counted from after a restart', () => {
  const cases: {
    name: string;
    input: Pick<PodResizeInput, 'pod'> & Partial<PodResizeInput>;
    kinds: string[];
    stores: number | null | undefined;
    memoSince?: number;
    pausedSince?: number;
  }[] = [
    {
      name: 'the first pass that finds a signal unreadable stores the time on the pod, recorded as a Hold',
      input: { pod: aPod(), readings: unreadable },
      kinds: ['Hold'],
      stores: now,
      memoSince: now,
    },
    {
      name: 'a restarted tollgate (no memory of the pod) counts from the stored time and pauses past onUnreadableFor',
      input: { pod: aPod(now - 121 * minute), readings: unreadable },
      kinds: ['Pause'],
      stores: undefined,
      pausedSince: now - 121 * minute,
    },
    {
      name: 'a restarted tollgate before onUnreadableFor keeps the stored time and writes nothing',
      input: { pod: aPod(now - 60 * minute), readings: unreadable },
      kinds: [],
      stores: undefined,
      memoSince: now - 60 * minute,
    },
    {
      name: "the earlier of the stored time and the loop's memory counts",
      input: {
        pod: aPod(now - 60 * minute),
        readings: unreadable,
        memo: { unreadableSince: now - 10 * minute },
      },
      kinds: [],
      stores: undefined,
      memoSince: now - 60 * minute,
    },
    {
      name: 'readable again: the stored time is cleared, recorded',
      input: { pod: aPod(now - 60 * minute), readings: quiet },
      kinds: ['Hold'],
      stores: null,
    },
    {
      name: 'readable and nothing stored: nothing written',
      input: { pod: aPod(), readings: quiet },
      kinds: [],
      stores: undefined,
    },
    {
      name: 'written on this resourceVersion and not yet seen in the view: not written twice',
      input: {
        pod: aPod(),
        readings: unreadable,
        memo: { unreadableSince: now - minute, clockWrite: { since: now - minute, on: '100' } },
      },
      kinds: [],
      stores: undefined,
      memoSince: now - minute,
    },
    {
      name: 'written, but the pod moved on without it (a conflict, another writer): written again',
      input: {
        pod: aPod(),
        readings: unreadable,
        memo: { unreadableSince: now - minute, clockWrite: { since: now - minute, on: '99' } },
      },
      kinds: ['Hold'],
      stores: now - minute,
      memoSince: now - minute,
    },
    {
      name: 'an observe-only policy writes nothing; the loop remembers',
      input: { pod: aPod(), readings: unreadable, policy: { ...pausePolicy, mode: 'Observe' } },
      kinds: [],
      stores: undefined,
      memoSince: now,
    },
    {
      name: 'tollgate plan (preview, no key) plans no clock write',
      input: { pod: aPod(), readings: unreadable, stateKeys: 'preview' },
      kinds: [],
      stores: undefined,
      memoSince: now,
    },
  ];
  for (const c of cases) {
    const p = decideCase(c);
    assert.equal(storedSince(p), c.stores, `${c.name}: what is stored`);
    const memo: PodMemo | undefined = p.memo;
    assert.equal(memo?.unreadableSince, c.memoSince, `${c.name}: memo ${JSON.stringify(memo)}`);
    if (c.pausedSince !== undefined) {
      const input = p.decisions[0]?.inputs.find((i) => i.condition === 'unreadable');
      assert.equal((input?.value as { since: number }).since, c.pausedSince, c.name);
    }
    for (const d of p.decisions.filter((x) => x.kind === 'Hold'))
      assert.equal(d.outcome.result, 'pending', `${c.name}: the clock write is an intent`);
  }
});

test('signals readable again raise a Normal Event; the clock starting and a pause still warn', () => {
  const cases: {
    name: string;
    input: Pick<PodResizeInput, 'pod'> & Partial<PodResizeInput>;
    events: string[];
  }[] = [
    {
      name: 'a signal becomes unreadable: the clock starts, a Warning that the pod is held',
      input: { pod: aPod(), readings: unreadable },
      events: ['Hold Warning/TollgateResizeHeld'],
    },
    {
      name: 'the signal reads again: the clock stops, recorded, with a Normal Event',
      input: { pod: aPod(now - 60 * minute), readings: quiet },
      events: ['Hold Normal/TollgateResizeSignalsReadable'],
    },
    {
      name: 'unreadable past pause.onUnreadableFor: a Warning that the workload paused',
      input: { pod: aPod(now - 121 * minute), readings: unreadable },
      events: ['Pause Warning/TollgateResizePaused'],
    },
  ];
  for (const c of cases) {
    const plan = decideResizeFor(now, { policy: pausePolicy, ...c.input });
    const events = plan.decisions.map((d) => {
      const e = resizeEventOf(d);
      return `${d.kind} ${e ? `${e.type}/${e.reason}` : 'none'}`;
    });
    assert.deepEqual(events, c.events, c.name);
  }
});
