/**
 * Issue 16: a Blocked write survives a new leader term however long the audit trail
 * behind it. The writer's checkpoints carry the Blocked states still in force (and the
 * gang memory), so a new term reads back to its last checkpoint only and still knows a
 * pod Blocked 1,500 commits back; a state lifted since (pod gone, changed, policy
 * changed, decided again) is not carried; an older checkpoint without the carried field
 * is read as before, back to the commit limit, and a term on such a trail writes a
 * carrying checkpoint at once. A real bare repository on disk, written through the real
 * writer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { readCarried } from '../../../src/audit/carried.ts';
import { checkpointPath } from '../../../src/audit/checkpoint.ts';
import { openAuditSource } from '../../../src/audit/reader.ts';
import type { AuditSink } from '../../../src/audit/types.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import { auditFilePath, GitAuditWriter } from '../../../src/audit/writer.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { blockedNow } from '../../../src/decide/release-blocked.ts';
import { carriedInForce } from '../../../src/decide/release-carried.ts';
import { recoverFromTrail } from '../../../src/loops/gate-release-blocked.ts';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { aDecision, type DecisionBuilder } from '../../builders/decision.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { localClone, type LocalClone } from '../../support/audit-clone.ts';
import { fillerCommits } from '../../support/audit-filler.ts';

const gate = 'team-a.tollgate.io/ready';
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 10 }))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();

/** A gated pod as the view shows it (resourceVersion '5' unless a case changes it). */
const gatedPod = (name: string, rv = '5'): V1Pod =>
  aPod(name, 'team-a').gated(gate).resourceVersion(rv).obj();

/** A decision on the pod at the resourceVersion the view shows it at ('5'). */
const atVersion = (builder: DecisionBuilder, rv = '5'): Decision => {
  const decision = builder.obj();
  return { ...decision, target: { ...decision.target, resourceVersion: rv } };
};

/** The Blocked record the loop writes after the fifth final failure (gate-release.ts #backOff). */
function blockedRecord(name: string, at: number, commit = policy.commit): Decision {
  return atVersion(
    aDecision('Blocked', name)
      .id(`gate-release:Blocked:uid-team-a-${name}:5:${at}`)
      .at(at)
      .policyCommit(commit)
      .reason(
        'Release failed 5 times (403: forbidden); blocked until the pod or the policy changes',
      )
      .recorded(),
  );
}

interface Trail extends LocalClone {
  readonly writer: GitAuditWriter;
}

/** The leader's writer, a checkpoint after each of its commits (see `otherCommits`). */
async function aTrail(): Promise<Trail> {
  const clone = await localClone();
  const writer = new GitAuditWriter({
    store: clone.store,
    cluster: 'prod',
    controller: 'c0',
    batch: { maxDecisions: 1_000, maxDelayMs: 1_000 },
    clock: clone.clock,
    checkpointEvery: 1,
  });
  writer.seedOpenIntents([]);
  return { ...clone, writer };
}

async function commitRecords(trail: Trail, decisions: readonly Decision[]): Promise<void> {
  trail.writer.record(decisions);
  await trail.writer.flush();
}

/**
 * `count` commits of other pods' Holds, the history that pushes a Blocked record back
 * (git fast-import, to keep the test in seconds); the writer commits after every 150 of
 * them, and checkpoints after each of its own commits, so the branch has a checkpoint at
 * least every 152 commits, as a leader's branch has one every 200 of its commits.
 */
async function otherCommits(trail: Trail, count: number): Promise<void> {
  for (let done = 0; done < count; done += 150) {
    await fillerCommits(trail.repo, trail.clock, Math.min(150, count - done));
    trail.clock.advance(1_000);
    await commitRecords(trail, [
      aDecision('Hold', `other-${done}`).at(trail.clock.now()).recorded().obj(),
    ]);
  }
}

/** What a new term carries over, read from the branch as run/loops.ts reads it. */
async function newTerm(trail: Trail, limit?: number) {
  const source = await openAuditSource(trail.dir, 'tollgate/audit');
  try {
    return await recoverFromTrail(source, 'prod', silentLogger, limit);
  } finally {
    source.close();
  }
}

function viewOf(pods: V1Pod[]): ClusterView {
  return {
    synced: true,
    whenSynced: async () => undefined,
    pods: () => pods,
    pod: (ns, name) => pods.find((p) => p.metadata?.namespace === ns && p.metadata?.name === name),
    nodes: () => [],
    object: () => undefined,
    lastResourceVersion: () => undefined,
    onChange: () => () => undefined,
  } as ClusterView;
}

test('a pod Blocked 1,500 commits back is still Blocked after a new term, and the new term records no new intent for it', async () => {
  const trail = await aTrail();
  const pods = [gatedPod('stuck')];
  trail.writer.keepCarriedWhile((carried) => carriedInForce(carried, pods, policy));
  await commitRecords(trail, [blockedRecord('stuck', trail.clock.now())]);
  await otherCommits(trail, 1_500);

  const carried = await newTerm(trail);
  const entry = carried.blocked['uid-team-a-stuck'];
  assert.ok(entry, 'the Blocked state is carried over');
  assert.equal(blockedNow(entry, gatedPod('stuck'), policy.commit, trail.clock.now()), true);

  const intents: Decision[] = [];
  const audit: AuditSink = {
    recordIntents: async (decisions) => void intents.push(...decisions),
    record: () => undefined,
    flush: async () => undefined,
    backlog: 0,
    close: async () => undefined,
  };
  const loop = startGateReleaseLoop({
    view: viewOf(pods),
    policy: () => policy,
    dispatcher: {
      enqueue: () => ({ accepted: false, reason: 'full' }),
      whenNotFull: async () => undefined,
      cancel: () => undefined,
      depth: 0,
      close: async () => undefined,
    },
    audit,
    clock: new ManualClock(trail.clock.now()),
    autoStart: false,
    blocked: carried.blocked,
  });
  const report = await loop.pass();
  await report.settled;
  await loop.stop();
  assert.equal(report.sent, 0);
  assert.deepEqual(intents, [], 'no new intent for a pod the trail shows Blocked');
});

test('a Blocked state lifted since is not carried by the checkpoint', async (t) => {
  const cases: {
    name: string;
    /** The view the writer asks at its checkpoint. */
    pods: V1Pod[];
    /** The policy commit the lifted pod was Blocked under (default: the one in force). */
    blockedUnder?: string;
    /** Decisions committed after the Blocked record. */
    later?: (at: number) => Decision[];
  }[] = [
    { name: 'the pod is gone', pods: [] },
    { name: 'the pod changed (a newer resourceVersion)', pods: [gatedPod('lifted', '6')] },
    {
      name: 'a new policy commit is in force',
      pods: [gatedPod('lifted')],
      blockedUnder: 'b'.repeat(40),
    },
    {
      name: 'the pod was decided again and released',
      pods: [gatedPod('lifted')],
      later: (at) => [atVersion(aDecision('Release', 'lifted').at(at).intent())],
    },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => {
      const trail = await aTrail();
      const pods = [gatedPod('stuck'), ...c.pods];
      trail.writer.keepCarriedWhile((carried) => carriedInForce(carried, pods, policy));
      await commitRecords(trail, [
        blockedRecord('stuck', trail.clock.now()),
        blockedRecord('lifted', trail.clock.now(), c.blockedUnder),
      ]);
      trail.clock.advance(1_000);
      if (c.later) {
        const later = c.later(trail.clock.now());
        await trail.writer.recordIntents(later);
      }
      // Past a checkpoint (every 200 commits), within the old limit of 1,000 commits.
      await otherCommits(trail, 250);
      const carried = await newTerm(trail);
      assert.deepEqual(Object.keys(carried.blocked), ['uid-team-a-stuck']);
    });
  }
});

test('an older checkpoint without the carried field is read as before, back to the commit limit', async (t) => {
  /** A checkpoint as tollgate wrote it before it carried Blocked states. */
  async function oldCheckpoint(trail: Trail): Promise<void> {
    trail.clock.advance(1_000);
    await trail.repo.commitFile(
      checkpointPath('audit/prod/2026/11/29/07/T070000Z-c0-999999.jsonl'),
      `${JSON.stringify({ v: 1, kind: 'tollgate-open-intents', cluster: 'prod', open: 0 })}\n`,
      'checkpoint: 0 open intents\n',
    );
  }
  const cases = [
    { name: 'a Blocked record behind it, within the limit, is carried', limit: 50, blocked: true },
    { name: 'one beyond the limit is not (as before)', limit: 20, blocked: false },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => {
      const { dir, clock, repo } = await localClone();
      let sequence = 0;
      const commit = async (decision: Decision) => {
        clock.advance(1_000);
        sequence += 1;
        await repo.commitFile(
          auditFilePath('prod', 'c0', clock.now(), sequence),
          serializeBatch([decision]),
          `${decision.kind}\n`,
        );
      };
      await commit(blockedRecord('stuck', clock.now()));
      for (let index = 0; index < 10; index += 1)
        await commit(aDecision('Hold', `other-${index}`).at(clock.now()).recorded().obj());
      await oldCheckpoint({ dir, clock, repo } as Trail);
      for (let index = 10; index < 30; index += 1)
        await commit(aDecision('Hold', `other-${index}`).at(clock.now()).recorded().obj());
      const source = await openAuditSource(dir, 'tollgate/audit');
      try {
        const carried = await recoverFromTrail(source, 'prod', silentLogger, c.limit);
        assert.equal(Object.hasOwn(carried.blocked, 'uid-team-a-stuck'), c.blocked);
      } finally {
        source.close();
      }
    });
  }
});

test('gang memory is carried by the checkpoint while its pod keeps its gate', async () => {
  const trail = await aTrail();
  const straggler = gatedPod('m2');
  const pods = [straggler];
  trail.writer.keepCarriedWhile((carried) => carriedInForce(carried, pods, policy));
  const wholeGang = (name: string) =>
    aDecision('Release', name)
      .at(trail.clock.now())
      .input('GangComplete', true, { expected: 2, present: 2 })
      .intent()
      .obj();
  await trail.writer.recordIntents([wholeGang('m1'), wholeGang('m2')]);
  await otherCommits(trail, 1_200);
  const carried = await newTerm(trail);
  assert.deepEqual(carried.gangReleases, { 'uid-team-a-m2': Date.UTC(2026, 10, 29, 7) });
});

test('a term on a trail whose last checkpoint does not carry Blocked states writes one that does at its first cycle, with what its read found', async () => {
  const { dir, clock, repo } = await localClone();
  // The clone is its own remote: nothing to fetch, every commit counts as pushed.
  repo.sync = async () => undefined;
  repo.push = async () => 0;
  repo.unpushed = async () => [];
  clock.advance(1_000);
  await repo.commitFile(
    auditFilePath('prod', 'old', clock.now(), 1),
    serializeBatch([blockedRecord('stuck', clock.now())]),
    'records: 1 decision\n',
  );
  clock.advance(1_000);
  await repo.commitFile(
    checkpointPath(auditFilePath('prod', 'old', clock.now(), 2)),
    `${JSON.stringify({ v: 1, kind: 'tollgate-open-intents', cluster: 'prod', open: 0 })}\n`,
    'checkpoint: 0 open intents\n',
  );
  const writer = new GitAuditWriter({
    store: repo,
    cluster: 'prod',
    controller: 'c1',
    batch: { maxDecisions: 100, maxDelayMs: 1_000 },
    clock,
  });
  await writer.reconcile();
  clock.advance(1_000);
  writer.record([aDecision('Hold', 'other').at(clock.now()).recorded().obj()]);
  await writer.flush();

  const source = await openAuditSource(dir, 'tollgate/audit');
  try {
    const read = await readCarried(source, 'prod');
    assert.equal(read.fromCheckpoint, true, 'a carrying checkpoint was written');
    assert.deepEqual(
      read.carried.blocked.map((block) => block.target.uid),
      ['uid-team-a-stuck'],
    );
  } finally {
    source.close();
  }
});
