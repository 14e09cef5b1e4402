/**
 * The write dispatcher's knobs in `tollgate run`'s configuration: flags and variables
 * reach the dispatcher's own validation, and every problem names its flag.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RawRunSettings } from '../../../src/cli/run-config.ts';
import { parseWithMinimal } from '../../support/run-config.ts';

function writes(flags: RawRunSettings, env: Record<string, string> = {}) {
  const result = parseWithMinimal(flags, env);
  assert.ok(result.ok, result.ok ? '' : result.problems.join('\n'));
  return result.config.writes;
}
function problems(flags: RawRunSettings): string[] {
  const result = parseWithMinimal(flags);
  return result.ok ? [] : [...result.problems];
}

test('the write knobs reach the dispatcher settings, from flags and from variables', () => {
  const settings = writes(
    {
      writeMode: 'sync',
      writeQueueCapacity: '5000',
      writeAging: '2s',
      writeDeadline: '90s',
      writeAttemptTimeout: '3s',
      writeRetryBase: '100ms',
      writeRetryMax: '5s',
      writeRetryAttempts: '3',
      writeFallbackQueueAge: '90s',
      writeFallbackTimeouts: '7',
    },
    { TOLLGATE_WRITE_RETRY_ELAPSED: '30s', TOLLGATE_WRITE_FALLBACK_FAILURE_RATIO: '0.8' },
  );
  assert.equal(settings.mode, 'sync');
  assert.equal(settings.capacity, 5000);
  assert.equal(settings.safetyReserve, 64);
  assert.equal(settings.agingMs, 2_000);
  assert.equal(settings.writeDeadlineMs, 90_000);
  assert.equal(settings.attemptTimeoutMs, 3_000);
  assert.deepEqual(settings.retry, {
    baseMs: 100,
    maxMs: 5_000,
    maxAttempts: 3,
    maxElapsedMs: 30_000,
    maxForbiddenAttempts: 5,
  });
  assert.equal(settings.fallback.maxQueueAgeMs, 90_000);
  assert.equal(settings.fallback.maxFailureRatio, 0.8);
  assert.equal(settings.fallback.maxConsecutiveTimeouts, 7);
  assert.equal(settings.fallback.enabled, true);
});

test('the fence margin is the lease duration minus the renew deadline', () => {
  assert.equal(writes({ leaseDuration: '30s', renewDeadline: '20s' }).fenceMarginMs, 10_000);
});

const refusals: { name: string; flags: RawRunSettings; problem: RegExp }[] = [
  {
    name: 'an attempt timeout as long as the fence margin is refused, naming the flag and the lease',
    flags: { writeAttemptTimeout: '5s' },
    problem:
      /^--write-attempt-timeout \/ TOLLGATE_WRITE_ATTEMPT_TIMEOUT: must be shorter than the fence margin \(lease duration - renew deadline = 5000 ms\)/,
  },
  {
    name: 'an unknown write mode is refused',
    flags: { writeMode: 'fast' },
    problem: /^--write-mode \/ TOLLGATE_WRITE_MODE: must be "queue" or "sync", got "fast"/,
  },
  {
    name: 'a queue capacity that is not a number is refused with what was given',
    flags: { writeQueueCapacity: 'lots' },
    problem:
      /^--write-queue-capacity \/ TOLLGATE_WRITE_QUEUE_CAPACITY: must be an integer above 0, got "lots"/,
  },
  {
    name: 'a retry maximum below the base is refused',
    flags: { writeRetryBase: '2s', writeRetryMax: '1s' },
    problem: /^--write-retry-max \/ TOLLGATE_WRITE_RETRY_MAX: must be at least retry\.baseMs/,
  },
  {
    name: 'a fallback switch other than on/off is refused',
    flags: { writeFallback: 'maybe' },
    problem: /^--write-fallback \/ TOLLGATE_WRITE_FALLBACK: "maybe" must be on or off/,
  },
  {
    name: 'a failure ratio above 1 is refused',
    flags: { writeFallbackFailureRatio: '2' },
    problem:
      /^--write-fallback-failure-ratio \/ TOLLGATE_WRITE_FALLBACK_FAILURE_RATIO: must be a number above 0 and at most 1/,
  },
];
for (const row of refusals) {
  test(row.name, () => {
    const found = problems(row.flags);
    assert.ok(
      found.some((p) => row.problem.test(p)),
      `expected a problem like ${row.problem}, got:\n${found.join('\n')}`,
    );
  });
}

test('a duration that does not parse is reported once', () => {
  const found = problems({ writeAging: 'soon' });
  assert.equal(found.filter((p) => p.startsWith('--write-aging')).length, 1, found.join('\n'));
});
