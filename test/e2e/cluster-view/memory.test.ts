/**
 * Memory per pod held by an informer, trimmed vs untrimmed, with 5,000 real pods
 * from kube-apiserver. Prints the figures; asserts only that trimming saves memory.
 * Slow (creates 5,000 pods): run on its own.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';

const namespace = 'view-memory';
const podCount = Number(process.env.TOLLGATE_MEMORY_PODS ?? 5000);
// TOLLGATE_MEMORY_LAST_APPLIED=0: pods as a controller creates them (no kubectl apply annotation).
const withLastApplied = process.env.TOLLGATE_MEMORY_LAST_APPLIED !== '0';
let cp: ControlPlane;

function realisticPod(i: number): V1Pod {
  const spec = {
    schedulingGates: [{ name: 'tollgate.io/gate' }],
    containers: ['app', 'sidecar'].map((name) => ({
      name,
      image: `registry.example.com/team/${name}:1.2.${i % 7}`,
      env: [
        { name: 'LOG_LEVEL', value: 'info' },
        { name: 'REGION', value: 'eu-west-1' },
      ],
      ports: [{ containerPort: 8080, name: 'http' }],
      resources: {
        requests: { cpu: '100m', memory: '128Mi' },
        limits: { cpu: '500m', memory: '256Mi' },
      },
    })),
  };
  const metadata = {
    name: `pod-${i}`,
    labels: { app: `app-${i % 50}`, team: 'payments', 'pod-template-hash': 'abc123' },
  };
  return {
    metadata: {
      ...metadata,
      // What `kubectl apply` leaves behind: the whole manifest again.
      annotations: withLastApplied
        ? {
            'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({
              apiVersion: 'v1',
              kind: 'Pod',
              metadata,
              spec,
            }),
          }
        : { 'example.com/owner': 'payments' },
    },
    spec,
  };
}

before(async () => {
  cp = await sharedControlPlane();
  const admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < podCount) {
        const i = next++;
        await admin.createNamespacedPod({ namespace, body: realisticPod(i) }, undefined);
      }
    }),
  );
});

const probe = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));

function heldBytes(mode: 'trim' | 'whole'): { perPod: number; count: number } {
  const output = execFileSync(process.execPath, [probe, cp.tollgateKubeconfig, namespace, mode], {
    encoding: 'utf8',
  });
  return JSON.parse(output.trim().split('\n').pop() ?? '{}') as { perPod: number; count: number };
}

test(`memory per pod held: trimmed vs untrimmed (${podCount} pods)`, async () => {
  const untrimmedPerPod = heldBytes('whole').perPod;
  const trimmed = heldBytes('trim');
  console.log(
    `informer memory with ${trimmed.count} pods (${withLastApplied ? 'with' : 'without'} last-applied annotation): trimmed ${(trimmed.perPod / 1024).toFixed(2)} KiB/pod, untrimmed ${(untrimmedPerPod / 1024).toFixed(2)} KiB/pod (${((1 - trimmed.perPod / untrimmedPerPod) * 100).toFixed(0)}% saved)`,
  );
  assert.equal(trimmed.count, podCount);
  assert.ok(trimmed.perPod < untrimmedPerPod, 'trimming must reduce memory');
});
