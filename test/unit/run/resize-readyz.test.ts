/**
 * /readyz?verbose says per ResizePolicy what its resizes can do on the cluster's nodes;
 * it never makes the replica unready (one policy's needs must not stop the others).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runChecks } from '../../../src/observe/http.ts';
import { readinessChecks } from '../../../src/run/observe.ts';
import type { V1Node } from '@kubernetes/client-node';
import { aPolicy } from '../../builders/policy.ts';
import { aNode, aResizePolicy } from '../../builders/resize.ts';

const old = {
  metadata: { name: 'old' },
  status: { allocatable: { cpu: '4', memory: '8Gi' }, nodeInfo: { kubeletVersion: 'v1.32.9' } },
};
const nodes = [aNode('new', '8', '16Gi'), old] as unknown as V1Node[];

test('/readyz?verbose: one detail line of resize support, ready either way', () => {
  const policy = { ...aPolicy().obj(), resizePolicies: [aResizePolicy()] };
  const checks = readinessChecks({
    policies: { current: () => policy },
    view: { synced: true, nodes: () => nodes },
  });
  const verbose = runChecks(checks, true);
  assert.equal(verbose.ok, true, 'a node without in-place resize does not make tollgate unready');
  assert.match(
    verbose.body,
    /\[\+\] resize-features ok: web-resize: container resize: 1 of 2 nodes \(not old: kubelet v1\.32\.9 has no in-place resize, 1\.33 or later needed\)/,
  );
  assert.doesNotMatch(runChecks(checks, false).body, /resize-features/, 'quiet unless verbose');
});

test('/readyz: no resize line without ResizePolicies', () => {
  const checks = readinessChecks({
    policies: { current: () => aPolicy().obj() },
    view: { synced: true, nodes: () => nodes },
  });
  assert.doesNotMatch(runChecks(checks, true).body, /resize-features/);
});
