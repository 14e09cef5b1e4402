/**
 * Intents that reach the remote only through the leftover replay (soak seed 2, 30 min:
 * 8 resize Holds without an outcome), on a real Git server with the real strict writer
 * and the term-start recovery `tollgate run` uses (src/run/audit.ts recoverOutcomes):
 * a leader commits intents while Git refuses its pushes, so strict mode queues their
 * `cancelled` outcomes; it loses the lease before they are committed (queued decisions
 * are dropped: a process without the lease records nothing) and stops. When it leads
 * again on the same cache, its term start replays the intents and recovery must close
 * every one of them, whatever loop decided it: `tollgate audit verify` exits 0.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { V1Pod } from '@kubernetes/client-node';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Decision, Outcome } from '../../../src/decide/decision.ts';
import { recoverOutcomes } from '../../../src/run/audit.ts';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { aDecision } from '../../builders/decision.ts';
import { aPolicy } from '../../builders/policy.ts';
import { captureLogs } from './support.ts';

const root = new URL('../../../', import.meta.url).pathname;
const run = promisify(execFile);
const cluster = 'prod';
let server: GitServer;
before(async () => {
  server = await startGitServer();
});
after(() => server.close());

/** The intents left open, and the outcome recovery must give each from the pod (unchanged: not sent). */
const notSent = {
  result: 'cancelled',
  message: 'not sent before restart (resourceVersion 1 unchanged since the decision)',
} as const;
const rows: { intent: Decision; outcome: Outcome }[] = [
  { intent: aDecision('Release', 'eval-45').intent().obj(), outcome: notSent },
  { intent: aDecision('Hold', 'api-0').loop('resize').intent().obj(), outcome: notSent },
  { intent: aDecision('Resize', 'api-1').intent().obj(), outcome: notSent },
];

/** The pods as the cluster shows them: each still at the resourceVersion it was decided on. */
function podOf(intent: Decision): V1Pod {
  const { namespace, name, uid, resourceVersion } = intent.target;
  const gates = intent.loop === 'gate-release' ? [{ name: 'tollgate.io/ready' }] : [];
  return {
    metadata: { namespace, name, uid, resourceVersion },
    spec: { containers: [], schedulingGates: gates },
  };
}

function openWriter(url: string, cacheDir: string) {
  return GitAuditWriter.open({
    url,
    token: server.token,
    cacheDir,
    cluster,
    controller: 'replica-a',
    // Strict, as `tollgate run` by default; a batch delay no test step waits out, so the
    // queued cancellations are still queued when the lease is lost.
    mode: 'strict',
    batch: { maxDecisions: 100, maxDelayMs: 3_600_000 },
    retry: { maxAttempts: 2, maxElapsedMs: 5_000, baseDelayMs: 5, maxDelayMs: 20 },
    retryIntervalMs: 3_600_000,
    leftoversAtTermStart: true,
    logger: captureLogs().logger,
  });
}

async function verify(url: string): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await run(
      process.execPath,
      [join(root, 'src/cli/main.ts'), 'audit', 'verify', '--repo', url, '--output', 'json'],
      { cwd: root, env: { ...process.env, TOLLGATE_GIT_TOKEN: server.token } },
    );
    return { code: 0, stdout };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '' };
  }
}

describe('intents pushed only by the leftover replay', () => {
  it("are closed by the next term's recovery, whatever loop decided them: audit verify exits 0", async () => {
    const url = server.createRepo('replayed');
    const cache = mkdtempSync(join(tmpdir(), 'tollgate-replayed-'));
    const intents = rows.map((row) => row.intent);

    // The first term: intents committed, every push refused; then the lease is lost.
    let leading = true;
    const first = await openWriter(url, cache);
    first.writer.setFence(() => leading);
    await first.writer.reconcile();
    server.refusePushes(503);
    await assert.rejects(first.writer.recordIntents(intents), /intents not pushed \(strict mode\)/);
    leading = false;
    await assert.rejects(first.writer.flush(), /not the leader/);
    await first.writer.close({ flush: false });
    server.refusePushes(undefined);
    assert.equal(
      (await first.repo.unpushed()).length,
      1,
      'the intent commit alone is left unpushed',
    );

    // The next term on the same cache: reconcile replays the intents, recovery closes them.
    const again = await openWriter(url, cache);
    const pods = new Map(intents.map((intent) => [intent.target.name, podOf(intent)]));
    const term = new AbortController();
    const recovery = await recoverOutcomes({
      auditUrl: url,
      branch: 'tollgate/audit',
      token: undefined,
      cluster,
      audit: again.writer,
      view: { pod: (_namespace: string, name: string) => pods.get(name) } as unknown as ClusterView,
      policy: aPolicy().obj(),
      log: captureLogs().logger,
      signal: term.signal,
    });
    await recovery.done;
    term.abort();
    await again.writer.close();
    assert.deepEqual(await again.repo.unpushed(), [], 'nothing left unpushed');

    const result = await verify(url);
    const report = JSON.parse(result.stdout) as {
      ok: boolean;
      intents: number;
      outcomes: number;
      problems: { message: string }[];
    };
    assert.deepEqual(
      report.problems.map((problem) => problem.message),
      [],
      'every intent has exactly one outcome',
    );
    assert.deepEqual([result.code, report.intents, report.outcomes], [0, 3, 3]);
    const source = await openAuditSource(url, 'tollgate/audit', { token: server.token });
    const records = (await readAuditHistory(source)).flatMap((commit) => commit.records);
    source.close();
    assert.deepEqual(
      rows.map(({ intent }) =>
        records.filter((r) => r.id === intent.id && r.phase === 'outcome').map((r) => r.outcome),
      ),
      rows.map(({ outcome }) => [outcome]),
    );
  });
});
