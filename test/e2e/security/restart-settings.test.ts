/**
 * A policy commit that changes a setting read only at start (here settings.audit.mode,
 * strict to async) is refused loudly by a real `tollgate run`: a warning in the log,
 * `tollgate_policy_restart_required` at 1, and a Warning Event (events.k8s.io/v1)
 * regarding tollgate's Lease in its own namespace, naming the setting, so
 * `kubectl events -n tollgate-system` shows it next to the leader election.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, EventsV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { pushTree } from '../../support/git-server.ts';
import { eventually, runNamespace } from '../../support/eventually.ts';
import { gitServerForFile, runPolicy, startTollgateRun, type RunProcess } from './support.ts';

const git = gitServerForFile('tollgate-restart-settings-');
const namespace = runNamespace('restart-settings');
const gate = 'restart.tollgate.io/ready';
const leaseName = `tollgate-${namespace}`;
let cp: ControlPlane;
let run: RunProcess | undefined;

before(async () => {
  cp = await sharedControlPlane();
});
after(() => {
  if (run?.child.exitCode === null) run.child.kill('SIGKILL');
});

test('a commit changing settings.audit.mode is refused with a log line, a metric and an Event on the Lease', async () => {
  const server = git.server();
  const work = mkdtempSync(join(tmpdir(), 'tollgate-restart-settings-run-'));
  const tokenFile = join(work, 'token');
  writeFileSync(tokenFile, server.token);
  const policyUrl = server.createRepo('policy');
  await pushTree(server, policyUrl, runPolicy({ namespace, gate, auditMode: 'strict' }));
  run = await startTollgateRun({
    kubeconfig: cp.tollgateKubeconfig,
    work,
    policy: { url: policyUrl, tokenFile },
    audit: { url: policyUrl, tokenFile },
    leaseName,
  });
  const leases = cp.kubeConfig('admin').makeApiClient(CoordinationV1Api);
  await eventually('the run leads', async () => {
    const lease = await leases.readNamespacedLease({
      namespace: 'tollgate-system',
      name: leaseName,
    });
    return lease.spec?.holderIdentity === leaseName;
  });

  const changed = await pushTree(
    server,
    policyUrl,
    runPolicy({ namespace, gate, auditMode: 'async' }),
  );
  const events = cp.kubeConfig('admin').makeApiClient(EventsV1Api);
  const event = await eventually(
    'a RestartRequired Event regarding the Lease',
    async () =>
      (await events.listNamespacedEvent({ namespace: 'tollgate-system' })).items.find(
        (e) => e.reason === 'RestartRequired' && e.regarding?.name === leaseName,
      ),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  assert.equal(event.type, 'Warning');
  assert.equal(event.regarding?.kind, 'Lease');
  assert.equal(event.regarding?.apiVersion, 'coordination.k8s.io/v1');
  assert.match(event.note ?? '', /settings\.audit\.mode: strict in force, async in Git/);
  assert.match(event.note ?? '', new RegExp(changed.slice(0, 12)));

  const metrics = await (await fetch(run.metrics)).text();
  assert.match(metrics, /^tollgate_policy_restart_required 1$/m);
  assert.match(readFileSync(run.log, 'utf8'), /take effect only at restart/);
});
