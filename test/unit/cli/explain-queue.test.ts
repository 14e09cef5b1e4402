import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatDecisions, runExplain } from '../../../src/cli/explain.ts';
import { runQueue } from '../../../src/cli/queue.ts';

function capture() {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    io: {
      stdout: (text: string) => void (out.stdout += text),
      stderr: (text: string) => void (out.stderr += text),
      now: () => Date.UTC(2026, 10, 29, 8, 0, 0),
    },
  };
}

describe('tollgate explain and queue refuse bad usage before touching the cluster', () => {
  const cases: [string, () => Promise<number>, RegExp, ReturnType<typeof capture>][] = (() => {
    const a = capture();
    const b = capture();
    const c = capture();
    const d = capture();
    return [
      [
        'explain without namespace/pod',
        () => runExplain('just-a-name', { policyDir: '.', output: 'text' }, a.io),
        /expected <namespace>\/<pod>, got "just-a-name"/,
        a,
      ],
      [
        'explain with an unknown output format',
        () => runExplain('ns/p', { policyDir: '.', output: 'xml' }, b.io),
        /-o must be text, json or yaml, got "xml"/,
        b,
      ],
      [
        'queue with a limit that is not a number',
        () => runQueue({ policyDir: '.', output: 'text', limit: 'ten' }, c.io),
        /--limit must be a whole number, got "ten"/,
        c,
      ],
      [
        'queue with a zero limit',
        () => runQueue({ policyDir: '.', output: 'text', limit: '0' }, d.io),
        /--limit must be at least 1/,
        d,
      ],
    ];
  })();
  for (const [name, run, message, { out }] of cases) {
    it(`${name}: exit 2 with the reason`, async () => {
      assert.equal(await run(), 2);
      assert.match(out.stderr, message);
      assert.equal(out.stdout, '');
    });
  }
});

describe('the last decisions, as explain prints them', () => {
  it('lists them newest first, with since when the pod is held for its reason, or says none were recorded', () => {
    assert.equal(
      formatDecisions([
        {
          at: '2026-11-29T07:59:00.000Z',
          kind: 'Hold',
          phase: 'decided',
          reason: 'waiting for Budget',
          outcome: 'recorded',
        },
      ]),
      'Decisions:  (newest first, from the audit branch)\n  2026-11-29T07:59:00.000Z Hold (decided, recorded): waiting for Budget\nHeld:       for this reason since 2026-11-29T07:59:00.000Z (the newest Hold decision)\n',
    );
    assert.equal(
      formatDecisions([]),
      'Decisions:  (newest first, from the audit branch)\n  (none recorded in the commits read)\n',
    );
  });
});
