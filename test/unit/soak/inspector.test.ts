import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { codeBytesOf, codeSpaces, liveHeap } from '../../soak/inspector.ts';
import { freePort } from '../../e2e/deploy/tools.ts';

describe("the soak's live heap reading", () => {
  it("counts the used bytes of V8's code spaces, and of no other space", () => {
    const spaces = [
      ['old_space', 30],
      ['new_space', 5],
      ['code_space', 7],
      ['trusted_space', 11],
      ['code_large_object_space', 2],
      ['trusted_large_object_space', 1],
    ];
    assert.equal(codeBytesOf(JSON.stringify(spaces)), 7 + 11 + 2 + 1);
    assert.deepEqual(codeSpaces, [
      'code_space',
      'code_large_object_space',
      'trusted_space',
      'trusted_large_object_space',
    ]);
  });

  it('an answer that is not the JSON of the spaces reads as unknown (NaN)', () => {
    assert.ok(Number.isNaN(codeBytesOf(undefined)));
  });

  it('reads a real Node process through its inspector: a live heap, part of it compiled code', async () => {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [`--inspect=127.0.0.1:${port}`, '-e', 'setInterval(() => {}, 1000)'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    try {
      // The inspector is listening once the process says so on stderr.
      let said = '';
      for await (const chunk of child.stderr) {
        said += String(chunk);
        if (said.includes('Debugger listening')) break;
      }
      const heap = await liveHeap(port, 10_000);
      assert.ok(heap.liveBytes > heap.codeBytes, JSON.stringify(heap));
      assert.ok(heap.codeBytes > 0, JSON.stringify(heap));
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
});
