/**
 * Sealed resize state survives a failover when tollgate is installed as deploy/ renders
 * it: both replicas read the key file of the Secret tollgate-resize-state-key (created as
 * docs/install.md says, with `openssl rand -base64 48`), so the successor verifies the
 * last good resources its predecessor sealed on the pod and rolls back to them after an
 * OOM kill, with no rejected-state record. Beside it, the replicas as they were before
 * deploy/ mounted a key (each process sealing with a random key of its own): the
 * successor rejects the state (unknown-key, recorded and counted) and cannot roll back.
 *
 * The real control plane with a simulated kubelet, a real Prometheus and Git server (the
 * resize e2e world, test/e2e/resize/harness.ts). A replica is the resize loop with the
 * key ring `tollgate run` reads from the key file (src/run/loops.ts); the failover is the
 * predecessor's loop stopped before the successor's starts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { parseStateKeys, type StateKeyRing } from '../../../src/decide/resize-seal.ts';
import {
  policyFor,
  queueSignal,
  runWorkerLoweredOneStep,
  startResizeWorld,
  type ResizeWorld,
} from '../resize/harness.ts';
import { actualMemoryOf, memoryOf } from '../resize/pods.ts';
import type { ResizeLoop } from '../../../src/loops/resize.ts';
import { kustomizeOverlay } from './tools.ts';

// Rendered YAML is untyped; walked as loosely typed data.
/* eslint-disable @typescript-eslint/no-explicit-any */
const queueMetric = 'tollgate_test_queue_length';
const Mi = 2 ** 20;
let world: ResizeWorld;
const work = mkdtempSync(join(tmpdir(), 'tollgate-resize-failover-'));

async function rejected(): Promise<number> {
  const metric = await registry.getSingleMetric('tollgate_resize_state_rejected_total')?.get();
  return (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

/**
 * What the kubelet gives each replica of the rendered Deployment: the key Secret's data
 * at the path TOLLGATE_RESIZE_STATE_KEY_FILE names (below a folder per replica); then
 * the ring `tollgate run` parses from that file.
 */
async function keyRingsAsDeployed(replicas: string[]): Promise<StateKeyRing[]> {
  const objects = kustomizeOverlay({ fields: { namespace: world.namespace } });
  const spec = (objects.find((o) => o.kind === 'Deployment') as any).spec.template.spec;
  const container = spec.containers[0];
  const file: string = container.env.find(
    (e: any) => e.name === 'TOLLGATE_RESIZE_STATE_KEY_FILE',
  ).value;
  const mount = container.volumeMounts.find((m: any) => file.startsWith(`${m.mountPath}/`));
  const secretName: string = spec.volumes.find((v: any) => v.name === mount.name).secret.secretName;
  const keys = execFileSync('openssl', ['rand', '-base64', '48'], { encoding: 'utf8' }).trim();
  await world.admin.createNamespacedSecret({
    namespace: world.namespace,
    body: { metadata: { name: secretName }, stringData: { keys } },
  });
  const secret = await world.admin.readNamespacedSecret({
    namespace: world.namespace,
    name: secretName,
  });
  return replicas.map((replica) => {
    const path = join(work, replica, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(
      path,
      Buffer.from(secret.data![file.slice(mount.mountPath.length + 1)]!, 'base64'),
    );
    const ring = parseStateKeys(readFileSync(path, 'utf8'));
    assert.ok(!('error' in ring), `the key file parses: ${JSON.stringify(ring)}`);
    return ring as StateKeyRing;
  });
}

const policy = () =>
  policyFor(world.namespace, [
    aResizePolicy({
      name: 'failover',
      selector: { matchLabels: { app: 'failover' }, matchExpressions: [] },
      containers: { app: { memory: { min: 128 * Mi, max: 1024 * Mi, step: 128 * Mi } } },
      signals: [queueSignal(queueMetric)],
      windowMs: 2000,
      cooldownMs: 3000,
    }),
  ]);

/**
 * Replica A lowers the pod one step, A goes away, B takes over, the container is
 * OOMKilled. Returns B, which the test stops before the next one (one replica acts at a
 * time, as under the lease).
 */
async function failover(
  pod: string,
  rings: [StateKeyRing | undefined, StateKeyRing | undefined],
): Promise<ResizeLoop> {
  const predecessor = world.loop(policy, { stateKeys: rings[0] });
  await runWorkerLoweredOneStep(world, queueMetric, {
    name: pod,
    app: 'failover',
    node: 'rz-failover-node',
  });
  await predecessor.stop();
  const successor = world.loop(policy, { stateKeys: rings[1] });
  await world.kubelet.oomKill(world.namespace, pod, 'app');
  return successor;
}

const stateIgnored = async (pod: string) =>
  (await world.auditRecords()).filter(
    (r) =>
      (r.target as { name: string }).name === pod &&
      /resize state on the pod ignored/.test(String(r.reason)),
  );

before(async () => {
  world = await startResizeWorld('failover', { 'rz-failover-node': { cpu: '4', memory: '8Gi' } });
});

after(async () => {
  await world?.stop();
});

describe('sealed resize state across a failover', () => {
  it('replicas installed from deploy/ share the key: the successor rolls back to the sealed last good, nothing rejected', async () => {
    const before = await rejected();
    const [a, b] = await keyRingsAsDeployed(['replica-a', 'replica-b']);
    const successor = await failover('shared-key-0', [a, b]);
    await eventually(
      'rolled back to the last good 512Mi',
      async () => {
        const pod = await world.pod('shared-key-0');
        return memoryOf(pod) === 512 * Mi && actualMemoryOf(pod) === 512 * Mi;
      },
      { timeoutMs: 30_000 },
    );
    const records = (await world.auditRecords()).filter(
      (r) => (r.target as { name: string }).name === 'shared-key-0',
    );
    assert.ok(
      records.some(
        (r) => r.kind === 'Rollback' && (r.outcome as { result: string }).result === 'succeeded',
      ),
      'the successor rolled back',
    );
    assert.deepEqual(await stateIgnored('shared-key-0'), [], 'no rejected-state record');
    assert.equal((await rejected()) - before, 0, 'nothing counted as rejected');
    await world.assertInPlace('shared-key-0', 1);
    await successor.stop();
  });

  it('replicas without a shared key (before deploy/ mounted one): the successor rejects the state and cannot roll back', async () => {
    const before = await rejected();
    const successor = await failover('own-keys-0', [undefined, undefined]);
    await eventually(
      'the rejection recorded',
      async () => (await stateIgnored('own-keys-0')).length > 0,
      { timeoutMs: 30_000 },
    );
    assert.match(JSON.stringify((await stateIgnored('own-keys-0'))[0]?.inputs), /unknown-key/);
    assert.ok((await rejected()) - before >= 1, 'counted');
    await eventually(
      'the OOM kill answered by one step up (a Resize), the only move without a last good',
      async () => memoryOf(await world.pod('own-keys-0')) === 512 * Mi,
      { timeoutMs: 30_000 },
    );
    const records = (await world.auditRecords()).filter(
      (r) => (r.target as { name: string }).name === 'own-keys-0',
    );
    assert.equal(
      records.filter((r) => r.kind === 'Rollback').length,
      0,
      'no rollback without a verified last good',
    );
    await successor.stop();
  });
});
