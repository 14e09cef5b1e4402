/**
 * A push's retries ask the leader's fence before each attempt. The seed-8 30-minute soak
 * failed `audit verify` with 15 intents without an outcome: a leader paused (SIGSTOP)
 * between two attempts of a push while Git was down resumed past its lease, and its next
 * attempt pushed intents after the new leader's recovery had read the trail, so no one
 * closed them. A fenced push stops: the commits stay local for the standby push, which
 * closes such intents against the remote.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditPushError, AuditRepo } from '../../../src/audit/repo.ts';
import { ManualClock } from '../../../src/lib/clock.ts';

async function unreachableRemote(onSleep: () => void) {
  const repo = new AuditRepo({
    dir: mkdtempSync(join(tmpdir(), 'tollgate-clone-')),
    url: 'http://127.0.0.1:9/audit.git', // nothing listens: every attempt fails (network)
    branch: 'tollgate/audit',
    author: { name: 't', email: 't@t' },
    clock: new ManualClock(Date.UTC(2026, 0, 1)),
    retry: { maxAttempts: 5, baseDelayMs: 1, maxDelayMs: 1, maxElapsedMs: 60_000 },
    sleep: async () => onSleep(),
  });
  await repo.open();
  await repo.commitFile('audit/prod/i-1.jsonl', '{}\n', 'intents\n');
  return repo;
}

const failure = (promise: Promise<unknown>): Promise<AuditPushError> =>
  promise.then(
    () => assert.fail('the push should fail'),
    (error: unknown) => {
      assert.ok(error instanceof AuditPushError, String(error));
      return error;
    },
  );

test('a push whose fence closes between two attempts stops: no attempt after it, reason fenced, the commits stay local', async () => {
  let leading = true;
  const repo = await unreachableRemote(() => {
    leading = false; // the process was paused in the backoff and resumed past its lease
  });
  const error = await failure(repo.push(undefined, { fence: () => leading }));
  assert.equal(error.reason, 'fenced');
  assert.match(error.message, /after 1 attempt/);
  assert.equal((await repo.unpushed()).length, 1);
});

test('a push with its fence open retries up to its bound as before', async () => {
  const repo = await unreachableRemote(() => undefined);
  const error = await failure(repo.push(undefined, { fence: () => true }));
  assert.equal(error.reason, 'network');
  assert.match(error.message, /after 5 attempt/);
});
