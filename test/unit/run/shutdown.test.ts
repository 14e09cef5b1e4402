/**
 * `tollgate run`'s stop sequence after SIGTERM (src/run/shutdown.ts): the parts before the
 * lease release share one budget, so a part that waits on Git (a loop pass blocked on a
 * strict audit push, an end-of-term flush retrying) cannot hold the process past its
 * grace period. Soak seed 3, 30 min: two SIGTERMs while Git was down or slow outlived the
 * 30 s grace. Injected timers: no wall time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { stopInOrder, type StopStep } from '../../../src/run/shutdown.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';

const order = ['sweeps', 'loops', 'dispatcher', 'audit', 'leader election', 'cluster view', 'http'];

/** Steps that stop at once, except those given a promise of their own; records which were asked to stop. */
function steps(own: Record<string, () => Promise<unknown>> = {}) {
  const asked: string[] = [];
  const list: StopStep[] = order.map((name) => ({
    name,
    stop: () => {
      asked.push(name);
      return own[name]?.() ?? Promise.resolve();
    },
  }));
  return { asked, list };
}

function setup() {
  const timers = new ManualTimers();
  const lines: { msg: string; part?: string }[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const options = {
    budgetMs: 20_000,
    unboundedFrom: 'audit',
    log,
    timers,
    now: () => timers.clock.now(),
  };
  return { timers, lines, options };
}

const never = (): Promise<unknown> => new Promise(() => {});

test('a part that never stops is left behind once the budget is spent, and the lease is still released and everything after it stopped', async () => {
  const { timers, lines, options } = setup();
  const { asked, list } = steps({ loops: never });
  let code: number | undefined;
  const done = stopInOrder(list, options).then((result) => (code = result));
  await settle();
  assert.deepEqual(asked, ['sweeps', 'loops'], 'waits for the loops within the budget');
  await timers.advance(19_999);
  assert.deepEqual(asked, ['sweeps', 'loops'], 'still within the budget');
  await timers.advance(1);
  await done;
  assert.deepEqual(asked, order, 'every later part stopped, the lease released');
  assert.equal(code, 0);
  const left = lines.find((line) => line.msg.startsWith('did not stop within the shutdown budget'));
  assert.equal(left?.part, 'loops', 'the log names the part left behind');
});

test('the budget is shared: parts before the final audit flush get what the earlier ones left', async () => {
  const { timers, lines, options } = setup();
  let releaseLoops: () => void = () => {};
  const { asked, list } = steps({
    loops: () => new Promise<void>((resolve) => (releaseLoops = resolve)),
    dispatcher: never,
  });
  const done = stopInOrder(list, options);
  await settle();
  await timers.advance(15_000);
  releaseLoops();
  await settle();
  assert.deepEqual(asked, ['sweeps', 'loops', 'dispatcher']);
  await timers.advance(4_999);
  assert.deepEqual(asked, ['sweeps', 'loops', 'dispatcher'], 'the dispatcher has the 5 s left');
  await timers.advance(1);
  await done;
  assert.deepEqual(asked, order);
  assert.deepEqual(
    lines.filter((line) => line.msg.startsWith('did not stop within')).map((line) => line.part),
    ['dispatcher'],
  );
});

test('the final audit flush (bounded itself) and the parts after it are waited for, however long they take', async () => {
  const { timers, options } = setup();
  let release: () => void = () => {};
  const { asked, list } = steps({
    audit: () => new Promise<void>((resolve) => (release = resolve)),
  });
  let finished = false;
  const done = stopInOrder(list, options).then(() => (finished = true));
  await settle();
  await timers.advance(60_000);
  assert.equal(finished, false);
  assert.deepEqual(asked, order.slice(0, order.indexOf('audit') + 1));
  release();
  await done;
  assert.deepEqual(asked, order);
});

test('a part that fails is logged and the exit code is 1; the parts after it still stop', async () => {
  const { options, lines } = setup();
  const { asked, list } = steps({ dispatcher: () => Promise.reject(new Error('boom')) });
  assert.equal(await stopInOrder(list, options), 1);
  assert.deepEqual(asked, order);
  assert.ok(
    lines.some((line) => line.msg === 'did not stop cleanly' && line.part === 'dispatcher'),
  );
});
