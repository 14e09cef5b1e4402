/**
 * A poll parses policy YAML off the event loop: while eight heavy files are parsed,
 * timers on the main thread keep firing (what leader-lease renewal needs). The
 * assertion is a ratio within one run (the longest stall of the main thread against
 * the poll's whole duration), never an absolute time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PolicySource } from '../../../src/policy/source.ts';
import { limits } from '../../../src/policy/parse.ts';
import { ParseTimeout, parseFilesOffThread } from '../../../src/policy/parse-off-thread.ts';
import { ManualTimers } from '../../support/manual-timers.ts';

const settings = 'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nspec: {cluster: x}\n';

/** A file just under the token limit: valid YAML, heavy to compose. */
function heavyFile(): string {
  const elements = Math.floor(limits.maxTokensPerFile / 3) - 50;
  return `values: [${Array.from({ length: elements }, () => '1').join(',')}]\n`;
}

function folderWithHeavyFiles(count: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-heavy-'));
  writeFileSync(join(dir, 'tollgate.yaml'), settings);
  for (let i = 0; i < count; i += 1) writeFileSync(join(dir, `heavy-${i}.yaml`), heavyFile());
  return dir;
}

test('while a poll parses eight heavy files, the main thread never stalls for most of it', async () => {
  const dir = folderWithHeavyFiles(8);
  try {
    const source = new PolicySource({ location: dir, timers: new ManualTimers() });
    let last = performance.now();
    let longestStall = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      longestStall = Math.max(longestStall, now - last);
      last = now;
    }, 5);
    const started = performance.now();
    const outcome = await source.poll();
    const ended = performance.now();
    clearInterval(ticker);
    const duration = ended - started;
    // The gap since the last tick counts too: a blocked loop may never tick again.
    longestStall = Math.max(longestStall, ended - last);
    // The heavy files are not policy documents: the commit is rejected, for its content.
    assert.equal(outcome.kind, 'rejected');
    assert.ok(
      longestStall < duration / 2,
      `the main thread stalled ${longestStall.toFixed(0)} ms of a ${duration.toFixed(0)} ms poll`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a parse past its deadline is stopped and reported as a timeout', async () => {
  const timers = new ManualTimers();
  const content = heavyFile();
  const parsing = parseFilesOffThread(
    { files: Array.from({ length: 8 }, (_, i) => ({ path: `h${i}.yaml`, content })) },
    { timers, timeoutMs: 1_000 },
  );
  const rejected = assert.rejects(parsing, (error: unknown) => {
    assert.ok(error instanceof ParseTimeout);
    assert.match(error.message, /parsing 8 policy files did not finish within 1000 ms/);
    return true;
  });
  await timers.advance(1_000);
  await rejected;
  assert.deepEqual(timers.pending, []);
});

test('a commit whose parse timed out is tried again on the next poll, not marked bad', async () => {
  const dir = folderWithHeavyFiles(0);
  try {
    const timers = new ManualTimers();
    const source = new PolicySource({ location: dir, timers, parseTimeoutMs: 1_000 });
    const first = source.poll();
    // The deadline is the only timer; fire it while the worker is still starting.
    while (timers.pending.length === 0) await new Promise((r) => setImmediate(r));
    await timers.advance(1_000);
    const timedOut = await first;
    assert.equal(timedOut.kind, 'fetch-failed');
    if (timedOut.kind === 'fetch-failed') assert.match(timedOut.error.message, /did not finish/);
    const second = await source.poll();
    assert.equal(second.kind, 'applied', 'the same commit is evaluated again');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
