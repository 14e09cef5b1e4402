/**
 * The short demo, started the way a user starts it (`tollgate demo --short`, which runs
 * `scripts/demo.ts --short` as a child process), as CI runs it: it boots
 * its own control plane, Git server and `tollgate run`, and checks its own releases; here
 * we assert its exit code and the lines that show each part worked.
 *
 * Run: node --test --test-concurrency=1 test/e2e/demo/demo.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

test('the short demo releases and resizes what it should, records it in Git and exits 0', async () => {
  const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((done) => {
    const child = spawn(process.execPath, [join(root, 'src/cli/main.ts'), 'demo', '--short'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.once('exit', (c) => done({ code: c, stdout }));
  });
  assert.equal(code, 0, stdout);
  // Not a TTY: plain progress lines, not a redrawn view.
  assert.match(stdout, /^progress: ml-training 32\/0\/\d+ .*dataset-ready=false$/m);
  assert.match(stdout, /flipped ConfigMap ml-train\/dataset-ready data\.ready=true/);
  assert.match(stdout, /summary: ml-training released 32 of 32 trainers/);
  assert.match(stdout, /data-pipeline released 1 of 150 loads/);
  // The API load rises; tollgate steps the proxy up one step (250m) in place, and the
  // queue falls under the policy's threshold, so one step is all.
  assert.match(stdout, /api-frontend load rises: .* queue length 90 -> 270/);
  assert.match(
    stdout,
    /^progress: .*api-frontend resized 3\/3, proxy cpu 500m -> 750m, queue 180 /m,
  );
  assert.match(
    stdout,
    /api-frontend resized 3\/3 in place: proxy cpu 500m -> 750m, memory 512Mi -> 640Mi; queue length now 180 \(same pods, no restart\)/,
  );
  assert.match(stdout, /tollgate's counters: releases 33 succeeded.*; resizes 3 succeeded$/m);
  assert.match(stdout, /^[0-9a-f]{7,} resize \d+/m);
  assert.match(stdout, /intent +Resize +api-prod\/api-frontend-0 \[pending\] signals ask for more/);
  assert.match(stdout, /outcome +Resize +api-prod\/api-frontend-0 \[succeeded\]/);
  assert.match(stdout, /tollgate run stopped \(exit 0\)/);
  assert.match(stdout, /^[0-9a-f]{7,} release \d+ pods? in ml-training/m);
  assert.match(stdout, /outcome Release +etl\/nightly-load-approved \[succeeded\]/);
  assert.match(stdout, /demo checks passed/);
});
