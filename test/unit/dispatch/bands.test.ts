/** Which band a write is served in (src/dispatch/bands.ts), one sentence a row. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bandOf, releaseWriteBand } from '../../../src/dispatch/bands.ts';
import type { WriteOperation } from '../../../src/dispatch/types.ts';

const removeGate: WriteOperation = { type: 'removeGate', gate: 'g', gateIndex: 0 };
const rows: { name: string; band: string; actual: string }[] = [
  {
    name: 'a delete is a safety write by default',
    band: 'safety',
    actual: bandOf({ op: { type: 'delete', reason: 'r' } }),
  },
  { name: 'a release is work by default', band: 'work', actual: bandOf({ op: removeGate }) },
  {
    name: 'an Event is background by default',
    band: 'background',
    actual: bandOf({
      op: { type: 'event', event: { action: 'series', count: 2, lastObservedTime: 'x' } },
    }),
  },
  {
    name: 'a band given on the request wins over the default',
    band: 'safety',
    actual: bandOf({ op: removeGate, band: 'safety' }),
  },
  {
    name: 'the gate-release loop sends a Cancel as a safety write',
    band: 'safety',
    actual: releaseWriteBand({ op: { type: 'delete' }, expiryForced: false }),
  },
  {
    name: 'the gate-release loop sends an expiry Review mark as a safety write',
    band: 'safety',
    actual: releaseWriteBand({ op: { type: 'annotate' }, expiryForced: false }),
  },
  {
    name: 'the gate-release loop sends an expiry-forced release as a safety write',
    band: 'safety',
    actual: releaseWriteBand({ op: { type: 'removeGate' }, expiryForced: true }),
  },
  {
    name: 'the gate-release loop sends a release whose conditions hold as work',
    band: 'work',
    actual: releaseWriteBand({ op: { type: 'removeGate' }, expiryForced: false }),
  },
];
for (const row of rows) {
  test(row.name, () => assert.equal(row.actual, row.band));
}
