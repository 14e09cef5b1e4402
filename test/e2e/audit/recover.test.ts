/**
 * A controller killed (SIGKILL) between intent and outcome, then restarted: `tollgate
 * audit verify` fails before recovery (intents without outcomes) and passes after.
 * The child and the CLI are separate processes; the git server runs here, so every
 * child is awaited asynchronously.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { gitServerPerFile } from '../../support/git-server.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { podStateLookup, recover } from '../../../src/audit/recover.ts';
import { openAuditSource, readAuditHistory, repoSource } from '../../../src/audit/reader.ts';
import { verifyTrail } from '../../../src/audit/verify.ts';
import { systemClock } from '../../../src/lib/clock.ts';
import { captureLogs } from './support.ts';

const root = new URL('../../../', import.meta.url).pathname;
const server = gitServerPerFile();

function runNode(
  args: string[],
  env: Record<string, string>,
  until?: string,
): Promise<{ code: number | null; stdout: string; stderr: string; kill: () => void }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const result = (code: number | null) => ({
      code,
      stdout,
      stderr,
      kill: () => child.kill('SIGKILL'),
    });
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      if (until && stdout.includes(until)) resolve(result(null));
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      until && !stdout.includes(until)
        ? reject(new Error(`child exited ${code ?? signal} before ${until}: ${stderr}`))
        : resolve(result(code)),
    );
  });
}

const pod = (name: string, uid: string, gates: string[]): V1Pod => ({
  metadata: { namespace: 'team-a', name, uid, resourceVersion: '7' },
  spec: { containers: [], schedulingGates: gates.map((gate) => ({ name: gate })) },
});

describe('recovery after a crash between intent and outcome', () => {
  it('a restarted writer records the missing outcomes from cluster state and audit verify passes', async () => {
    const url = server.createRepo('crash');
    const cache = mkdtempSync(join(tmpdir(), 'tollgate-audit-crash-'));
    const env = { AUDIT_URL: url, AUDIT_CACHE: cache, TOLLGATE_GIT_TOKEN: server.token };
    const child = await runNode(['test/e2e/audit/fixtures/intents-then-wait.ts'], env, 'READY');
    child.kill();

    const verify = (...extra: string[]) =>
      runNode(['src/cli/main.ts', 'audit', 'verify', '--repo', url, ...extra], {
        TOLLGATE_GIT_TOKEN: server.token,
      });
    const before = await verify();
    assert.equal(before.code, 1, before.stdout + before.stderr);
    assert.match(before.stdout, /FAILED: 1 commits, 3 records, 3 intents, 0 outcomes/);
    assert.equal((before.stdout.match(/\[intent-outcome\]/g) ?? []).length, 3);

    // Restart on the same cache folder.
    const logs = captureLogs();
    const { writer, repo } = await GitAuditWriter.open({
      url,
      token: server.token,
      cacheDir: cache,
      cluster: 'crash',
      controller: 'tollgate-2',
      batch: { maxDecisions: 100, maxDelayMs: 50 },
      logger: logs.logger,
    });
    const pods = new Map([
      ['released', pod('released', 'uid-team-a-released', [])],
      ['still-gated', pod('still-gated', 'uid-team-a-still-gated', ['tollgate.io/budget'])],
    ]);
    const lookup = podStateLookup(
      (_namespace, name) => pods.get(name),
      (gate) => gate.startsWith('tollgate.io/'),
    );
    const recovered = await recover({
      source: await repoSource(repo),
      cluster: 'crash',
      lookup,
      sink: writer,
      clock: systemClock,
    });
    await writer.close();
    assert.deepEqual(
      recovered.map((decision) => [
        decision.target.name,
        decision.outcome.result,
        'message' in decision.outcome ? decision.outcome.message : decision.reason.split(';')[0],
      ]),
      [
        ['released', 'succeeded', 'recovered: applied before restart (gate removed)'],
        ['still-gated', 'cancelled', 'not sent before restart (still gated by tollgate.io/budget)'],
        [
          'gone',
          'unknown',
          'pod gone before recovery: whether the write was applied cannot be known',
        ],
      ],
    );

    const afterRecovery = await verify('--output', 'json');
    assert.equal(afterRecovery.code, 0, afterRecovery.stdout + afterRecovery.stderr);
    const report = JSON.parse(afterRecovery.stdout) as {
      ok: boolean;
      intents: number;
      outcomes: number;
      unknownOutcomes: number;
    };
    assert.deepEqual(
      [report.ok, report.intents, report.outcomes, report.unknownOutcomes],
      [true, 3, 3, 1],
    );
    const text = await verify();
    assert.match(text.stdout, /^ok: .*3 outcomes, 1 of them unknown \(recovery could not tell/);

    // A second recovery finds nothing to do.
    const { writer: again, repo: againRepo } = await GitAuditWriter.open({
      url,
      token: server.token,
      cacheDir: cache,
      cluster: 'crash',
      controller: 'tollgate-3',
      batch: { maxDecisions: 100, maxDelayMs: 50 },
    });
    assert.deepEqual(
      await recover({
        source: await repoSource(againRepo),
        cluster: 'crash',
        lookup,
        sink: again,
        clock: systemClock,
      }),
      [],
    );
    await again.close();

    // With the pods of the cluster: the released pod has its Release; a pod ungated behind tollgate's back does not.
    const source = await openAuditSource(url, 'tollgate/audit', { token: server.token });
    const history = await readAuditHistory(source);
    source.close();
    const snapshot = [
      { namespace: 'team-a', name: 'released', uid: 'uid-team-a-released', schedulingGates: [] },
      {
        namespace: 'team-a',
        name: 'still-gated',
        uid: 'uid-team-a-still-gated',
        schedulingGates: [],
      },
    ];
    const podReport = verifyTrail(history, { pods: snapshot });
    assert.deepEqual(
      podReport.problems.map((problem) => problem.message),
      [
        'pod team-a/still-gated (uid uid-team-a-still-gated) has no scheduling gates but the trail has no succeeded Release decision for it',
      ],
    );
    assert.ok(!logs.lines.join('').includes(server.token));
  });

  it('commits left unpushed by a killed writer are pushed by the restarted one', async () => {
    const url = server.createRepo('unpushed');
    const cache = mkdtempSync(join(tmpdir(), 'tollgate-audit-unpushed-'));
    // First run: the remote refuses (wrong token), so the intent commit stays local.
    const first = await GitAuditWriter.open({
      url,
      token: 'wrong-token',
      cacheDir: cache,
      cluster: 'c',
      controller: 'tollgate-1',
      // It is "killed" below: neither its queued cancellation (committed only after the
      // batch delay) nor its background retry may reach the shared cache afterwards, as
      // nothing of a killed process does.
      batch: { maxDecisions: 100, maxDelayMs: 3_600_000 },
      retry: { maxAttempts: 1 },
      retryIntervalMs: 3_600_000,
    });
    const { aDecision } = await import('../../builders/decision.ts');
    await assert.rejects(first.writer.recordIntents([aDecision('Release', 'p1').obj()]));
    assert.equal(first.writer.backlog, 2, 'intent committed locally, cancellation queued');
    // "Killed": the writer object is dropped without close; only the cache dir survives.
    const second = await GitAuditWriter.open({
      url,
      token: server.token,
      cacheDir: cache,
      cluster: 'c',
      controller: 'tollgate-2',
      batch: { maxDecisions: 100, maxDelayMs: 50 },
    });
    assert.equal(second.writer.backlog, 1, 'the restart found the unpushed intent commit');
    await second.writer.flush();
    assert.equal(second.writer.backlog, 0);
    const source = await openAuditSource(url, 'tollgate/audit', { token: server.token });
    const history = await readAuditHistory(source);
    source.close();
    assert.equal(history.length, 1);
    assert.equal(history[0]?.records[0]?.phase, 'intent');
    await second.writer.close();
  });
});
