/**
 * `tollgate audit log | show | verify` as a user runs them: the CLI in its own
 * process, reading the audit branch over HTTP from the real git server, and `verify
 * --kubeconfig` listing pods on the real kube-apiserver.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';

const root = new URL('../../../', import.meta.url).pathname;
const namespace = 'audit-cli';
let server: GitServer;
let cp: ControlPlane;

before(async () => {
  server = await startGitServer();
  cp = await sharedControlPlane();
});
after(async () => {
  await server.close();
});

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['src/cli/main.ts', 'audit', ...args],
      { cwd: root, env: { ...process.env, TOLLGATE_GIT_TOKEN: server.token } },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number((error as { code?: number }).code ?? 2) : 0,
          stdout,
          stderr,
        }),
    );
  });
}

async function createPod(name: string, gates: string[]): Promise<V1Pod> {
  const core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  return core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, namespace },
      spec: {
        containers: [{ name: 'app', image: 'registry.example/app:1' }],
        ...(gates.length > 0 ? { schedulingGates: gates.map((gate) => ({ name: gate })) } : {}),
      },
    },
  });
}

const about = (kind: Decision['kind'], pod: V1Pod) =>
  aDecision(kind, pod.metadata?.name as string, namespace)
    .uid(pod.metadata?.uid as string)
    .obj();

describe('tollgate audit CLI', () => {
  it('log, show and verify (text and json, exit codes) against a real trail and cluster', async () => {
    const core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(() => undefined);
    const released = await createPod('released', []);
    const sneaky = await createPod('sneaky', []);
    const waiting = await createPod('waiting', ['tollgate.io/budget']);

    const url = server.createRepo('cli');
    const { writer } = await GitAuditWriter.open({
      url,
      token: server.token,
      cacheDir: mkdtempSync(join(tmpdir(), 'tollgate-audit-cli-')),
      cluster: 'cli',
      controller: 'tollgate-0',
      batch: { maxDecisions: 100, maxDelayMs: 10 },
    });
    const release = about('Release', released);
    await writer.recordIntents([release]);
    writer.record([outcomeOf(release), about('Hold', sneaky), about('Hold', waiting)]);
    await writer.flush();

    const log = await cli(
      'log',
      '--repo',
      url,
      '--pod',
      `${namespace}/released`,
      '--output',
      'json',
    );
    assert.equal(log.code, 0, log.stderr);
    const entries = JSON.parse(log.stdout) as {
      commit: string;
      records: { phase: string; kind: string }[];
    }[];
    assert.deepEqual(
      entries.map((entry) => entry.records.map((record) => `${record.phase} ${record.kind}`)),
      [['intent Release'], ['outcome Release']],
    );
    const text = await cli('log', '--repo', url, '--kind', 'Hold');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /hold 2 pods in audit-cli\n.*record {2}Hold .*audit-cli\/sneaky/s);
    assert.doesNotMatch(text.stdout, /Release/);

    const show = await cli(
      'show',
      (entries[0] as { commit: string }).commit.slice(0, 10),
      '--repo',
      url,
    );
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /Tollgate-Batch: intents/);
    assert.match(
      show.stdout,
      /added audit\/cli\/\d{4}\/\d{2}\/\d{2}\/\d{2}\/T\d{6}Z-tollgate-0-000001\.jsonl/,
    );

    const failing = await cli('verify', '--repo', url, '--kubeconfig', cp.adminKubeconfig);
    assert.equal(failing.code, 1, failing.stdout + failing.stderr);
    assert.match(
      failing.stdout,
      /FAILED: 3 commits, 4 records, 1 intents, 1 outcomes, 2 released pods checked/,
    );
    assert.match(
      failing.stdout,
      /\[released-pod\] pod audit-cli\/sneaky .* has no scheduling gates but the trail has no succeeded Release decision/,
    );

    const fix = about('Release', sneaky);
    await writer.recordIntents([fix]);
    writer.record([outcomeOf(fix)]);
    await writer.close();
    const passing = await cli(
      'verify',
      '--repo',
      url,
      '--kubeconfig',
      cp.adminKubeconfig,
      '--output',
      'json',
    );
    assert.equal(passing.code, 0, passing.stdout + passing.stderr);
    const report = JSON.parse(passing.stdout) as {
      ok: boolean;
      podsChecked: number;
      problems: unknown[];
    };
    assert.deepEqual([report.ok, report.podsChecked, report.problems], [true, 2, []]);

    const usage = await cli('log', '--repo', url, '--kind', 'Launch');
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--kind "Launch" is not a decision kind/);
    const noRepo = await cli('show', 'abc123', '--repo', join(tmpdir(), 'does-not-exist'));
    assert.equal(noRepo.code, 2);
    assert.match(noRepo.stderr, /is not a git repository/);
    assert.ok(
      ![log, text, show, failing, passing, usage, noRepo].some((run) =>
        (run.stdout + run.stderr).includes(server.token),
      ),
    );
  });
});
