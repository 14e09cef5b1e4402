/**
 * The saved last good policy (src/policy/last-good.ts): what is written is read back as
 * written, and anything else is refused with its reason, never used: another location,
 * an edited file, a changed commit id or merge time, a truncated or foreign file.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeSavedPolicy,
  encodeSavedPolicy,
  type SavedPolicy,
} from '../../../src/policy/last-good.ts';

const location = 'https://git.example/policy.git@main';
const saved: SavedPolicy = {
  location,
  commit: 'a'.repeat(40),
  files: [
    { path: 'tollgate.yaml', content: 'kind: Settings\n' },
    { path: 'approvals/x.yaml', content: 'kind: Approval\n' },
  ],
  approvalsMergedAt: { 'approvals/x.yaml': 1_700_000_000_000 },
};
const text = encodeSavedPolicy(saved);
const edited = (change: (raw: Record<string, unknown>) => void): string => {
  const raw = JSON.parse(text) as Record<string, unknown>;
  change(raw);
  return JSON.stringify(raw);
};

describe('the saved last good policy', () => {
  it('reads back exactly what was saved', () => {
    assert.deepEqual(decodeSavedPolicy(text, location), saved);
  });

  const refused: [string, string, string, RegExp][] = [
    [
      'saved from another location',
      text,
      'https://other.example/p.git@main',
      /saved from https:\/\/git\.example/,
    ],
    [
      'a policy file edited',
      edited((r) => ((r.files as { content: string }[])[0]!.content = 'kind: Tenant\n')),
      location,
      /digest does not match .*commit aaaaaaaaaaaa/,
    ],
    [
      'a file added',
      edited((r) => (r.files as object[]).push({ path: 'x.yaml', content: '' })),
      location,
      /digest does not match/,
    ],
    [
      'the commit id changed',
      edited((r) => (r.commit = 'b'.repeat(40))),
      location,
      /digest does not match/,
    ],
    [
      'a merge time moved',
      edited((r) => (r.approvalsMergedAt = { 'approvals/x.yaml': 1 })),
      location,
      /digest does not match/,
    ],
    [
      'the location rewritten with its digest kept',
      edited((r) => (r.location = 'https://evil.example/p.git@main')),
      'https://evil.example/p.git@main',
      /digest does not match/,
    ],
    ['truncated', text.slice(0, text.length / 2), location, /not JSON/],
    ['another format', edited((r) => (r.format = 'v0')), location, /format v0/],
    ['a field of the wrong type', edited((r) => (r.files = 'x')), location, /wrong type/],
    ['not an object', '42', location, /not a saved policy/],
  ];
  for (const [what, input, at, problem] of refused) {
    it(`refuses one ${what}, saying why`, () => {
      const result = decodeSavedPolicy(input, at);
      assert.ok('problem' in result, 'refused');
      assert.match(result.problem, problem);
    });
  }
});
