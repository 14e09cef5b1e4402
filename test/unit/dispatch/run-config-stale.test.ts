/**
 * The stale-guard's run knobs: after how many consecutive skips one live read decides
 * (validated, default 5), and the switch that turns the skip path off for rollback.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RawRunSettings } from '../../../src/cli/run-config.ts';
import { parseWithMinimal } from '../../support/run-config.ts';

function parse(flags: RawRunSettings, env: Record<string, string> = {}) {
  return parseWithMinimal(flags, env);
}

const accepted: {
  name: string;
  flags: RawRunSettings;
  env?: Record<string, string>;
  stale: { liveReadAfterSkips: number; skipRollback: boolean };
}[] = [
  {
    name: 'by default one live read decides after 5 skips, and a stale Rollback is skipped',
    flags: {},
    stale: { liveReadAfterSkips: 5, skipRollback: true },
  },
  {
    name: 'the flags set both',
    flags: { staleLiveReadAfter: '2', rollbackStaleSkip: 'off' },
    stale: { liveReadAfterSkips: 2, skipRollback: false },
  },
  {
    name: 'the variables set both',
    flags: {},
    env: { TOLLGATE_STALE_LIVE_READ_AFTER: '9', TOLLGATE_ROLLBACK_STALE_SKIP: 'off' },
    stale: { liveReadAfterSkips: 9, skipRollback: false },
  },
];

for (const row of accepted) {
  test(row.name, () => {
    const result = parse(row.flags, row.env);
    assert.ok(result.ok, result.ok ? '' : result.problems.join('\n'));
    assert.deepEqual(result.config.stale, row.stale);
  });
}

const refused: { name: string; flags: RawRunSettings; problem: RegExp }[] = [
  {
    name: 'zero skips is refused, naming the flag',
    flags: { staleLiveReadAfter: '0' },
    problem: /--stale-live-read-after \/ TOLLGATE_STALE_LIVE_READ_AFTER: .*at least 1/,
  },
  {
    name: 'a fraction is refused',
    flags: { staleLiveReadAfter: '2.5' },
    problem: /--stale-live-read-after .*whole number/,
  },
  {
    name: 'the rollback switch is on or off',
    flags: { rollbackStaleSkip: 'maybe' },
    problem: /--rollback-stale-skip \/ TOLLGATE_ROLLBACK_STALE_SKIP: "maybe" must be on or off/,
  },
];

for (const row of refused) {
  test(row.name, () => {
    const result = parse(row.flags);
    assert.equal(result.ok, false);
    assert.match(result.ok ? '' : result.problems.join('\n'), row.problem);
  });
}
