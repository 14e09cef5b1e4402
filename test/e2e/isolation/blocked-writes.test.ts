/**
 * Defect 5 of the fault-isolation issue: a write that keeps failing with a final API
 * error is not re-sent forever. Here the policy cancels expired pods but tollgate's role
 * has no pod delete (deploy/components/cancel is not applied): every delete is a 403.
 * Wanted: a few attempts with a growing backoff, then one recorded `Blocked` state with
 * the API's reason; no new intent while backing off or blocked. Another tenant's pods
 * keep releasing meanwhile, within budget. A restarted tollgate (a new term) carries the
 * Blocked state over from the audit trail: it sends no new intent either.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/blocked-writes.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { maxFinalFailures } from '../../../src/decide/release-blocked.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const nsCancel = 'iso-blocked';
const nsOther = 'iso-unblocked';
const policy: PolicyState = {
  tenants: [
    { name: 'bl', namespaces: [nsCancel], gatePrefixes: ['bl.tollgate.io/'] },
    { name: 'ok', namespaces: [nsOther], gatePrefixes: ['ok.tollgate.io/'], budget: { pods: 2 } },
  ],
  gatePolicies: [
    {
      name: 'bl-cancel',
      tenant: 'bl',
      gate: 'bl.tollgate.io/hold',
      conditions: [
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'never' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
      expiry: { after: '1s', action: 'Cancel' },
      recheck: { initial: '200ms', max: '500ms', maxAttempts: 100 },
    },
    { name: 'ok-ready', tenant: 'ok', gate: 'ok.tollgate.io/ready' },
  ],
};

describe('a write that keeps failing finally', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;
  let first: Awaited<ReturnType<World['startTollgate']>>;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-blocked', policy, {
      namespaces: [nsCancel, nsOther],
      budgets: () => ({
        ok: { namespaces: [nsOther], ourPrefix: 'ok.tollgate.io/', pods: 2 },
      }),
      finish: [nsOther],
      startTollgate: false,
    }));
    first = await world.startTollgate();
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  test('backs off, is Blocked with the API reason, and sends no new intent; others release', async () => {
    await world.createPods([aPod('doomed', nsCancel).gated('bl.tollgate.io/hold').obj()]);
    const others = Array.from({ length: 6 }, (_, i) => `ok-${i}`);
    await world.createPods(others.map((n) => aPod(n, nsOther).gated('ok.tollgate.io/ready').obj()));
    const read = async () => {
      const source = await openAuditSource(world.auditUrl, 'tollgate/audit', {
        token: world.git.token,
      });
      try {
        return (await readAuditHistory(source))
          .flatMap((c) => c.records)
          .filter((r) => r.target.name === 'doomed');
      } finally {
        source.close();
      }
    };
    const blocked = await eventually(
      'a Blocked record for the pod',
      async () => (await read()).find((r) => r.kind === 'Blocked'),
      { timeoutMs: 90_000 },
    );
    assert.match(blocked.reason, /Cancel failed 5 times \(403: .*forbidden/);
    await eventually(
      'every release of the other tenant',
      async () => others.every((n) => watcher.releases(nsOther, n) === 1),
      { timeoutMs: 60_000 },
    );
    const intents = (await read()).filter((r) => r.kind === 'Cancel' && r.phase === 'intent');
    assert.equal(intents.length, maxFinalFailures, 'one intent per attempt, none once blocked');
    const pod = await world.core.readNamespacedPod({ namespace: nsCancel, name: 'doomed' });
    assert.ok(pod.metadata?.uid, 'the pod is still there');
    assert.deepEqual(watcher.violations, []);

    // A restart: the next tollgate reads the Blocked state back and sends nothing for it.
    await first.stop();
    await world.startTollgate('tollgate-2', undefined, undefined, { recoverIntents: true });
    const later = Array.from({ length: 3 }, (_, i) => `ok-later-${i}`);
    await world.createPods(later.map((n) => aPod(n, nsOther).gated('ok.tollgate.io/ready').obj()));
    await eventually(
      'the restarted tollgate releases the other tenant',
      async () => later.every((n) => watcher.releases(nsOther, n) === 1),
      { timeoutMs: 60_000 },
    );
    const afterRestart = (await read()).filter((r) => r.kind === 'Cancel' && r.phase === 'intent');
    assert.equal(afterRestart.length, maxFinalFailures, 'no new intent after the restart');
    assert.deepEqual(watcher.violations, []);
  });
});
