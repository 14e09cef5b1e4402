/**
 * Audit settings are read when the audit writer opens. A policy commit that changes
 * them later is refused loudly: a warning naming each setting, and
 * `tollgate_policy_restart_required` at 1 until the settings in force match again
 * (a restart, or the change reverted), and one announcement (an Event in `tollgate run`,
 * test/e2e/security/restart-settings.test.ts). Against a real policy source over a folder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PolicySource } from '../../../src/policy/source.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { watchStartupSettings, startupSettingChanges } from '../../../src/policy/settings-watch.ts';
import { ManualTimers } from '../../support/manual-timers.ts';
import type { Logger } from '../../../src/observe/log.ts';

const examples = resolve(import.meta.dirname, '../../../policy-examples');

async function restartRequired(): Promise<number | undefined> {
  const found = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === 'tollgate_policy_restart_required',
  );
  return found?.values[0]?.value;
}

function recordingLogger(lines: { msg: string; fields: Record<string, unknown> }[]): Logger {
  const record = (fields: object, msg?: string) =>
    void lines.push({ msg: msg ?? '', fields: fields as Record<string, unknown> });
  const logger = {
    trace: record,
    debug: record,
    info: record,
    warn: record,
    error: record,
    fatal: record,
    child: () => logger,
  };
  return logger as unknown as Logger;
}

test('switching audit mode strict to async in Git is refused loudly until the restart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-settings-'));
  try {
    cpSync(examples, dir, { recursive: true });
    const source = new PolicySource({ location: dir, timers: new ManualTimers() });
    assert.equal((await source.poll()).kind, 'applied');
    const first = source.current()!;
    const lines: { msg: string; fields: Record<string, unknown> }[] = [];
    const announced: string[] = [];
    watchStartupSettings(source, first, recordingLogger(lines), (note) => announced.push(note));
    assert.equal(await restartRequired(), 0);

    const settings = readFileSync(join(dir, 'tollgate.yaml'), 'utf8');
    writeFileSync(join(dir, 'tollgate.yaml'), settings.replace('mode: strict', 'mode: async'));
    assert.equal((await source.poll()).kind, 'applied');
    assert.equal(await restartRequired(), 1);
    const warning = lines.find((l) => /take effect only at restart/.test(l.msg));
    assert.ok(warning, JSON.stringify(lines));
    assert.deepEqual(warning.fields.settings, [
      'settings.audit.mode: strict in force, async in Git',
    ]);
    assert.equal(announced.length, 1, 'announced once (an Event in tollgate run)');
    assert.match(announced[0]!, /settings\.audit\.mode: strict in force, async in Git/);

    writeFileSync(join(dir, 'tollgate.yaml'), settings);
    assert.equal((await source.poll()).kind, 'applied');
    assert.equal(await restartRequired(), 0, 'reverted: nothing waits for a restart');
    assert.equal(announced.length, 1, 'a revert announces nothing');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every start-up setting is compared, others are not', () => {
  const base = {
    cluster: 'c1',
    audit: {
      branch: 'tollgate/audit',
      mode: 'strict' as const,
      batch: { maxDecisions: 500, maxDelayMs: 2000 },
      windowHours: 24,
    },
    pacing: { maxInFlight: 10 } as never,
  };
  assert.deepEqual(startupSettingChanges(base, base), []);
  assert.deepEqual(
    startupSettingChanges(base, {
      ...base,
      cluster: 'c2',
      audit: { ...base.audit, batch: { maxDecisions: 100, maxDelayMs: 2000 }, windowHours: 168 },
      pacing: { maxInFlight: 99 } as never,
    }),
    [
      'settings.cluster: c1 in force, c2 in Git',
      'settings.audit.batch.maxDecisions: 500 in force, 100 in Git',
      'settings.audit.window: 24h in force, 168h in Git',
    ],
  );
});
