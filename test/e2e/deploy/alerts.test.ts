/**
 * The shipped alerts and dashboard against real Prometheus tooling (Debian's promtool):
 * - every rule and every dashboard query is valid PromQL (`promtool check rules`, the
 *   dashboard queries wrapped as recording rules);
 * - `promtool test rules` shows the alerts fire on the series tollgate exports and stay
 *   quiet otherwise: no leader, audit push failing, stale skips rising.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { withMonitoring } from './tools.ts';

const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), 'tollgate-alerts-'));
const base = withMonitoring();
const rule = base.find((o) => o.kind === 'PrometheusRule') as unknown as {
  spec: { groups: unknown[] };
};
const rulesFile = join(work, 'rules.yaml');
writeFileSync(rulesFile, stringify({ groups: rule.spec.groups }));

/** The labels and annotations an alert fires with (annotations without templates). */
function firing(alert: string): {
  exp_labels: Record<string, string>;
  exp_annotations: Record<string, string>;
} {
  const rules = (
    rule.spec.groups as {
      rules: {
        alert?: string;
        labels?: Record<string, string>;
        annotations?: Record<string, string>;
      }[];
    }[]
  ).flatMap((g) => g.rules);
  const found = rules.find((r) => r.alert === alert);
  assert.ok(found, `alert ${alert} is shipped`);
  return { exp_labels: found.labels ?? {}, exp_annotations: found.annotations ?? {} };
}

async function promtool(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd: work });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('alerts and dashboard with promtool', () => {
  it('every alert and recording rule is valid', async () => {
    const result = await promtool('check', 'rules', rulesFile);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /SUCCESS: \d+ rules found/);
  });

  it('every dashboard query is valid PromQL', async () => {
    const dashboard = JSON.parse(
      (
        base.find((o) => o.metadata?.name === 'tollgate-dashboard') as unknown as {
          data: Record<string, string>;
        }
      ).data['tollgate.json']!,
    ) as { panels: { targets: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));
    const file = join(work, 'dashboard-rules.yaml');
    writeFileSync(
      file,
      stringify({
        groups: [
          {
            name: 'dashboard',
            rules: exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })),
          },
        ],
      }),
    );
    const result = await promtool('check', 'rules', file);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, new RegExp(`SUCCESS: ${exprs.length} rules found`));
  });

  it('the alerts fire on the series tollgate exports, and only then', async () => {
    const tests = {
      rule_files: [rulesFile],
      evaluation_interval: '1m',
      tests: [
        {
          // Both replicas up, neither leads for 4 minutes.
          interval: '1m',
          input_series: [
            { series: 'tollgate_leader{pod="tollgate-a"}', values: '0x10' },
            { series: 'tollgate_leader{pod="tollgate-b"}', values: '0x10' },
          ],
          alert_rule_test: [
            { eval_time: '1m', alertname: 'TollgateNoLeader', exp_alerts: [] },
            {
              eval_time: '5m',
              alertname: 'TollgateNoLeader',
              exp_alerts: [firing('TollgateNoLeader')],
            },
          ],
        },
        {
          // One replica leads: quiet.
          interval: '1m',
          input_series: [
            { series: 'tollgate_leader{pod="tollgate-a"}', values: '1x10' },
            { series: 'tollgate_leader{pod="tollgate-b"}', values: '0x10' },
          ],
          alert_rule_test: [{ eval_time: '8m', alertname: 'TollgateNoLeader', exp_alerts: [] }],
        },
        {
          // Pushes failing steadily (one per minute) for 20 minutes.
          interval: '1m',
          input_series: [
            {
              series: 'tollgate_audit_push_failures_total{pod="tollgate-a",reason="network"}',
              values: '0+1x30',
            },
          ],
          alert_rule_test: [
            { eval_time: '3m', alertname: 'TollgateAuditPushFailing', exp_alerts: [] },
            {
              eval_time: '20m',
              alertname: 'TollgateAuditPushFailing',
              exp_alerts: [firing('TollgateAuditPushFailing')],
            },
          ],
        },
        {
          // Stale skips: a low steady rate for 3 hours, then a jump to 2/s.
          interval: '1m',
          input_series: [
            {
              series: 'tollgate_releases_total{pod="tollgate-a",tenant="t",result="stale"}',
              values: '0+6x180 1086+120x40',
            },
            { series: 'tollgate_resizes_total{pod="tollgate-a",result="stale"}', values: '0x220' },
          ],
          alert_rule_test: [
            { eval_time: '170m', alertname: 'TollgateStaleSkipsRising', exp_alerts: [] },
            {
              eval_time: '215m',
              alertname: 'TollgateStaleSkipsRising',
              exp_alerts: [firing('TollgateStaleSkipsRising')],
            },
          ],
        },
      ],
    };
    const file = join(work, 'tests.yaml');
    writeFileSync(file, stringify(tests));
    const result = await promtool('test', 'rules', file);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /SUCCESS/);
  });
});
