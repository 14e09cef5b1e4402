/**
 * The audit (write) token file is read again when a push authenticates, like the policy
 * token: a rotated Secret is used without a restart. Against a real Git server that,
 * after the rotation, accepts only the new token: commits recorded while the file still
 * holds the revoked token stay queued (an auth failure, no token in the message), and the
 * first push after the file is rewritten lands them, from the same open writer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { tokenFromFile } from '../../../src/policy/credentials.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { captureLogs, allFiles } from '../audit/support.ts';
import { gitServerForFile } from './support.ts';

const git = gitServerForFile('tollgate-audit-rotation-');

test('a rotated audit token file is used from the next push on, without reopening the writer', async () => {
  const server = git.server();
  const url = server.createRepo('audit-rotation');
  const oldToken = server.token;
  const tokenFile = join(git.tempDir(), 'audit-token');
  writeFileSync(tokenFile, `${oldToken}\n`);
  const cacheDir = git.tempDir();
  const logs = captureLogs();
  const { writer } = await GitAuditWriter.open({
    url,
    token: tokenFromFile(tokenFile),
    cacheDir,
    cluster: 'rotation',
    controller: 'tollgate-rotation',
    batch: { maxDecisions: 100, maxDelayMs: 60_000 },
    logger: logs.logger,
    retry: { maxAttempts: 2, maxElapsedMs: 10_000, baseDelayMs: 1, maxDelayMs: 5 },
  });
  try {
    const before = aDecision('Release', 'before-rotation').obj();
    await writer.recordIntents([before]);
    await writer.flush();
    assert.equal(writer.backlog, 0, 'pushed with the token the file held at start');

    const newToken = `rotated-${oldToken}`;
    server.rotateToken(newToken);
    const during = outcomeOf(aDecision('Release', 'during-rotation').obj());
    writer.record([during]);
    await assert.rejects(writer.flush(), (error: Error) => {
      assert.doesNotMatch(error.message, new RegExp(oldToken));
      return true;
    });
    assert.ok(writer.backlog > 0, 'refused with the revoked token: the commit stays queued');

    writeFileSync(tokenFile, `${newToken}\n`);
    const after = outcomeOf(aDecision('Release', 'after-rotation').obj());
    writer.record([after]);
    await writer.flush();
    assert.equal(writer.backlog, 0, 'the rewritten file is read at the next push');

    const source = await openAuditSource(url, 'tollgate/audit', { token: newToken });
    const recorded = (await readAuditHistory(source)).flatMap((c) => c.records.map((r) => r.id));
    source.close();
    assert.deepEqual(new Set(recorded), new Set([before.id, during.id, after.id]));

    for (const token of [oldToken, newToken]) {
      assert.deepEqual(
        allFiles(cacheDir).filter((file) => readFileSync(file).includes(token)),
        [],
        'no token in the audit clone',
      );
      assert.equal(logs.lines.filter((line) => line.includes(token)).length, 0, 'no token logged');
    }
  } finally {
    await writer.close().catch(() => undefined);
  }
});
