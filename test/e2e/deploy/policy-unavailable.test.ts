/**
 * `tollgate run` without a policy it can run does not crash-loop (a real process, the
 * real control plane, a real Git server behind a TCP proxy the test takes down and brings
 * back, the harness's tollgate identity):
 * - Git down at start, nothing saved: the replica stays up, /healthz ok, /readyz 503
 *   naming why, no lease taken; Git back: ready, leading, releasing a gated pod;
 *   PolicyUnavailable is on its Lease;
 * - a HEAD that never validated, nothing saved: the same, /readyz naming the file;
 * - a restart while Git is down with the last good policy saved in its cache folder:
 *   ready and acting on the saved commit, tollgate_policy_saved_in_force 1, Event
 *   StartedFromLastGoodPolicy; Git back: the metric returns to 0;
 * - a policy commit refused while running: Warning Event PolicyCommitRefused, the last
 *   good policy keeps running.
 * Waits are counted in /readyz answers, not in wall time.
 *
 * Run: node --test --test-concurrency=1 test/e2e/deploy/policy-unavailable.test.ts
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, EventsV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { startSwitchableProxy, type SwitchableProxy } from '../../support/switchable-proxy.ts';
import { creatable, eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { spawnTollgateRun, type TollgateRunProcess } from '../../support/tollgate-run.ts';

const namespace = runNamespace('unavail');
const gate = 'unavail.tollgate.io/ready';
const work = mkdtempSync(join(tmpdir(), 'tollgate-policy-unavailable-'));

const policyFiles = (): Record<string, string> => ({
  'tollgate.yaml':
    'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nmetadata: { name: settings }\nspec:\n  cluster: unavail\n  audit: { mode: async }\n',
  'tenants/unavail.yaml': `apiVersion: tollgate.io/v1alpha1\nkind: Tenant\nmetadata: { name: unavail }\nspec:\n  namespaces: [${namespace}]\n  gatePrefixes: [unavail.tollgate.io/]\n`,
  'gates/ready.yaml': `apiVersion: tollgate.io/v1alpha1\nkind: GatePolicy\nmetadata: { name: ready }\nspec:\n  tenant: unavail\n  gate: ${gate}\n  conditions: [{ type: Budget }]\n`,
});
const invalid = {
  'gates/ready.yaml': policyFiles()['gates/ready.yaml']!.replace(
    'tenant: unavail',
    'tenant: nobody',
  ),
};

let cp: ControlPlane;
let core: CoreV1Api;
let git: GitServer;
let proxy: SwitchableProxy;
let auditUrl: string;
const children: ChildProcess[] = [];

interface Replica extends TollgateRunProcess {
  readonly lease: string;
}

async function startReplica(
  name: string,
  policyUrl: string,
  cacheDir = join(work, name),
): Promise<Replica> {
  const run = await spawnTollgateRun({
    kubeconfig: cp.tollgateKubeconfig,
    identity: name,
    policy: { url: policyUrl },
    gitToken: { env: 'E2E_GIT_TOKEN' },
    audit: { url: auditUrl },
    cacheDir,
    leaseName: `tollgate-${name}`,
    log: join(work, `${name}.log`),
    env: { PATH: process.env.PATH, E2E_GIT_TOKEN: git.token },
    policyResync: '*/1 * * * * *',
  });
  children.push(run.child);
  return { ...run, lease: `tollgate-${name}` };
}

const readyz = async (r: Replica): Promise<{ status: number; body: string } | undefined> => {
  const response = await fetch(`${r.url}/readyz?verbose`).catch(() => undefined);
  return response ? { status: response.status, body: await response.text() } : undefined;
};
const metric = async (r: Replica, name: string): Promise<number> =>
  Number(
    new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${r.url}/metrics`)).text())?.[1],
  );
const holder = async (lease: string): Promise<string | undefined> =>
  (
    await cp
      .kubeConfig('admin')
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: 'tollgate-system', name: lease })
      .catch(() => undefined)
  )?.spec?.holderIdentity;
const leaseEvents = async (lease: string, reason: string): Promise<string[]> =>
  (
    await cp
      .kubeConfig('admin')
      .makeApiClient(EventsV1Api)
      .listNamespacedEvent({
        namespace: 'tollgate-system',
        fieldSelector: `regarding.name=${lease},reason=${reason}`,
      })
  ).items.map((e) => e.note ?? '');

/** /readyz answers 503 naming `why` this many times in a row, the process alive. */
async function notReadyFor(r: Replica, answers: number, why: RegExp): Promise<string> {
  await eventually('/readyz says why', async () => why.test((await readyz(r))?.body ?? ''), {
    describe: () => readFileSync(r.log, 'utf8').slice(-2000),
  });
  let body = '';
  for (let seen = 0; seen < answers;) {
    assert.equal(
      r.child.exitCode,
      null,
      `the replica is still running:\n${readFileSync(r.log, 'utf8').slice(-2000)}`,
    );
    const answer = await readyz(r);
    if (!answer) continue;
    assert.equal(answer.status, 503, answer.body);
    assert.match(answer.body, why);
    body = answer.body;
    seen += 1;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.equal(
    (await fetch(`${r.url}/healthz`)).status,
    200,
    'alive: the kubelet has no reason to restart it',
  );
  return body;
}

const releasesAGatedPod = async (name: string): Promise<void> => {
  await core.createNamespacedPod({
    namespace,
    body: creatable(aPod(name, namespace).gated(gate).obj()),
  });
  await eventually(
    `${name} released`,
    async () => {
      const pod = await core.readNamespacedPod({ namespace, name });
      return (pod.spec?.schedulingGates ?? []).length === 0;
    },
    { timeoutMs: 30_000 },
  );
};

const ready = (r: Replica) =>
  eventually('ready', async () => (await readyz(r))?.status === 200, {
    timeoutMs: 60_000,
    describe: () => readFileSync(r.log, 'utf8').slice(-2000),
  });

before(async () => {
  cp = await sharedControlPlane();
  core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  git = await startGitServer();
  proxy = await startSwitchableProxy(git.url);
  auditUrl = git.createRepo('audit');
});

after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await proxy?.close();
  await git?.close();
  await removeNamespace(core, namespace);
});

describe('tollgate run without a policy it can run', () => {
  it('Git down at start: up and not ready, no lease; Git back: ready, leading, releasing', async () => {
    const url = git.createRepo('down-at-start');
    await pushTree(git, url, policyFiles(), { message: 'policy' });
    await proxy.down();
    const replica = await startReplica('down-at-start', proxy.via(url));
    await notReadyFor(
      replica,
      5,
      /policy failed: no valid policy: the policy could not be fetched.*no saved policy/,
    );
    assert.equal(await holder(replica.lease), undefined, 'no lease taken without a policy');

    await proxy.up();
    await ready(replica);
    await eventually('leading', async () => (await holder(replica.lease)) === 'down-at-start');
    await releasesAGatedPod('after-git-back');
    await eventually('PolicyUnavailable on the Lease', async () =>
      (await leaseEvents(replica.lease, 'PolicyUnavailable')).some((n) =>
        /could not be fetched/.test(n),
      ),
    );
    replica.child.kill('SIGTERM');
    assert.equal(await new Promise((r) => replica.child.once('exit', r)), 0);
  });

  it('a HEAD that never validated: up and not ready, the file named; a valid commit makes it ready', async () => {
    const url = git.createRepo('never-valid');
    await pushTree(
      git,
      url,
      { ...policyFiles(), ...invalid },
      { message: 'a gate policy of an unknown tenant' },
    );
    const replica = await startReplica('never-valid', proxy.via(url));
    await notReadyFor(
      replica,
      5,
      /no valid policy: policy commit \w+ is invalid: gates\/ready\.yaml/,
    );
    assert.equal(await holder(replica.lease), undefined);
    await pushTree(git, url, policyFiles(), { message: 'fixed' });
    await ready(replica);
    replica.child.kill('SIGTERM');
    assert.equal(await new Promise((r) => replica.child.once('exit', r)), 0);
  });

  it('a restart while Git is down runs the saved last good policy and says so; a refused commit is an Event', async () => {
    const url = git.createRepo('saved');
    await pushTree(git, url, policyFiles(), { message: 'policy' });
    const cache = join(work, 'saved-cache');
    const before = await startReplica('saved-a', proxy.via(url), cache);
    await ready(before);
    before.child.kill('SIGTERM');
    assert.equal(await new Promise((r) => before.child.once('exit', r)), 0);

    await proxy.down();
    const restarted = await startReplica('saved-b', proxy.via(url), cache);
    await ready(restarted);
    assert.equal(await metric(restarted, 'tollgate_policy_saved_in_force'), 1);
    await eventually('leading', async () => (await holder(restarted.lease)) === 'saved-b');
    await releasesAGatedPod('from-saved');
    await eventually('StartedFromLastGoodPolicy on the Lease', async () =>
      (await leaseEvents(restarted.lease, 'StartedFromLastGoodPolicy')).some((n) =>
        /saved last good policy/.test(n),
      ),
    );

    await proxy.up();
    await pushTree(git, url, invalid, { message: 'break it' });
    await eventually('PolicyCommitRefused on the Lease', async () =>
      (await leaseEvents(restarted.lease, 'PolicyCommitRefused')).some((n) =>
        /gates\/ready\.yaml.*last good policy stays in force/.test(n),
      ),
    );
    assert.equal(await metric(restarted, 'tollgate_policy_head_invalid'), 1);
    assert.equal((await readyz(restarted))?.status, 200, 'the last good policy keeps running');
    restarted.child.kill('SIGTERM');
  });
});
