/**
 * A killed leader can leave two open intents of one kind for one pod: a Release whose
 * write was answered 422 and the Release it decided again afterwards (its outcomes were
 * never pushed). The pod shows its gate gone, and a gate is removed once, so recovery
 * records at most one of them as succeeded: the newer (the leader re-decided after the
 * older write's answer), the older `unknown` with why. Seen on the real control plane by
 * e2e deploy/run ("at most one successful Release recorded per pod": 409 against 400).
 * The trail is a real repository on disk; both recovery paths (the library's `recover`
 * and the term start's `recoverOpenIntents`) are asked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { repoSource } from '../../../src/audit/reader.ts';
import { podStateLookup, recover } from '../../../src/audit/recover.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import type { AuditSink } from '../../../src/audit/types.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { recoverOpenIntents } from '../../../src/loops/gate-release-recovery.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { localClone } from '../../support/audit-clone.ts';
import { aDecision } from '../../builders/decision.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';

const at = Date.UTC(2026, 10, 29, 7, 0, 0);
const release = (name: string, n: number, resourceVersion: string): Decision => {
  const decision = aDecision('Release', name)
    .id(`gate-release:Release:uid-team-a-${name}:${n}`)
    .at(at + n * 1_000)
    .obj();
  return { ...decision, target: { ...decision.target, resourceVersion } };
};
const pod = (name: string, gates: string[]): V1Pod => ({
  metadata: { namespace: 'team-a', name, uid: `uid-team-a-${name}`, resourceVersion: '9' },
  spec: { containers: [], schedulingGates: gates.map((gate) => ({ name: gate })) },
});
const pods: Record<string, V1Pod> = {
  twice: pod('twice', []),
  once: pod('once', []),
  held: pod('held', ['tollgate.io/ready']),
};

async function trail(intents: Decision[]) {
  const clone = await localClone();
  await clone.repo.commitFile(
    'audit/prod/2026/11/29/07/T070000Z-old-leader-000001.jsonl',
    serializeBatch(intents),
    'release\n\nTollgate-Batch: intents\n',
  );
  return repoSource(clone.repo);
}

const sink = () => {
  const recorded: Decision[] = [];
  const audit: AuditSink = {
    recordIntents: () => Promise.resolve(),
    record: (decisions) => void recorded.push(...decisions),
    flush: () => Promise.resolve(),
    reconcile: () => Promise.reject(new Error('not used')),
    backlog: 0,
    close: () => Promise.resolve(),
  };
  return { audit, recorded };
};

const intents = [
  release('twice', 1, '3'), // answered 422, never recorded
  release('once', 2, '4'),
  release('twice', 3, '5'), // decided again: the write that removed the gate
  release('held', 4, '6'),
];

const expected = [
  [intents[0]?.id, 'unknown'],
  [intents[1]?.id, 'succeeded'],
  [intents[2]?.id, 'succeeded'],
  [intents[3]?.id, 'cancelled'],
];

const paths: [string, (audit: AuditSink) => Promise<unknown>][] = [
  [
    'the library recovery (recover)',
    async (audit) =>
      recover({
        source: await trail(intents),
        cluster: 'prod',
        lookup: podStateLookup(
          (_namespace, name) => pods[name],
          (gate) => gate.startsWith('tollgate.io/'),
        ),
        sink: audit,
        clock: { now: () => at + 60_000 },
        awaitPush: false,
      }),
  ],
  [
    "a term start's recovery (recoverOpenIntents)",
    async (audit) =>
      recoverOpenIntents({
        source: await trail(intents),
        cluster: 'prod',
        view: { pod: (_namespace: string, name: string) => pods[name] } as unknown as ClusterView,
        policy: aPolicy().tenant(aTenant('team-a').prefixes('tollgate.io/')).obj(),
        audit,
        clock: { now: () => at + 60_000 },
        log: silentLogger,
      }),
  ],
];

for (const [name, run] of paths) {
  test(`${name} records one succeeded Release per pod: the newer of two open intents for an ungated pod, the older unknown`, async () => {
    const { audit, recorded } = sink();
    await run(audit);
    assert.deepEqual(
      recorded.map((d) => [d.id, d.outcome.result]),
      expected,
    );
    const older = recorded[0]?.outcome;
    assert.match(
      older && 'message' in older ? older.message : '',
      /a later Release intent for the same pod \(gate-release:Release:uid-team-a-twice:3\) is recorded as the write that removed its gate/,
    );
  });
}
