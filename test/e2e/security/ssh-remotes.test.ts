/**
 * SSH deploy keys for the policy (read) and audit (write) repositories, against a real
 * SSH server (ssh2) running the real git-upload-pack / git-receive-pack, reached by the
 * system git and ssh exactly as `tollgate run` reaches a forge:
 * - `tollgate run` on the real control plane reads its policy over ssh:// with a read
 *   key and pushes its audit commits with a separate write key (ssh:// URLs: the
 *   loopback server listens on a free port, which the scp-like form cannot name);
 * - a key the server does not accept is refused with an error naming its flag, and the
 *   same key file rotated in place (a Secret update) is used at the next fetch;
 * - a server whose host key is not the one in known_hosts is refused before any key is
 *   offered;
 * - a key file that is missing is named with its flag;
 * - key files that disappear while `tollgate run` runs (a Secret unmounted) are counted
 *   (policy fetch errors; audit push failures, reason auth: the metrics the
 *   TollgatePolicyFetchStale and TollgateAuditPushFailing alerts read) and named with
 *   their flags in the log; no release is sent without its pushed record; back in place,
 *   tollgate recovers by itself;
 * - nothing of either private key appears in the run's log.
 * Progress is proven by what the servers counted and what the branch holds, never by
 * elapsed time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync,
  copyFileSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { creatable, eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import {
  commitFiles,
  makeSshKey,
  startSshGitServer,
  type SshGitServer,
  type SshKeyPair,
} from '../../support/ssh-git-server.ts';
import { aPod } from '../../builders/pod.ts';
import { runPolicy, startTollgateRun, type RunProcess } from './support.ts';
import { PolicySource } from '../../../src/policy/source.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { aDecision } from '../../builders/decision.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { SshAccess } from '../../../src/policy/git-ssh.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const gate = 'ssh.tollgate.io/ready';
const branch = 'tollgate/audit';
const work = mkdtempSync(join(tmpdir(), 'tollgate-ssh-remotes-'));
const namespace = runNamespace('ssh-remotes');

let server: SshGitServer;
let readKey: SshKeyPair;
let writeKey: SshKeyPair;
let strangerKey: SshKeyPair;
let knownHosts: string;
let cp: ControlPlane | undefined;
let core: CoreV1Api | undefined;
let run: RunProcess | undefined;

before(async () => {
  readKey = makeSshKey(work, 'policy-read-key');
  writeKey = makeSshKey(work, 'audit-write-key');
  strangerKey = makeSshKey(work, 'stranger-key');
  server = await startSshGitServer({ allowedKeys: [readKey.publicKey, writeKey.publicKey] });
  knownHosts = join(work, 'known_hosts');
  writeFileSync(knownHosts, `${server.knownHostsLine}\n`);
});

after(async () => {
  if (run?.child.exitCode === null) run.child.kill('SIGKILL');
  if (core) await removeNamespace(core, namespace);
  await server?.close();
});

function access(key: SshKeyPair, hosts = knownHosts): SshAccess {
  return { keyFile: key.privateFile, keyFlag: '--git-ssh-key-file', knownHostsFile: hosts };
}

/** A policy repository on the SSH server holding a valid policy; its URL and commit. */
function policyRepo(name: string): { url: string; commit: string } {
  const url = server.createRepo(name);
  const commit = commitFiles(server.repoPath(url), runPolicy({ namespace, gate }));
  return { url, commit };
}

function sourceWith(url: string, ssh: SshAccess): PolicySource {
  return new PolicySource({
    location: url,
    ssh,
    cacheDir: mkdtempSync(join(work, 'cache-')),
    timers: new ManualTimers(),
    parseOn: 'caller',
  });
}

/** The names of pods whose release the audit branch records as succeeded. */
async function releasedOnBranch(bareRepo: string): Promise<Set<string>> {
  const source = await openAuditSource(bareRepo, branch);
  try {
    return new Set(
      (await readAuditHistory(source))
        .flatMap((commit) => commit.records)
        .filter((r) => r.kind === 'Release' && r.outcome.result === 'succeeded')
        .map((r) => r.target.name),
    );
  } finally {
    source.close();
  }
}

test('tollgate run reads its policy over SSH with a read key and pushes audit commits over SSH with a write key; neither key reaches the log', async () => {
  cp = await sharedControlPlane();
  core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  const policy = policyRepo('run-policy');
  const auditUrl = server.createRepo('run-audit');
  run = await startTollgateRun({
    kubeconfig: cp.tollgateKubeconfig,
    work,
    policy: { url: policy.url },
    audit: { url: auditUrl },
    leaseName: `tollgate-${namespace}`,
    args: [
      ...['--git-ssh-key-file', readKey.privateFile],
      ...['--audit-ssh-key-file', writeKey.privateFile],
      ...['--git-ssh-known-hosts', knownHosts],
    ],
  });
  const names = ['ssh-0', 'ssh-1', 'ssh-2'];
  for (const name of names)
    await core.createNamespacedPod({
      namespace,
      body: creatable(aPod(name, namespace).gated(gate).requests({ cpu: '10m' }).obj()),
    });
  let released = new Set<string>();
  await eventually(
    'the three releases recorded on the audit branch pushed over SSH',
    async () => {
      released = await releasedOnBranch(server.repoPath(auditUrl));
      return names.every((name) => released.has(name));
    },
    {
      timeoutMs: 120_000,
      intervalMs: 500,
      describe: () =>
        `released ${[...released].join(', ')}; log: ${readFileSync(run!.log, 'utf8').slice(-1500)}`,
    },
  );
  const metrics = await (await fetch(run.metrics)).text();
  assert.ok(metrics.includes(`sha="${policy.commit}"`), 'the policy in force is the SSH commit');
  assert.ok(server.receivePacks >= 1, 'the audit commits went through git-receive-pack');
  run.child.kill('SIGTERM');
  await new Promise((done) => run!.child.once('exit', done));

  const log = readFileSync(run.log, 'utf8');
  for (const key of [readKey, writeKey]) {
    const body = readFileSync(key.privateFile, 'utf8')
      .split('\n')
      .filter((line) => line && !line.startsWith('-----'));
    assert.ok(body.length > 0);
    for (const line of body)
      assert.equal(log.includes(line), false, 'a private key line in the log');
  }
});

test('a deploy key the server does not accept is refused, the error naming the key flag; the rotated key file is used at the next fetch', async () => {
  const policy = policyRepo('wrong-key-policy');
  const refusedBefore = server.refusedAuth;
  // The mounted key file holds a key the server does not accept, then is rotated in place.
  const mounted = join(mkdtempSync(join(work, 'mounted-')), 'deploy-key');
  copyFileSync(strangerKey.privateFile, mounted);
  chmodSync(mounted, 0o600);
  const source = sourceWith(policy.url, { ...access(strangerKey), keyFile: mounted });
  const outcome = await source.poll();
  assert.equal(outcome.kind, 'fetch-failed');
  if (outcome.kind !== 'fetch-failed') return;
  assert.equal(outcome.error.kind, 'auth');
  assert.match(outcome.error.message, /refused the SSH key .*deploy-key \(--git-ssh-key-file\)/);
  assert.ok(server.refusedAuth > refusedBefore, 'the server saw and refused the key');
  copyFileSync(readKey.privateFile, mounted);
  assert.deepEqual(await source.poll(), { kind: 'applied', commit: policy.commit });

  // The same key as the audit's write key: a strict intent is not pushed, nothing lands.
  const pushesBefore = server.receivePacks;
  const { writer } = await GitAuditWriter.open({
    url: server.createRepo('wrong-key-audit'),
    ssh: { ...access(strangerKey), keyFlag: '--audit-ssh-key-file' },
    cacheDir: mkdtempSync(join(work, 'writer-')),
    cluster: 'c',
    controller: 'tollgate-test',
    batch: { maxDecisions: 1, maxDelayMs: 10 },
    retry: { maxAttempts: 1 },
  });
  await assert.rejects(
    writer.recordIntents([aDecision('Release', 'p', 'ns').obj()]),
    /intents not pushed .*refused the SSH key .*stranger-key \(--audit-ssh-key-file\)/,
  );
  await writer.close({ flush: false });
  assert.equal(server.receivePacks, pushesBefore, 'no push reached git-receive-pack');
});

test('a server whose host key is not the one in known_hosts is refused', async () => {
  const policy = policyRepo('host-key-policy');
  // known_hosts names this host:port with another key: what a changed (or spoofed) host key looks like.
  const other = makeSshKey(mkdtempSync(join(work, 'other-host-')), 'other_host_key');
  const changed = join(work, 'known_hosts_changed');
  writeFileSync(
    changed,
    `[127.0.0.1]:${server.port} ${other.publicKey.split(' ').slice(0, 2).join(' ')}\n`,
  );
  const uploadsBefore = server.uploadPacks;
  const outcome = await sourceWith(policy.url, access(readKey, changed)).poll();
  assert.equal(outcome.kind, 'fetch-failed');
  if (outcome.kind !== 'fetch-failed') return;
  assert.equal(outcome.error.kind, 'auth');
  assert.match(
    outcome.error.message,
    /host key is not the one in .*known_hosts_changed \(--git-ssh-known-hosts\)/,
  );
  assert.equal(server.uploadPacks, uploadsBefore, 'no git command ran on the server');

  // The audit push too: refused before anything is sent.
  const repo = new AuditRepo({
    dir: mkdtempSync(join(work, 'audit-clone-')),
    url: server.createRepo('host-key-audit'),
    branch,
    ssh: access(writeKey, changed),
    author: { name: 'tollgate', email: 'tollgate@example.invalid' },
  });
  await repo.open();
  await assert.rejects(repo.fetch(), /host key is not the one in/);

  // With the right known_hosts the same key reads the policy.
  assert.deepEqual(await sourceWith(policy.url, access(readKey)).poll(), {
    kind: 'applied',
    commit: policy.commit,
  });
});

test('a deploy key file that is missing is named with its flag, and nothing is attempted', async () => {
  const policy = policyRepo('missing-key-policy');
  const uploadsBefore = server.uploadPacks;
  const missing = { ...access(readKey), keyFile: join(work, 'no-such-key') };
  const outcome = await sourceWith(policy.url, missing).poll();
  assert.equal(outcome.kind, 'fetch-failed');
  if (outcome.kind !== 'fetch-failed') return;
  assert.match(
    outcome.error.message,
    /cannot read the SSH key file .*no-such-key \(--git-ssh-key-file\): ENOENT/,
  );
  assert.equal(server.uploadPacks, uploadsBefore);
});

/** A counter's value in a /metrics text (0 when absent). */
function counter(metrics: string, series: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

test('deploy keys that disappear while tollgate runs are counted and named with their flags; nothing is released unrecorded; back in place, tollgate recovers', async () => {
  cp ??= await sharedControlPlane();
  core ??= cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  const ns = runNamespace('ssh-gone');
  await core.createNamespace({ body: { metadata: { name: ns } } });
  const runWork = mkdtempSync(join(work, 'gone-'));
  const mounted = { read: join(runWork, 'read-key'), write: join(runWork, 'write-key') };
  copyFileSync(readKey.privateFile, mounted.read);
  copyFileSync(writeKey.privateFile, mounted.write);
  chmodSync(mounted.read, 0o600);
  chmodSync(mounted.write, 0o600);
  const policyUrl = server.createRepo('gone-policy');
  commitFiles(server.repoPath(policyUrl), runPolicy({ namespace: ns, gate }));
  const auditUrl = server.createRepo('gone-audit');
  const gone = await startTollgateRun({
    kubeconfig: cp.tollgateKubeconfig,
    work: runWork,
    policy: { url: policyUrl },
    audit: { url: auditUrl },
    leaseName: `tollgate-${ns}`,
    args: [
      ...['--git-ssh-key-file', mounted.read],
      ...['--audit-ssh-key-file', mounted.write],
      ...['--git-ssh-known-hosts', knownHosts],
    ],
  });
  try {
    const log = (): string => readFileSync(gone.log, 'utf8');
    for (const file of Object.values(mounted)) renameSync(file, `${file}.away`);
    await core.createNamespacedPod({
      namespace: ns,
      body: creatable(aPod('while-gone', ns).gated(gate).requests({ cpu: '10m' }).obj()),
    });
    let metrics = '';
    await eventually(
      'both missing keys counted and named with their flags',
      async () => {
        metrics = await (await fetch(gone.metrics)).text();
        return (
          counter(metrics, 'tollgate_audit_push_failures_total{reason="auth"}') > 0 &&
          counter(metrics, 'tollgate_policy_load_errors_total{reason="fetch"}') > 0 &&
          /cannot read the SSH key file [^ ]*write-key \(--audit-ssh-key-file\): ENOENT/.test(
            log(),
          ) &&
          /cannot read the SSH key file [^ ]*read-key \(--git-ssh-key-file\): ENOENT/.test(log())
        );
      },
      { timeoutMs: 120_000, intervalMs: 500, describe: () => `${metrics}\n${log().slice(-1500)}` },
    );
    const held = await core.readNamespacedPod({ namespace: ns, name: 'while-gone' });
    assert.equal(held.spec?.schedulingGates?.length, 1, 'not released without its pushed record');

    for (const file of Object.values(mounted)) renameSync(`${file}.away`, file);
    let released = new Set<string>();
    await eventually(
      'the release recorded on the branch once the keys are back',
      async () => {
        released = await releasedOnBranch(server.repoPath(auditUrl));
        return released.has('while-gone');
      },
      { timeoutMs: 120_000, intervalMs: 500, describe: () => log().slice(-1500) },
    );
    const pod = await core.readNamespacedPod({ namespace: ns, name: 'while-gone' });
    assert.equal((pod.spec?.schedulingGates ?? []).length, 0, 'released');
    const next = commitFiles(server.repoPath(policyUrl), runPolicy({ namespace: ns, gate }), {
      message: 'after the keys came back',
    });
    await eventually(
      'a policy commit pushed after the keys came back is fetched over SSH and in force',
      async () => (await (await fetch(gone.metrics)).text()).includes(`sha="${next}"`),
      { timeoutMs: 60_000, intervalMs: 500, describe: () => log().slice(-1500) },
    );
  } finally {
    gone.child.kill('SIGTERM');
    await gone.exited;
    await removeNamespace(core, ns);
  }
});
