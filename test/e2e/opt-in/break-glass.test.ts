/**
 * Break-glass releases recorded when tollgate comes back, on the real control plane.
 *
 * A first tollgate term holds pods (their `tollgate.io/Released` condition False) and
 * releases one of its own; then tollgate stops. While it is down an operator removes the
 * gates of two held pods by hand (a JSON patch as `kubectl patch` sends it, field manager
 * `kubectl-patch`), and a pod that opted in by label is created gated and released by
 * hand too. The next term start records exactly those three: a BreakGlass record each in
 * the audit trail (evidence, held since, the pod's field managers), a Warning Event
 * GateRemovedOutsideTollgate, and the condition True with reason RemovedOutsideTollgate;
 * a pod still gated and the pod tollgate released are not recorded. A third term records
 * nothing again.
 *
 * Run: node --test --test-concurrency=1 test/e2e/opt-in/break-glass.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { EventsV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { auditRecords } from '../../support/audit-records.ts';
import { eventually } from '../../support/eventually.ts';
import { startGateReleaseStack, type GateReleaseStack } from '../../support/gate-release-stack.ts';
import { createLogger } from '../../../src/observe/log.ts';
import { startWorld, type PolicyState, type World } from '../isolation/world.ts';

const namespace = 'break-glass';
const prefix = 'bg.tollgate.io/';
const heldGate = `${prefix}held`;
const freeGate = `${prefix}free`;

const policy: PolicyState = {
  tenants: [{ name: 'bg', namespaces: [namespace], gatePrefixes: [prefix] }],
  gatePolicies: [
    { name: 'free', tenant: 'bg', gate: freeGate },
    {
      name: 'held',
      tenant: 'bg',
      gate: heldGate,
      conditions: [
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'never' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
    },
  ],
};

const gatedPod = (name: string, gate: string, labels: Record<string, string> = {}): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace, labels },
  spec: {
    schedulingGates: [{ name: gate }],
    containers: [{ name: 'main', image: 'busybox:1.36' }],
  },
});

describe('gates removed by hand while tollgate was down are recorded at the next term start', () => {
  let world: World;
  const stacks: GateReleaseStack[] = [];
  const term = async (id: string) => {
    const stack = await startGateReleaseStack({
      kubeConfig: world.cp.kubeConfig('tollgate'),
      policyUrl: world.policyUrl,
      auditUrl: world.auditUrl,
      token: world.git.token,
      cacheDir: join(world.work, id),
      controller: id,
      cluster: 'e2e',
      auditMode: 'strict',
      log: createLogger({ name: id, level: process.env.TOLLGATE_LOG_LEVEL ?? 'warn' }),
      policyIntervalMs: 300,
      dispatcher: { capacity: 100, concurrency: 4, qps: 100, burst: 100 },
      debounceMs: 50,
      releasedConditions: true,
      breakGlass: true,
    });
    stacks.push(stack);
    return stack;
  };
  const condition = async (name: string) =>
    (await world.core.readNamespacedPod({ namespace, name })).status?.conditions?.find(
      (c) => c.type === 'tollgate.io/Released',
    );
  const removeGateByHand = (name: string, gate: string) =>
    world.core.patchNamespacedPod(
      {
        namespace,
        name,
        fieldManager: 'kubectl-patch',
        body: [
          { op: 'test', path: '/spec/schedulingGates/0/name', value: gate },
          { op: 'remove', path: '/spec/schedulingGates/0' },
        ],
      },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
  const breakGlassRecords = async () =>
    (await auditRecords(world.auditUrl, world.git.token)).filter((r) => r.kind === 'BreakGlass');

  before(async () => {
    world = await startWorld('break-glass', policy);
    await world.createNamespaces(namespace);
  });

  after(async () => {
    for (const stack of stacks) await stack.stop().catch(() => undefined);
    await world?.stop();
  });

  test('two held pods and one opted-in pod released by hand: recorded once each, nothing else', async () => {
    const first = await term('tollgate-1');
    assert.deepEqual(first.breakGlass, [], 'nothing to record on a fresh cluster');
    await world.createPods([
      gatedPod('held-0', heldGate),
      gatedPod('held-1', heldGate),
      gatedPod('kept', heldGate),
      gatedPod('freed', freeGate),
    ]);
    for (const name of ['held-0', 'held-1', 'kept'])
      await eventually(`${name} shows it is held`, async () =>
        (await condition(name))?.status === 'False' ? true : undefined,
      );
    await eventually('tollgate released freed', async () => {
      const pod = await world.core.readNamespacedPod({ namespace, name: 'freed' });
      return (pod.spec?.schedulingGates ?? []).length === 0;
    });
    await first.stop();

    // tollgate is down: an operator releases by hand.
    await removeGateByHand('held-0', heldGate);
    await removeGateByHand('held-1', heldGate);
    await world.createPods([gatedPod('opted-in', heldGate, { 'tollgate.io/gate-policy': 'held' })]);
    await removeGateByHand('opted-in', heldGate);

    const second = await term('tollgate-2');
    assert.deepEqual(second.breakGlass.map((d) => d.target.name).sort(), [
      'held-0',
      'held-1',
      'opted-in',
    ]);
    await second.audit.flush();
    const records = await breakGlassRecords();
    assert.deepEqual(records.map((r) => r.target.name).sort(), ['held-0', 'held-1', 'opted-in']);
    const byName = new Map(records.map((r) => [r.target.name, r]));
    const held0 = byName.get('held-0')!.inputs[0]!.value as Record<string, unknown>;
    assert.equal(held0.evidence, 'held');
    assert.equal(held0.heldReason, 'ObjectCondition');
    assert.ok(typeof held0.heldSince === 'string', 'held since when tollgate showed it');
    const managers = (held0.fieldManagers as { manager: string; subresource?: string }[]).map(
      (m) => `${m.manager}${m.subresource ? `/${m.subresource}` : ''}`,
    );
    assert.ok(managers.length > 0, 'the field managers from the live pod');
    assert.equal(
      (byName.get('opted-in')!.inputs[0]!.value as Record<string, unknown>).evidence,
      'opt-in',
    );
    assert.match(byName.get('held-1')!.reason, /removed outside tollgate \(break-glass\)/);

    for (const name of ['held-0', 'held-1', 'opted-in'])
      await eventually(`${name}'s condition says it was removed outside tollgate`, async () => {
        const shown = await condition(name);
        return shown?.status === 'True' && shown.reason === 'RemovedOutsideTollgate'
          ? true
          : undefined;
      });
    const events = world.cp.kubeConfig('admin').makeApiClient(EventsV1Api);
    await eventually('a Warning Event per pod', async () => {
      const listed = await events.listNamespacedEvent({ namespace });
      const named = listed.items
        .filter((e) => e.reason === 'GateRemovedOutsideTollgate' && e.type === 'Warning')
        .map((e) => e.regarding?.name);
      return ['held-0', 'held-1', 'opted-in'].every((n) => named.includes(n)) ? true : undefined;
    });
    assert.equal((await condition('kept'))?.status, 'False', 'a pod still gated is not one');
    await second.stop();

    const third = await term('tollgate-3');
    assert.deepEqual(third.breakGlass, [], 'recorded once: the next term finds nothing');
    await third.audit.flush();
    assert.equal((await breakGlassRecords()).length, 3);
  });
});
