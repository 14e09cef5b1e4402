import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import type { AuditCommit } from '../../../src/audit/reader.ts';
import { phaseOf, recordSchemaVersion } from '../../../src/audit/record.ts';
import { parseAllowedSigners, sshSigner } from '../../../src/audit/sign.ts';
import type { Change } from '../../../src/audit/tree.ts';
import { confirmationOf } from '../../../src/audit/confirmation.ts';
import { correctionOf } from '../../../src/audit/leftovers.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

let counter = 0;
function commit(
  decisions: Decision[],
  options: { parents?: string[]; changes?: Change[]; phase?: 'outcome' } = {},
): AuditCommit {
  counter += 1;
  const oid = counter.toString(16).padStart(40, '0');
  const path = `audit/prod/2026/11/29/T070000Z-c-${counter}.jsonl`;
  return {
    oid,
    parents: options.parents ?? [],
    message: 'm\n',
    summary: 'm',
    trailers: new Map(),
    author: { name: 'a', email: 'a@b', timestamp: 0 },
    committedAt: 0,
    changes: options.changes ?? [{ path, change: 'added', oid: 'b'.repeat(40) }],
    records: decisions.map((decision) => ({
      ...decision,
      v: recordSchemaVersion,
      phase: options.phase ?? phaseOf(decision),
      file: path,
      line: 1,
    })),
    errors: [],
  };
}

function chain(...commits: AuditCommit[]): AuditCommit[] {
  return commits.map((item, index) =>
    index === 0 ? item : { ...item, parents: [(commits[index - 1] as AuditCommit).oid] },
  );
}

const intent = aDecision('Release', 'p1').obj();
const later = aDecision('Release', 'p2').obj();

const cases: { name: string; history: () => AuditCommit[]; problems: RegExp[] }[] = [
  {
    name: 'a trail where every intent has its outcome passes',
    history: () => chain(commit([intent]), commit([outcomeOf(intent)])),
    problems: [],
  },
  {
    name: 'an intent without an outcome is reported by id',
    history: () => chain(commit([intent])),
    problems: [/intent gate-release:Release:uid-team-a-p1:1 .* has no outcome/],
  },
  {
    name: 'a commit that modifies a file breaks the chain',
    history: () =>
      chain(
        commit([intent]),
        commit([outcomeOf(intent)], {
          changes: [{ path: 'audit/x.jsonl', change: 'modified', oid: 'c'.repeat(40) }],
        }),
      ),
    problems: [/modified audit\/x.jsonl; audit files are never changed or removed/, /adds 0 files/],
  },
  {
    name: 'a commit that deletes a file breaks the chain',
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)]),
        commit([], {
          changes: [{ path: 'audit/x.jsonl', change: 'deleted', oid: 'c'.repeat(40) }],
        }),
      ),
    problems: [/deleted audit\/x.jsonl/, /adds 0 files/],
  },
  {
    name: "a commit that drops older hour folders of its cluster from the tip's tree while it adds a file of a later hour passes (the tip's window: the history keeps them)",
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)]),
        commit([], {
          changes: [
            {
              path: 'audit/prod/2026/11/28/06/T060000Z-c-1.jsonl',
              change: 'deleted',
              oid: 'c'.repeat(40),
            },
            {
              path: 'audit/prod/2026/11/29/07/T070000Z-c-9.jsonl',
              change: 'added',
              oid: 'd'.repeat(40),
            },
          ],
        }),
      ),
    problems: [],
  },
  {
    name: 'a commit that deletes a file of the hour it adds to breaks the chain',
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)]),
        commit([], {
          changes: [
            {
              path: 'audit/prod/2026/11/29/07/T070000Z-c-1.jsonl',
              change: 'deleted',
              oid: 'c'.repeat(40),
            },
            {
              path: 'audit/prod/2026/11/29/07/T070500Z-c-9.jsonl',
              change: 'added',
              oid: 'd'.repeat(40),
            },
          ],
        }),
      ),
    problems: [
      /deleted audit\/prod\/2026\/11\/29\/07\/T070000Z-c-1.jsonl; audit files are never changed or removed/,
    ],
  },
  {
    name: "a commit that deletes an older file of another cluster breaks the chain (a writer drops only its own cluster's folders)",
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)]),
        commit([], {
          changes: [
            {
              path: 'audit/staging/2026/11/28/06/T060000Z-c-1.jsonl',
              change: 'deleted',
              oid: 'c'.repeat(40),
            },
            {
              path: 'audit/prod/2026/11/29/07/T070000Z-c-9.jsonl',
              change: 'added',
              oid: 'd'.repeat(40),
            },
          ],
        }),
      ),
    problems: [/deleted audit\/staging\/.*; audit files are never changed or removed/],
  },
  {
    name: 'a merge commit breaks linearity',
    history: () => {
      const [first, second] = chain(commit([intent]), commit([outcomeOf(intent)]));
      return [
        first as AuditCommit,
        { ...(second as AuditCommit), parents: [(first as AuditCommit).oid, 'f'.repeat(40)] },
      ];
    },
    problems: [/is a merge/],
  },
  {
    name: 'a file outside audit/ is reported',
    history: () =>
      chain(
        commit([intent, outcomeOf(intent)], {
          changes: [{ path: 'README.md', change: 'added', oid: 'c'.repeat(40) }],
        }),
      ),
    problems: [/adds README.md, outside audit/],
  },
  {
    name: 'an intent whose outcome is unknown (recovery could not tell) has its one outcome',
    history: () =>
      chain(
        commit([intent]),
        commit([outcomeOf(intent, { result: 'unknown', message: 'pod gone before recovery' })]),
      ),
    problems: [],
  },
  {
    name: 'an outcome without an intent is reported',
    history: () => chain(commit([outcomeOf(intent)])),
    problems: [/outcome of gate-release:Release:uid-team-a-p1:1 has no intent/],
  },
  {
    name: 'an outcome recorded before its intent is reported, and the intent stays without one',
    history: () => chain(commit([outcomeOf(intent)]), commit([intent])),
    problems: [
      /intent gate-release:Release:uid-team-a-p1:1 .* has no outcome/,
      /outcome of gate-release:Release:uid-team-a-p1:1 comes before its intent/,
    ],
  },
  {
    name: 'two outcomes for one intent are reported, naming both',
    history: () =>
      chain(
        commit([intent]),
        commit([outcomeOf(intent)]),
        commit([outcomeOf(intent, { result: 'conflict', message: 'x' })]),
      ),
    problems: [
      /has two outcomes \(conflict here, succeeded earlier at audit\/prod\/.*:1 in commit/,
    ],
  },
  {
    name: 'the same intent recorded twice is a duplicate',
    history: () => chain(commit([intent]), commit([intent]), commit([outcomeOf(intent)])),
    problems: [/intent gate-release:Release:uid-team-a-p1:1 is recorded again later/],
  },
  {
    name: 'the same record line twice is a duplicate',
    history: () =>
      chain(commit([aDecision('Hold', 'p3').obj()]), commit([aDecision('Hold', 'p3').obj()])),
    problems: [/repeats a record found later in the history \(record gate-release:Hold/],
  },
  {
    name: 'an outcome about another pod than its intent is reported',
    history: () =>
      chain(commit([intent]), commit([{ ...outcomeOf(intent), target: later.target }])),
    problems: [
      /outcome of .* is about Release of uid uid-team-a-p2, the intent about Release of uid uid-team-a-p1/,
    ],
  },
  {
    name: 'an outcome-phase record with a pending result is reported',
    history: () =>
      chain(
        commit([intent]),
        commit([outcomeOf(intent)], { phase: 'outcome' }),
        commit([later]),
        commit([outcomeOf(later, { result: 'pending' })], { phase: 'outcome' }),
      ),
    problems: [/phase "outcome" with result "pending"/, /has result "pending", not one of/],
  },
  {
    name: 'an empty history is an error, not ok',
    history: () => [],
    problems: [/no audit commits to verify/],
  },
];

for (const { name, history, problems } of cases) {
  test(name, () => {
    const report = verifyTrail(history());
    assert.equal(report.problems.length, problems.length, JSON.stringify(report.problems));
    problems.forEach((pattern, index) =>
      assert.match(report.problems[index]?.message ?? '', pattern),
    );
    assert.equal(report.ok, problems.length === 0);
  });
}

test('the report counts unknown outcomes apart, so a reader sees them', () => {
  const report = verifyTrail(
    chain(
      commit([intent, later]),
      commit([
        outcomeOf(intent, { result: 'unknown', message: 'pod gone before recovery' }),
        outcomeOf(later),
      ]),
    ),
  );
  assert.equal(report.ok, true, JSON.stringify(report.problems));
  assert.equal(report.outcomes, 2);
  assert.equal(report.unknownOutcomes, 1);
});

test("a release whose recovered outcome was corrected to succeeded counts as the pod's succeeded Release", () => {
  const cancelled = outcomeOf(intent, { result: 'cancelled', message: 'not sent before restart' });
  const correction = correctionOf(
    { ...outcomeOf(intent), v: recordSchemaVersion, phase: 'outcome' },
    { ...cancelled, v: recordSchemaVersion, phase: 'outcome' },
    intent.at + 5,
  );
  assert.ok(correction);
  const report = verifyTrail(chain(commit([intent]), commit([cancelled]), commit([correction])), {
    pods: [{ namespace: 'team-a', name: 'p1', uid: 'uid-team-a-p1', schedulingGates: [] }],
  });
  assert.deepEqual(report.problems, []);
  assert.equal(report.podsChecked, 1);
});

test('an intent younger than the grace period is in flight, not missing', () => {
  const report = verifyTrail(chain(commit([intent])), { now: intent.at + 1_000, graceMs: 5_000 });
  assert.equal(report.ok, true);
});

test('an ungated pod the trail knows needs a succeeded Release; gated or unknown pods are not judged', () => {
  const history = chain(
    commit([intent]),
    commit([outcomeOf(intent)]),
    commit([aDecision('Hold', 'p2').obj()]),
  );
  const report = verifyTrail(history, {
    pods: [
      { namespace: 'team-a', name: 'p1', uid: 'uid-team-a-p1', schedulingGates: [] },
      { namespace: 'team-a', name: 'p2', uid: 'uid-team-a-p2', schedulingGates: [] },
      { namespace: 'team-a', name: 'p3', uid: 'uid-team-a-p3', schedulingGates: [] },
      { namespace: 'team-a', name: 'p4', uid: 'uid-team-a-p2b', schedulingGates: ['x.io/y'] },
    ],
  });
  assert.equal(report.podsChecked, 2);
  assert.deepEqual(
    report.problems.map((problem) => problem.message),
    [
      'pod team-a/p2 (uid uid-team-a-p2) has no scheduling gates but the trail has no succeeded Release decision for it',
    ],
  );
});

test('a pod the trail knows only from resize decisions is not judged as released', () => {
  const resize = aDecision('Resize', 'r1').obj();
  const report = verifyTrail(chain(commit([resize]), commit([outcomeOf(resize)])), {
    pods: [{ namespace: 'team-a', name: 'r1', uid: 'uid-team-a-r1', schedulingGates: [] }],
  });
  assert.deepEqual([report.ok, report.podsChecked, report.problems], [true, 0, []]);
});

const signer = sshSigner(
  generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
);
const stranger = sshSigner(
  generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
);
const allowed = parseAllowedSigners(`# tollgate
tollgate@prod namespaces="git" ${signer.publicKey} controller key
`);
function signedBy(item: AuditCommit, by: typeof signer, payload = `tree ${item.oid}\n`) {
  return { ...item, signature: { armored: by.sign(payload), payload } };
}

const signatureCases: {
  name: string;
  sign: (item: AuditCommit) => AuditCommit;
  problems: RegExp[];
}[] = [
  {
    name: 'a commit signed by an allowed key passes',
    sign: (item) => signedBy(item, signer),
    problems: [],
  },
  {
    name: 'an unsigned commit fails when signatures are required',
    sign: (item) => item,
    problems: [/is not signed; signatures are required/],
  },
  {
    name: 'a commit signed by a key outside the allowed signers fails',
    sign: (item) => signedBy(item, stranger),
    problems: [/bad signature: signing key ssh-ed25519 .* is not in the allowed signers/],
  },
  {
    name: 'a commit whose content changed after signing fails',
    sign: (item) => {
      const signed = signedBy(item, signer);
      return { ...signed, signature: { ...signed.signature, payload: 'tree edited\n' } };
    },
    problems: [/bad signature: signature does not match the commit/],
  },
];
for (const { name, sign, problems } of signatureCases) {
  test(name, () => {
    const only = commit([intent, outcomeOf(intent)]);
    const report = verifyTrail([sign(only)], { allowedSigners: allowed });
    assert.deepEqual(
      report.problems.map((problem) => problem.check),
      problems.map(() => 'signature'),
    );
    problems.forEach((pattern, index) =>
      assert.match(report.problems[index]?.message ?? '', pattern),
    );
  });
}

test('an allowed-signers line with a key type tollgate cannot check is refused, naming the line', () => {
  assert.throws(
    () => parseAllowedSigners('a@b ssh-ed25519 AAAA\nb@c ssh-rsa AAAAB3Nza\n', 'signers'),
    /signers:2: key type ssh-rsa is not supported/,
  );
});

test('an ungated pod whose gate was removed by hand is explained by its BreakGlass record', () => {
  const history = chain(
    commit([aDecision('Hold', 'p2').obj()]),
    commit([aDecision('BreakGlass', 'p2').recorded().obj()]),
  );
  const report = verifyTrail(history, {
    pods: [{ namespace: 'team-a', name: 'p2', uid: 'uid-team-a-p2', schedulingGates: [] }],
  });
  assert.deepEqual([report.ok, report.podsChecked, report.problems], [true, 1, []]);
});

/** A late outcome kept as a confirmation of the one recorded first (confirmation.ts). */
const asOutcomeRecord = (decision: Decision) => ({
  ...decision,
  v: recordSchemaVersion,
  phase: 'outcome' as const,
});
const recovered = outcomeOf(intent, { result: 'succeeded' });
const confirmationCases: {
  name: string;
  history: () => AuditCommit[];
  problems: RegExp[];
}[] = [
  {
    name: 'a late outcome that agrees, kept as a confirmation after the outcome it names, is accepted',
    history: () =>
      chain(
        commit([intent]),
        commit([recovered]),
        commit([
          confirmationOf(
            outcomeOf(intent, { result: 'succeeded', resourceVersion: '9' }),
            asOutcomeRecord(recovered),
            intent.at + 9,
          ),
        ]),
      ),
    problems: [],
  },
  {
    name: 'a confirmation that contradicts the outcome it names is reported',
    history: () =>
      chain(
        commit([intent]),
        commit([outcomeOf(intent, { result: 'cancelled', message: 'not sent before restart' })]),
        commit([confirmationOf(outcomeOf(intent), asOutcomeRecord(recovered), intent.at + 9)]),
      ),
    problems: [
      /confirmation of gate-release:Release:uid-team-a-p1:1 .*succeeded.* contradicts its outcome cancelled/,
    ],
  },
  {
    name: 'a confirmation of an intent without an outcome before it is reported',
    history: () =>
      chain(
        commit([intent]),
        commit([confirmationOf(outcomeOf(intent), asOutcomeRecord(recovered), intent.at + 9)]),
        commit([recovered]),
      ),
    problems: [/confirmation of gate-release:Release:uid-team-a-p1:1 .*has no outcome before it/],
  },
  {
    name: 'two agreeing outcomes from different terms without the mark are still two outcomes',
    history: () =>
      chain(
        commit([intent]),
        commit([recovered]),
        commit([outcomeOf(intent, { result: 'succeeded', resourceVersion: '9' })]),
      ),
    problems: [/has two outcomes \(succeeded here, succeeded earlier/],
  },
];

for (const { name, history, problems } of confirmationCases) {
  test(name, () => {
    const report = verifyTrail(history());
    assert.equal(report.problems.length, problems.length, JSON.stringify(report.problems));
    problems.forEach((pattern, index) =>
      assert.match(report.problems[index]?.message ?? '', pattern),
    );
  });
}
