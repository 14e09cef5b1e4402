/**
 * Neither Git credential leaks, across a real `tollgate run` process on the real control
 * plane with separate read (policy) and write (audit) tokens as files, each on its own
 * real Git server, through:
 * - a push race: a second writer (another cluster's audit writer) pushes to the audit
 *   branch, so tollgate's next push is rejected and rebuilt on the new tip;
 * - a failed push: the audit server refuses every push for a while;
 * - a rotation of both tokens: each server accepts only its new token; tollgate is
 *   refused with the old ones until both files are rewritten, then carries on.
 * Afterwards every log line, the metrics, every Event, every pod, the audit branch (every
 * object, via the git CLI) and tollgate's local clones (every file byte-scanned, every
 * object decompressed by `git cat-file`) are searched for the four tokens: none may appear.
 * Progress is proven by counts (refusals seen by the servers, push failures by reason),
 * never by elapsed time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, EventsV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { creatable, eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { aDecision } from '../../builders/decision.ts';
import { runPolicy, startTollgateRun, type RunProcess } from './support.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';

const gate = 'leak.tollgate.io/ready';
const branch = 'tollgate/audit';
const work = mkdtempSync(join(tmpdir(), 'tollgate-token-leaks-'));
const namespace = runNamespace('token-leaks');

let cp: ControlPlane;
let core: CoreV1Api;
let policyGit: GitServer;
let auditGit: GitServer;
let run: RunProcess | undefined;

const tokens = {
  policyOld: `policy-old-${randomWord()}`,
  policyNew: `policy-new-${randomWord()}`,
  auditOld: `audit-old-${randomWord()}`,
  auditNew: `audit-new-${randomWord()}`,
};
const policyTokenFile = join(work, 'policy-token');
const auditTokenFile = join(work, 'audit-token');
const cacheDir = join(work, 'cache');

function randomWord(): string {
  return Math.random().toString(36).slice(2, 12);
}

function policyFiles(revision: number): Record<string, string> {
  return runPolicy({ namespace, gate, priority: revision });
}

before(async () => {
  cp = await sharedControlPlane();
  core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  policyGit = await startGitServer({ token: tokens.policyOld });
  auditGit = await startGitServer({ token: tokens.auditOld });
  writeFileSync(policyTokenFile, `${tokens.policyOld}\n`);
  writeFileSync(auditTokenFile, `${tokens.auditOld}\n`);
});

after(async () => {
  if (run?.child.exitCode === null) run.child.kill('SIGKILL');
  await removeNamespace(core, namespace);
  await policyGit?.close();
  await auditGit?.close();
});

function startRun(policyUrl: string, auditUrl: string): Promise<RunProcess> {
  return startTollgateRun({
    kubeconfig: cp.tollgateKubeconfig,
    work,
    policy: { url: policyUrl, tokenFile: policyTokenFile },
    audit: { url: auditUrl, tokenFile: auditTokenFile },
    leaseName: `tollgate-${namespace}`,
  });
}

async function createGatedPods(prefix: string, count: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  for (const name of names)
    await core.createNamespacedPod({
      namespace,
      body: creatable(aPod(name, namespace).gated(gate).requests({ cpu: '10m' }).obj()),
    });
  return names;
}

/** Waits until every named pod's release is recorded as succeeded on the audit branch. */
async function releasesRecorded(auditUrl: string, names: readonly string[]): Promise<void> {
  const missing = (): Promise<string[]> =>
    (async () => {
      const source = await openAuditSource(auditUrl, branch, { token: auditGit.token });
      try {
        const released = new Set(
          (await readAuditHistory(source))
            .flatMap((commit) => commit.records)
            .filter((r) => r.kind === 'Release' && r.outcome.result === 'succeeded')
            .map((r) => r.target.name),
        );
        return names.filter((name) => !released.has(name));
      } finally {
        source.close();
      }
    })();
  let last: string[] = [...names];
  await eventually(
    `releases of ${names.join(', ')} recorded`,
    async () => (last = await missing()).length === 0,
    { timeoutMs: 90_000, intervalMs: 300, describe: () => `missing ${last.join(', ')}` },
  );
}

async function pushFailures(reason: string): Promise<number> {
  const text = await (await fetch(run!.metrics)).text();
  const line = new RegExp(
    `^tollgate_audit_push_failures_total\\{reason="${reason}"\\} (\\S+)$`,
    'm',
  );
  return Number(line.exec(text)?.[1] ?? 0);
}

/** Another cluster's audit writer pushes one record to the shared branch. */
async function pushFromAnotherWriter(auditUrl: string): Promise<void> {
  const { writer } = await GitAuditWriter.open({
    url: auditUrl,
    token: auditGit.token,
    cacheDir: mkdtempSync(join(work, 'other-writer-')),
    cluster: 'other-cluster',
    controller: 'tollgate-other',
    batch: { maxDecisions: 1, maxDelayMs: 10 },
  });
  await writer.recordIntents([aDecision('Release', 'other-pod', 'other-ns').obj()]);
  await writer.close();
}

test('neither token appears in any log line, metric, Event, pod, audit record or local clone across a push race, a failed push and a rotation of both', async () => {
  const policyUrl = policyGit.createRepo('policy');
  const auditUrl = auditGit.createRepo('audit');
  await pushTree(policyGit, policyUrl, policyFiles(1), { message: 'policy v1' });
  run = await startRun(policyUrl, auditUrl);

  await releasesRecorded(auditUrl, await createGatedPods('first', 3));

  // A push race: the branch moves under tollgate; its next push is rejected and rebuilt.
  const rejectedBefore = await pushFailures('rejected');
  await pushFromAnotherWriter(auditUrl);
  await releasesRecorded(auditUrl, await createGatedPods('race', 3));
  assert.ok((await pushFailures('rejected')) > rejectedBefore, 'tollgate lost a push race');

  // A failed push: the server refuses pushes until it has refused two.
  auditGit.refusePushes(503);
  const refused = createGatedPods('refused', 3);
  await eventually('two pushes refused', async () => auditGit.refusedPushes >= 2, {
    timeoutMs: 60_000,
  });
  auditGit.refusePushes(undefined);
  await releasesRecorded(auditUrl, await refused);
  assert.ok((await pushFailures('http')) >= 1, 'the refused pushes were counted');

  // A rotation of both tokens: the old ones are refused until both files are rewritten.
  const policyRefusals = policyGit.unauthorized;
  const auditRefusals = auditGit.unauthorized;
  policyGit.rotateToken(tokens.policyNew);
  auditGit.rotateToken(tokens.auditNew);
  const v2 = await pushTree(policyGit, policyUrl, policyFiles(2), { message: 'policy v2' });
  const rotated = createGatedPods('rotated', 3);
  await eventually(
    'the old tokens refused by both servers',
    async () => policyGit.unauthorized > policyRefusals && auditGit.unauthorized > auditRefusals,
    { timeoutMs: 60_000 },
  );
  writeFileSync(policyTokenFile, `${tokens.policyNew}\n`);
  writeFileSync(auditTokenFile, `${tokens.auditNew}\n`);
  await releasesRecorded(auditUrl, await rotated);
  await eventually(
    'policy v2 in force (fetched with the new token)',
    async () => (await (await fetch(run!.metrics)).text()).includes(`sha="${v2}"`),
    { timeoutMs: 60_000 },
  );

  const metricsText = await (await fetch(run.metrics)).text();
  run.child.kill('SIGTERM');
  await new Promise((r) => run!.child.once('exit', r));

  const places = await everyPlaceATokenCouldBe(metricsText, auditUrl);
  const leaks = places.flatMap(({ where, text }) =>
    Object.entries(tokens)
      .filter(([, token]) => text.includes(token))
      .map(([name]) => `${name} in ${where}`),
  );
  assert.deepEqual(leaks, []);
  // The search covered the places that matter: logs with the refusals, both clones, Events.
  const searched = places.map((p) => p.where);
  for (const expected of ['run log', 'Events', 'audit branch objects', 'clone objects policy']) {
    assert.ok(
      searched.some((where) => where.startsWith(expected)),
      `${expected} searched: ${searched}`,
    );
  }
  assert.match(readFileSync(run.log, 'utf8'), /audit push failed/);
});

/** Everything a token could leak into, as text: what tollgate wrote, kept, or pushed. */
async function everyPlaceATokenCouldBe(
  metricsText: string,
  auditUrl: string,
): Promise<{ where: string; text: string }[]> {
  const places = [
    { where: 'run log', text: readFileSync(run!.log, 'utf8') },
    { where: 'metrics', text: metricsText },
    { where: 'Events', text: JSON.stringify(await eventsEverywhere()) },
    { where: 'pods', text: JSON.stringify(await core.listNamespacedPod({ namespace })) },
  ];
  const branchClone = join(work, 'audit-branch');
  // Async: the Git server runs in this process.
  await git([
    'clone',
    '--quiet',
    '--mirror',
    auditUrl.replace('http://', `http://x:${auditGit.token}@`),
    branchClone,
  ]);
  await git(['-C', branchClone, 'remote', 'remove', 'origin']);
  places.push({ where: 'audit branch objects', text: await allObjects(branchClone) });
  for (const dir of bareRepos(cacheDir)) {
    places.push({ where: `clone objects ${dir.name}`, text: await allObjects(dir.path) });
  }
  for (const file of filesUnder(cacheDir)) {
    places.push({ where: `clone file ${file}`, text: readFileSync(file).toString('latin1') });
  }
  return places;
}

async function eventsEverywhere(): Promise<unknown[]> {
  const events = cp.kubeConfig('admin').makeApiClient(EventsV1Api);
  return (await events.listEventForAllNamespaces()).items;
}

/** Every object of a repository, decompressed (`git cat-file --batch-all-objects`). */
function allObjects(gitdir: string): Promise<string> {
  return git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch', '--unordered']);
}

async function git(args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)('git', args, {
    encoding: 'latin1',
    maxBuffer: 512 * 1024 * 1024,
  });
  return stdout;
}

function bareRepos(root: string): { name: string; path: string }[] {
  return filesUnder(root)
    .filter(
      (file) => file.endsWith('/HEAD') && !file.includes('/refs/') && !file.includes('/logs/'),
    )
    .map((head) => head.slice(0, -'/HEAD'.length))
    .map((path) => ({ name: path.slice(root.length + 1), path }));
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}
