/**
 * `audit verify` in bounded memory (issue 20): what the verifier keeps per record met
 * must be a fixed small number of bytes, whatever the history's length. Measured on the
 * heap (JS objects and typed-array backing stores) after a forced collection, with the
 * records fed and dropped one commit at a time, as `walkAuditHistory` does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { AuditCommit } from '../../../src/audit/reader.ts';
import { phaseOf, recordSchemaVersion } from '../../../src/audit/record.ts';
import { SpillingDigestSet, type DigestStore } from '../../../src/audit/digest-set.ts';
import { DigestSet, TrailVerifier, digest128 } from '../../../src/audit/verify.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function retained(): number {
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

/** Commit `index` of a synthetic trail, oldest first: `perCommit` decisions each. */
function syntheticCommit(index: number, decisions: Decision[], parent?: string): AuditCommit {
  const oid = index.toString(16).padStart(40, '0');
  const path = `audit/prod/2026/11/29/T07/${index}.jsonl`;
  return {
    oid,
    parents: parent === undefined ? [] : [parent],
    message: 'm\n',
    summary: 'm',
    trailers: new Map(),
    author: { name: 'a', email: 'a@b', timestamp: 0 },
    committedAt: 0,
    changes: [{ path, change: 'added', oid: 'b'.repeat(40) }],
    records: decisions.map((decision, line) => ({
      ...decision,
      v: recordSchemaVersion,
      phase: phaseOf(decision),
      file: path,
      line: line + 1,
    })),
    errors: [],
  };
}

/**
 * A trail of `pairs` intents with their outcomes and `pairs` records without a write,
 * fed newest first: commit 3k holds 10 intents, 3k+1 their outcomes, 3k+2 ten Holds.
 */
function feed(verifier: TrailVerifier, pairs: number): void {
  const perCommit = 10;
  const groups = pairs / perCommit;
  const oid = (index: number) => index.toString(16).padStart(40, '0');
  for (let group = groups - 1; group >= 0; group -= 1) {
    const names = Array.from({ length: perCommit }, (_, i) => `p${group * perCommit + i}`);
    const intents = names.map((name) => aDecision('Release', name).obj());
    const holds = names.map((name) => aDecision('Hold', name).obj());
    const base = group * 3;
    verifier.add(syntheticCommit(base + 2, holds, oid(base + 1)));
    verifier.add(
      syntheticCommit(
        base + 1,
        intents.map((item) => outcomeOf(item)),
        oid(base),
      ),
    );
    verifier.add(syntheticCommit(base, intents, base === 0 ? undefined : oid(base - 1)));
  }
}

test('verify keeps a fixed small number of bytes per record met (150,000 intents, outcomes and records)', () => {
  const pairs = 50_000;
  const before = retained();
  const verifier = new TrailVerifier({ now: 0 });
  feed(verifier, pairs);
  const after = retained();
  const records = pairs * 3;
  const perRecord = (after - before) / records;
  const report = verifier.finish();
  assert.equal(report.problemCount, 0, JSON.stringify(report.problems.slice(0, 3)));
  assert.equal(report.records, records);
  // 128-bit digests in open-addressing tables: at most 16 B / 0.375 load per intent or
  // record line, none per outcome: at most 29 B per record met here. Strings in Sets,
  // as before, cost about 105.
  assert.ok(perRecord <= 40, `${perRecord.toFixed(1)} bytes retained per record`);
});

test('with a spill folder, verify holds a fixed table and 1 to 2 bytes per further digest, not 21 to 43: 150,000 records met in under 1 MB', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-verify-spill-'));
  try {
    const before = retained();
    const verifier = new TrailVerifier({ now: 0, spill: { dir, digestsInMemory: 4_096 } });
    feed(verifier, 50_000);
    const held = retained() - before;
    const report = verifier.finish();
    assert.equal(report.problemCount, 0, JSON.stringify(report.problems.slice(0, 3)));
    assert.equal(report.records, 150_000);
    // Two tables of at most 8,192 slots (128 KiB each), and for the sorted runs on disk
    // their Bloom filters (1 to 2 B a digest) and sparse indexes (16 B per 256 digests);
    // without the spill, about 4.6 MB here.
    assert.ok(held < 1024 * 1024, `${held} bytes held after 150,000 records`);
    assert.deepEqual(readdirSync(dir), [], 'the runs are removed when verify finishes');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A 16-byte digest from four 32-bit words (little-endian, as DigestSet reads them). */
function digestOf(...words: number[]): Buffer {
  const bytes = Buffer.alloc(16);
  words.forEach((word, index) => bytes.writeUInt32LE(word >>> 0, index * 4));
  return bytes;
}

const digestCases: {
  name: string;
  capacity: number;
  added: Buffer[];
  absent: Buffer[];
  capacityAfter: number;
}[] = [
  {
    name: 'digests that share a slot (same first word) are told apart by the other 96 bits',
    capacity: 8,
    added: [
      digestOf(5, 1, 1, 1),
      digestOf(5, 1, 1, 2),
      digestOf(5, 2, 1, 1),
      digestOf(13, 0, 0, 1),
    ],
    absent: [digestOf(5, 1, 1, 3), digestOf(5, 0, 0, 0), digestOf(13, 0, 0, 2)],
    capacityAfter: 8,
  },
  {
    name: 'the all-zero digest (the empty slot) is kept apart',
    capacity: 4,
    added: [digestOf(0, 0, 0, 0), digestOf(0, 0, 0, 1)],
    absent: [digestOf(1, 0, 0, 0)],
    capacityAfter: 4,
  },
  {
    name: 'a table 3/4 full doubles and keeps every digest, the colliding ones too',
    capacity: 4,
    added: [
      digestOf(1, 9, 9, 9),
      digestOf(1, 8, 8, 8),
      digestOf(5, 7, 7, 7),
      digestOf(0xffffffff, 6, 6, 6),
    ],
    absent: [digestOf(1, 9, 9, 8), digestOf(5, 9, 9, 9)],
    capacityAfter: 8,
  },
];

for (const { name, capacity, added, absent, capacityAfter } of digestCases)
  test(`DigestSet: ${name}`, () => {
    const set = new DigestSet(capacity);
    for (const item of added) assert.equal(set.add(item), true, item.toString('hex'));
    for (const item of added) assert.equal(set.add(item), false, `again ${item.toString('hex')}`);
    for (const item of added) assert.equal(set.has(item), true, item.toString('hex'));
    for (const item of absent) assert.equal(set.has(item), false, item.toString('hex'));
    assert.equal(set.size, added.length);
    assert.equal(set.capacity, capacityAfter);
    assert.equal(set.bytes, capacityAfter * 16);
  });

/**
 * Adds 20,000 SHA-256 digests to `set`, every third one repeating an earlier text (for a
 * spilling set, often one spilled long ago), checking each `has` and `add` against a Set
 * of hex strings; `afterEach` sees the set after every add. The Set's size.
 */
function agreesWithASet(set: DigestStore, afterEach: () => void = () => {}): number {
  const strings = new Set<string>();
  for (let index = 0; index < 20_000; index += 1) {
    const text = `id-${index % 3 === 0 ? index / 3 : index}`;
    const item = digest128(text);
    const key = item.subarray(0, 16).toString('hex');
    assert.equal(set.has(item), strings.has(key), text);
    assert.equal(set.add(item), !strings.has(key), text);
    strings.add(key);
    afterEach();
  }
  return strings.size;
}

test('DigestSet agrees with a Set of hex strings over 20,000 SHA-256 digests, growing from 2 slots', () => {
  const set = new DigestSet(2);
  const distinct = agreesWithASet(set);
  assert.equal(set.size, distinct);
  assert.ok(set.size <= set.capacity * 0.75);
  assert.ok(set.capacity <= (set.size / 0.75) * 2, `capacity ${set.capacity} for ${set.size}`);
  assert.equal(set.has(digest128('never added')), false);
});

test('DigestSet refuses a digest shorter than 16 bytes', () => {
  assert.throws(() => new DigestSet().add(Buffer.alloc(8)), /16 bytes or more, not 8/);
});

/** Runs `body` with a fresh folder, removed after. */
function inFolder<T>(body: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-digests-'));
  try {
    return body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('SpillingDigestSet agrees with a Set of hex strings over 20,000 digests held 64 in memory, the rest in merged runs', () => {
  inFolder((dir) => {
    const set = new SpillingDigestSet(dir, 'test', 64);
    let mostRuns = 0;
    const distinct = agreesWithASet(set, () => {
      mostRuns = Math.max(mostRuns, set.runs);
    });
    assert.equal(set.size, distinct);
    for (let index = 0; index < 2_000; index += 1)
      assert.equal(set.has(digest128(`never-${index}`)), false);
    // Runs double in size: about log2(13,334 / 64) of them at most, not 208.
    assert.ok(mostRuns <= 10, `${mostRuns} runs at most`);
    assert.ok(readdirSync(dir).length === set.runs && set.runs > 0);
    set.close();
    assert.deepEqual(readdirSync(dir), []);
  });
});

test('SpillingDigestSet keeps the all-zero digest apart, through spills', () => {
  inFolder((dir) => {
    const set = new SpillingDigestSet(dir, 'zero', 2);
    assert.equal(set.add(digestOf(0, 0, 0, 0)), true);
    for (let word = 1; word <= 9; word += 1) assert.equal(set.add(digestOf(word, 0, 0, 0)), true);
    assert.equal(set.add(digestOf(0, 0, 0, 0)), false);
    assert.equal(set.has(digestOf(0, 0, 0, 0)), true);
    assert.equal(set.has(digestOf(0, 0, 0, 1)), false);
    assert.equal(set.size, 10);
    set.close();
  });
});

test('SpillingDigestSet names its folder when it cannot write a run there', () => {
  const set = new SpillingDigestSet('/nonexistent/tollgate-digests', 'intents', 2);
  set.add(digestOf(1, 1, 1, 1));
  assert.throws(
    () => set.add(digestOf(2, 2, 2, 2)),
    /cannot keep the intents digests in \/nonexistent\/tollgate-digests: ENOENT/,
  );
});

/** A trail's commits newest first, `pairs` intents and outcomes and as many Holds, with defects far apart. */
function flawedTrail(pairs: number): AuditCommit[] {
  const commits: AuditCommit[] = [];
  const oid = (index: number) => index.toString(16).padStart(40, '0');
  const perCommit = 10;
  const early = aDecision('Release', 'early-intent').obj();
  const hold = aDecision('Hold', 'held-twice').obj();
  for (let group = 0; group < pairs / perCommit; group += 1) {
    const names = Array.from({ length: perCommit }, (_, i) => `p${group * perCommit + i}`);
    const intents = names.map((name) => aDecision('Release', name).obj());
    const holds = names.map((name) => aDecision('Hold', name).obj());
    // Far apart: an intent recorded twice, an outcome before its intent, a Hold twice.
    if (group === 1) intents.push(aDecision('Release', 'twice').obj());
    if (group === pairs / perCommit - 2) intents.push(aDecision('Release', 'twice').obj());
    if (group === 2) holds.push(hold);
    if (group === pairs / perCommit - 3) holds.push(hold);
    const outcomes = intents.map((item) => outcomeOf(item));
    if (group === 3) outcomes.push(outcomeOf(early));
    if (group === pairs / perCommit - 4) intents.push(early);
    const base = group * 3;
    commits.push(syntheticCommit(base, intents, base === 0 ? undefined : oid(base - 1)));
    commits.push(syntheticCommit(base + 1, outcomes, oid(base)));
    commits.push(syntheticCommit(base + 2, holds, oid(base + 1)));
  }
  return commits.reverse();
}

test('verify with its digests spilled to disk finds exactly what it finds in memory: a repeated intent, an outcome before its intent, a repeated record, far apart', () => {
  const trail = flawedTrail(20_000);
  const inMemory = new TrailVerifier({ now: 0 });
  for (const commit of trail) inMemory.add(commit);
  const expected = inMemory.finish();
  const checks = expected.problems.map((problem) => problem.check).sort();
  assert.deepEqual(
    [...new Set(checks)],
    ['duplicate', 'intent-outcome'],
    JSON.stringify(expected.problems),
  );
  assert.ok(expected.problems.some((p) => /comes before its intent/.test(p.message)));
  assert.ok(expected.problems.some((p) => /recorded again later/.test(p.message)));
  assert.ok(expected.problems.some((p) => /repeats a record/.test(p.message)));
  inFolder((dir) => {
    const spilled = new TrailVerifier({ now: 0, spill: { dir, digestsInMemory: 256 } });
    for (const commit of trail) spilled.add(commit);
    assert.deepEqual(spilled.finish(), expected);
  });
});
