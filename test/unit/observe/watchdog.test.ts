import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../../src/lib/clock.ts';
import { PassWatchdog } from '../../../src/observe/watchdog.ts';
import { runChecks } from '../../../src/observe/http.ts';

test('a pass within its limit is not wedged; one over it is, named with its age', () => {
  const clock = new ManualClock();
  const dog = new PassWatchdog({ clock, maxPassMs: 60_000 });
  const end = dog.begin('gate-release');
  clock.advance(60_000);
  assert.equal(dog.wedged(), undefined);
  clock.advance(1_000);
  assert.equal(dog.wedged(), 'wedged: gate-release pass running for 61s (limit 60s)');
  end();
  assert.equal(dog.wedged(), undefined, 'a pass that ends is no longer wedged');
});

test('idle loops are never wedged, however long since their last pass', () => {
  const clock = new ManualClock();
  const dog = new PassWatchdog({ clock, maxPassMs: 1_000 });
  dog.begin('resize')();
  clock.advance(3_600_000);
  assert.equal(dog.wedged(), undefined);
});

test('watch ends the pass whether it resolves or throws', async () => {
  const clock = new ManualClock();
  const dog = new PassWatchdog({ clock, maxPassMs: 1_000 });
  await assert.rejects(
    dog.watch('gate-release', async () => {
      throw new Error('boom');
    }),
  );
  clock.advance(5_000);
  assert.equal(dog.wedged(), undefined);
});

test('a wedged loop fails the check it backs, with the reason in the body', () => {
  const clock = new ManualClock();
  const dog = new PassWatchdog({ clock, maxPassMs: 1_000 });
  dog.begin('gate-release');
  clock.advance(2_000);
  const report = runChecks({ loops: () => dog.wedged() }, false);
  assert.equal(report.ok, false);
  assert.match(report.body, /\[-\] loops failed: wedged: gate-release pass running for 2s/);
});

test('a check that does not apply (no loop over its limit) is not listed, even verbose', () => {
  const report = runChecks({ policy: () => undefined, loops: () => null }, true);
  assert.equal(report.ok, true);
  assert.equal(report.body, '[+] policy ok\nok\n');
});
