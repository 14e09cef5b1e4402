/**
 * Pause on more than OOM and SLO: a workload whose containers keep restarting after
 * tollgate resized it, a tollgate resize the kubelet never carries out, and signals that
 * stay unreadable each pause automation for the workload (recorded with its cause,
 * resumable by an Approval), instead of resizing on, waiting forever or holding forever.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PodMemo, PodResizeInput } from '../../../src/decide/resize-plan.ts';
import { pausedAnnotation } from '../../../src/decide/resize-state.ts';
import { sealedValue, steady } from '../../builders/resize.ts';
import { aResizedPod, decideCase, minute, now, unreadable } from '../../builders/resize-pause.ts';

const high = [{ signal: 'queue', samples: steady(500, now) }];
const low = [{ signal: 'queue', samples: steady(1, now) }];

/** A pod tollgate stepped to 750m at `requestedAt` (30 minutes ago unless given). */
const resized = (options: { restarts?: number; requestedAt?: number; actualCpu?: string }) =>
  aResizedPod({ ...options, requestedAt: options.requestedAt ?? now - 30 * minute });

test('a workload pauses on excessive restarts, a stuck resize, and signals unreadable for long', () => {
  const cases: {
    name: string;
    input: Pick<PodResizeInput, 'pod'> & Partial<PodResizeInput>;
    kinds: string[];
    cause?: string;
    memo?: (m: PodMemo | undefined) => boolean;
  }[] = [
    {
      name: 'five restarts since tollgate resized it pause the workload',
      input: { pod: resized({ restarts: 5 }), readings: high },
      kinds: ['Pause'],
      cause: 'restarts',
    },
    {
      name: 'four restarts: decided as usual',
      input: { pod: resized({ restarts: 4 }), readings: high },
      kinds: ['Resize'],
    },
    {
      name: 'a tollgate resize not carried out 31 minutes after the request pauses',
      input: { pod: resized({ actualCpu: '500m', requestedAt: now - 31 * minute }) },
      kinds: ['Pause'],
      cause: 'stuck',
    },
    {
      name: 'a tollgate resize not carried out after 29 minutes is waited for',
      input: { pod: resized({ actualCpu: '500m', requestedAt: now - 29 * minute }) },
      kinds: [],
    },
    {
      name: 'a signal unreadable for longer than onUnreadableFor pauses',
      input: {
        pod: resized({}),
        readings: unreadable,
        memo: { unreadableSince: now - 121 * minute },
      },
      kinds: ['Pause'],
      cause: 'unreadable',
    },
    {
      name: 'a signal unreadable for a while only holds; the loop remembers since when and stores it on the pod',
      input: {
        pod: resized({ requestedAt: now - 300 * minute }),
        readings: [{ signal: 'queue', error: 'HTTP 503' }, ...low.slice(1)],
        memo: { unreadableSince: now - 60 * minute },
      },
      kinds: ['Hold'],
      memo: (m) => m?.unreadableSince === now - 60 * minute,
    },
    {
      name: 'a signal that becomes unreadable starts the clock (stored on the pod: a Hold with a write)',
      input: { pod: resized({ requestedAt: now - 300 * minute }), readings: unreadable },
      kinds: ['Hold'],
      memo: (m) => m?.unreadableSince === now,
    },
    {
      name: 'readable again: the clock is forgotten',
      input: {
        pod: resized({ requestedAt: now - 300 * minute }),
        readings: high,
        memo: { unreadableSince: now - 60 * minute },
      },
      kinds: ['Resize'],
      memo: (m) => m?.unreadableSince === undefined,
    },
  ];
  for (const c of cases) {
    const p = decideCase(c);
    if (c.memo) assert.ok(c.memo(p.memo), `${c.name}: memo ${JSON.stringify(p.memo)}`);
    if (!c.cause) continue;
    assert.equal(p.paused, true, c.name);
    const pause = p.decisions[0];
    assert.deepEqual(
      pause?.inputs.find((i) => i.condition === 'pause')?.value,
      { cause: c.cause },
      `${c.name}: the cause is an input`,
    );
    const write = p.writes.find((w) => w.op.type === 'annotate');
    const stored =
      write?.op.type === 'annotate'
        ? sealedValue('uid-web-0', pausedAnnotation, write.op.annotations[pausedAnnotation])
        : undefined;
    assert.equal(stored?.cause, c.cause, `${c.name}: the pause is stored with its cause`);
    assert.equal(
      p.writes.filter((w) => w.op.type === 'resize').length,
      0,
      `${c.name}: a pause resizes nothing`,
    );
  }
});
