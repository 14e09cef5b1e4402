import { test } from 'node:test';
import assert from 'node:assert/strict';
import { timestampMs } from '../../../src/decide/objects.ts';

const rows: { name: string; value: Date | string | undefined; expected: number | undefined }[] = [
  {
    name: 'an RFC 3339 text',
    value: '2026-03-04T05:06:07Z',
    expected: Date.UTC(2026, 2, 4, 5, 6, 7),
  },
  { name: 'a Date', value: new Date(Date.UTC(2026, 2, 4)), expected: Date.UTC(2026, 2, 4) },
  { name: 'no value', value: undefined, expected: undefined },
  { name: 'text that is no time', value: 'yesterday-ish', expected: undefined },
  { name: 'an invalid Date', value: new Date(Number.NaN), expected: undefined },
];

for (const row of rows)
  test(`timestampMs: ${row.name}, gives its epoch milliseconds, or undefined`, () => {
    assert.equal(timestampMs(row.value), row.expected);
  });
