/**
 * The alerts of deploy/components/monitoring/prometheusrule.yaml against real tooling
 * (Debian's promtool) and tollgate's own metric registry:
 * - every metric name an alert or recording rule reads is one tollgate registers;
 * - every alert has a runbook_url into a heading of docs/operations.md;
 * - `promtool test rules`: the oldest-gated-pod, refused-policy-commit, stale-policy-fetch
 *   and API-403 alerts fire on the series tollgate exports, and stay silent on a healthy
 *   run; a push race (reason="rejected", retried) no longer pages.
 *
 * Run: node --test test/e2e/alerts/rules.test.ts
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { registry } from '../../../src/observe/metrics.ts';
import '../../../src/loops/gate-release-metrics.ts';
import '../../../src/loops/resize-metrics.ts';
import '../../../src/policy/metrics.ts';
import '../../../src/audit/metrics.ts';
import '../../../src/dispatch/metrics.ts';
import '../../../src/cluster/informer-metrics.ts';
import '../../../src/cluster/stale-guard-metrics.ts';
import '../../../src/cluster/events.ts';
import '../../../src/cluster/leader.ts';

const run = promisify(execFile);
const root = new URL('../../../', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'tollgate-alert-rules-'));

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const groups = (
  parse(
    readFileSync(new URL('deploy/components/monitoring/prometheusrule.yaml', root), 'utf8'),
  ) as {
    spec: { groups: { name: string; rules: Rule[] }[] };
  }
).spec.groups;
const rules = groups.flatMap((g) => g.rules);
const alerts = rules.filter((r) => r.alert !== undefined);
const rulesFile = join(work, 'rules.yaml');
writeFileSync(rulesFile, stringify({ groups }));

/** What promtool expects of a firing alert: its labels plus `extra`, its annotations rendered. */
function firing(
  alert: string,
  extra: Record<string, string>,
  annotations: Record<string, string>,
): { exp_labels: Record<string, string>; exp_annotations: Record<string, string> } {
  const rule = alerts.find((r) => r.alert === alert);
  assert.ok(rule, `alert ${alert} is shipped`);
  return {
    exp_labels: { ...rule.labels, ...extra },
    exp_annotations: { ...rule.annotations, ...annotations },
  };
}

async function promtoolTest(tests: unknown[]): Promise<void> {
  const file = join(work, `test-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, stringify({ rule_files: [rulesFile], evaluation_interval: '1m', tests }));
  try {
    await run('promtool', ['test', 'rules', file], { cwd: work });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    assert.fail(`promtool test rules failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

const leaderA = [
  { series: 'tollgate_leader{pod="tollgate-a"}', values: '1x200' },
  { series: 'tollgate_leader{pod="tollgate-b"}', values: '0x200' },
];

describe('alert rules on the series tollgate exports', () => {
  it('read only metrics tollgate registers', async () => {
    const exported = new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
    const recorded = new Set(rules.flatMap((r) => (r.record ? [r.record] : [])));
    for (const rule of rules) {
      for (const [name] of rule.expr.matchAll(/\btollgate_[a-z_]+/g)) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        assert.ok(
          exported.has(name) || exported.has(base) || recorded.has(name),
          `${rule.alert ?? rule.record} reads ${name}, which tollgate does not export`,
        );
      }
    }
  });

  it('each alert links a runbook heading of docs/operations.md', () => {
    const slugs = new Set(
      readFileSync(new URL('docs/operations.md', root), 'utf8')
        .split('\n')
        .filter((line) => /^#{2,4} /.test(line))
        .map((line) =>
          line
            .replace(/^#+ /, '')
            .toLowerCase()
            .replace(/[^a-z0-9 -]/g, '')
            .replace(/ /g, '-'),
        ),
    );
    for (const alert of alerts) {
      const url = alert.annotations?.runbook_url ?? '';
      const match = /\/docs\/operations\.md#([a-z0-9-]+)$/.exec(url);
      assert.ok(match, `${alert.alert} has a runbook_url into docs/operations.md, got "${url}"`);
      assert.ok(slugs.has(match[1] as string), `${alert.alert}: no heading #${match[1]}`);
    }
  });

  it('TollgateOldestGatedPodTooOld fires per tenant while a pod stays gated, from the leader only', async () => {
    await promtoolTest([
      {
        interval: '1m',
        input_series: [
          ...leaderA,
          // team-a's oldest pod was gated at t=0 and never released; team-b's keep moving.
          {
            series: 'tollgate_oldest_gated_pod_timestamp_seconds{pod="tollgate-a",tenant="team-a"}',
            values: '0x200',
          },
          {
            series: 'tollgate_oldest_gated_pod_timestamp_seconds{pod="tollgate-a",tenant="team-b"}',
            values: '0+60x200',
          },
          // A former leader's stale value: must not count.
          {
            series: 'tollgate_oldest_gated_pod_timestamp_seconds{pod="tollgate-b",tenant="team-b"}',
            values: '0x200',
          },
        ],
        alert_rule_test: [
          { eval_time: '100m', alertname: 'TollgateOldestGatedPodTooOld', exp_alerts: [] },
          {
            eval_time: '135m',
            alertname: 'TollgateOldestGatedPodTooOld',
            exp_alerts: [
              firing(
                'TollgateOldestGatedPodTooOld',
                { tenant: 'team-a' },
                {
                  description:
                    'The oldest gated pod of team-a was gated 2h 15m 0s ago. Run `tollgate queue --tenant team-a` to see what each pod waits for.',
                },
              ),
            ],
          },
        ],
      },
    ]);
  });

  it('TollgatePolicyCommitRefused fires while the newest commit is refused, and clears once fixed', async () => {
    await promtoolTest([
      {
        interval: '1m',
        input_series: [
          { series: 'tollgate_policy_head_invalid{pod="tollgate-a"}', values: '0x10 1x20 0x10' },
        ],
        alert_rule_test: [
          { eval_time: '10m', alertname: 'TollgatePolicyCommitRefused', exp_alerts: [] },
          {
            eval_time: '20m',
            alertname: 'TollgatePolicyCommitRefused',
            exp_alerts: [firing('TollgatePolicyCommitRefused', {}, {})],
          },
          { eval_time: '35m', alertname: 'TollgatePolicyCommitRefused', exp_alerts: [] },
        ],
      },
    ]);
  });

  it('TollgatePolicyFetchStale fires on failing fetches and on a poller that stopped, not on a healthy poll', async () => {
    await promtoolTest([
      {
        // Healthy: a fetch every minute, no errors.
        interval: '1m',
        input_series: [
          {
            series: 'tollgate_policy_last_load_timestamp_seconds{pod="tollgate-a"}',
            values: '0+60x60',
          },
          {
            series: 'tollgate_policy_load_errors_total{pod="tollgate-a",reason="fetch"}',
            values: '0x60',
          },
        ],
        alert_rule_test: [
          { eval_time: '60m', alertname: 'TollgatePolicyFetchStale', exp_alerts: [] },
        ],
      },
      {
        // Every fetch fails from minute 10 (each attempt still stamps the timestamp).
        interval: '1m',
        input_series: [
          {
            series: 'tollgate_policy_last_load_timestamp_seconds{pod="tollgate-a"}',
            values: '0+60x60',
          },
          {
            series: 'tollgate_policy_load_errors_total{pod="tollgate-a",reason="fetch"}',
            values: '0x10 1+1x50',
          },
        ],
        alert_rule_test: [
          { eval_time: '10m', alertname: 'TollgatePolicyFetchStale', exp_alerts: [] },
          {
            eval_time: '30m',
            alertname: 'TollgatePolicyFetchStale',
            exp_alerts: [firing('TollgatePolicyFetchStale', {}, {})],
          },
        ],
      },
      {
        // The poller stops at minute 10: no attempt, no error, the timestamp stands still.
        interval: '1m',
        input_series: [
          {
            series: 'tollgate_policy_last_load_timestamp_seconds{pod="tollgate-a"}',
            values: '0+60x10 600x50',
          },
          {
            series: 'tollgate_policy_load_errors_total{pod="tollgate-a",reason="fetch"}',
            values: '0x60',
          },
        ],
        alert_rule_test: [
          { eval_time: '20m', alertname: 'TollgatePolicyFetchStale', exp_alerts: [] },
          {
            eval_time: '35m',
            alertname: 'TollgatePolicyFetchStale',
            exp_alerts: [firing('TollgatePolicyFetchStale', {}, {})],
          },
        ],
      },
    ]);
  });

  it('TollgateApiForbidden fires on repeated 403s of a verb, not on a single one', async () => {
    await promtoolTest([
      {
        interval: '1m',
        input_series: [
          {
            series: 'tollgate_api_requests_total{pod="tollgate-a",verb="patch",code="2xx"}',
            values: '0+10x40',
          },
          {
            series: 'tollgate_api_requests_total{pod="tollgate-a",verb="delete",code="403"}',
            values: '0x10 1x30',
          },
          {
            series: 'tollgate_api_requests_total{pod="tollgate-a",verb="patch",code="403"}',
            values: '0x20 1+1x20',
          },
        ],
        alert_rule_test: [
          { eval_time: '15m', alertname: 'TollgateApiForbidden', exp_alerts: [] },
          {
            eval_time: '30m',
            alertname: 'TollgateApiForbidden',
            exp_alerts: [
              firing(
                'TollgateApiForbidden',
                { verb: 'patch' },
                {
                  description:
                    'patch requests were forbidden 3 or more times in 15 minutes: a permission tollgate needs was revoked or an admission policy refuses it.',
                },
              ),
            ],
          },
        ],
      },
    ]);
  });

  it('a push race (rejected, retried) does not page; failing pushes still do', async () => {
    await promtoolTest([
      {
        interval: '1m',
        input_series: [
          {
            series: 'tollgate_audit_push_failures_total{pod="tollgate-a",reason="rejected"}',
            values: '0+5x40',
          },
          {
            series: 'tollgate_audit_push_failures_total{pod="tollgate-a",reason="auth"}',
            values: '0x20 1+1x20',
          },
        ],
        alert_rule_test: [
          { eval_time: '20m', alertname: 'TollgateAuditPushFailing', exp_alerts: [] },
          {
            eval_time: '35m',
            alertname: 'TollgateAuditPushFailing',
            exp_alerts: [firing('TollgateAuditPushFailing', {}, {})],
          },
        ],
      },
    ]);
  });

  // Each alert of the fault-isolation round: silent before its cause, firing after its
  // `for`, with the labels a reader needs to find the cause.
  const faultAlerts: {
    alert: string;
    series: { series: string; values: string }[];
    silentAt: string;
    firingAt: string;
    labels: Record<string, string>;
    /** The description as Prometheus renders it, where it names values. */
    description?: string;
  }[] = [
    {
      alert: 'TollgateReferenceUnreadable',
      series: [
        {
          series: 'tollgate_view_unreadable_references{pod="tollgate-a",reason="unserved"}',
          values: '0x10 1x40',
        },
        {
          series: 'tollgate_view_unreadable_references{pod="tollgate-a",reason="forbidden"}',
          values: '0x50',
        },
      ],
      silentAt: '20m',
      firingAt: '30m',
      labels: { reason: 'unserved' },
      description:
        'Referenced kinds unserved: 1. A CRD not installed, a typo in an ObjectCondition, or a kind the ClusterRole does not grant. Other pods and tenants go on as usual.',
    },
    {
      alert: 'TollgateWritesBlocked',
      series: [
        {
          series: 'tollgate_blocked_writes_total{pod="tollgate-a",tenant="team-a",code="403"}',
          values: '0x10 1x40',
        },
        {
          series: 'tollgate_blocked_writes_total{pod="tollgate-a",tenant="team-b",code="403"}',
          values: '0x50',
        },
      ],
      silentAt: '10m',
      firingAt: '15m',
      labels: { tenant: 'team-a', code: '403' },
      description:
        "Writes of team-a answered 403 are Blocked until the pod or the policy changes; each has a Blocked record in the audit trail with the API's reason.",
    },
    {
      alert: 'TollgateOrphanedGates',
      series: [
        ...leaderA,
        {
          series: 'tollgate_pods{pod="tollgate-a",tenant="team-a",state="orphaned"}',
          values: '0x10 3x40',
        },
        // A former leader's stale count: must not count.
        {
          series: 'tollgate_pods{pod="tollgate-b",tenant="team-b",state="orphaned"}',
          values: '2x50',
        },
      ],
      silentAt: '20m',
      firingAt: '30m',
      labels: { tenant: 'team-a' },
      description:
        "Pods of team-a carrying a gate no GatePolicy names: 3. They carry a gate no GatePolicy names (a renamed or deleted policy); the tenant's orphanedGates setting (Review by default) decides what happens to them.",
    },
    {
      alert: 'TollgateResizeSignalUnreadable',
      series: [
        {
          series:
            'tollgate_resize_signal_unreadable{pod="tollgate-a",policy="api",signal="memory",read="error"}',
          values: '0x10 1x60',
        },
      ],
      silentAt: '30m',
      firingAt: '45m',
      labels: { policy: 'api', signal: 'memory' },
      description:
        'Signal memory of ResizePolicy api has not been readable for 30 minutes (query error or no samples); no pod of it is made smaller until it is.',
    },
    {
      alert: 'TollgateResizeStateRejected',
      series: [
        {
          series: 'tollgate_resize_state_rejected_total{pod="tollgate-a",reason="forged"}',
          values: '0x10 1x40',
        },
      ],
      silentAt: '10m',
      firingAt: '12m',
      labels: { reason: 'forged' },
      description:
        "tollgate ignored resize state it did not seal for the pod (forged) in the last 15 minutes: someone edits tollgate's annotations on pods (unsigned, forged), or the state key changed (unknown-key). The audit trail names each pod.",
    },
    {
      alert: 'TollgatePolicySavedInForce',
      series: [{ series: 'tollgate_policy_saved_in_force{pod="tollgate-a"}', values: '0x10 1x40' }],
      silentAt: '15m',
      firingAt: '25m',
      labels: {},
    },
    {
      alert: 'TollgatePolicyRestartRequired',
      series: [
        { series: 'tollgate_policy_restart_required{pod="tollgate-a"}', values: '0x10 1x40' },
      ],
      silentAt: '15m',
      firingAt: '25m',
      labels: {},
    },
    {
      alert: 'TollgateAuditHistoryRewritten',
      series: [
        { series: 'tollgate_audit_history_rewritten{pod="tollgate-a"}', values: '0x10 1x40' },
      ],
      silentAt: '10m',
      firingAt: '15m',
      labels: {},
    },
    {
      alert: 'TollgateAuditRecoveryPending',
      series: [
        { series: 'tollgate_audit_recovery_pending{pod="tollgate-a"}', values: '0x10 1x40' },
      ],
      silentAt: '15m',
      firingAt: '25m',
      labels: {},
    },
    {
      alert: 'TollgateWritePathDegraded',
      series: [{ series: 'tollgate_dispatch_degraded{pod="tollgate-a"}', values: '0x10 1x40' }],
      silentAt: '15m',
      firingAt: '25m',
      labels: {},
    },
    {
      alert: 'TollgateStaleGuardDegraded',
      series: [{ series: 'tollgate_stale_guard_degraded{pod="tollgate-a"}', values: '0x10 1x40' }],
      silentAt: '15m',
      firingAt: '25m',
      labels: {},
    },
    {
      alert: 'TollgateStaleWaitLong',
      // A pod waiting since minute 5: over 300 s from minute 10, for 5 minutes by 15.
      series: [
        {
          series: 'tollgate_stale_longest_wait_seconds{pod="tollgate-a",loop="gate-release"}',
          values: '0x5 60+60x40',
        },
      ],
      silentAt: '12m',
      firingAt: '17m',
      labels: { loop: 'gate-release' },
      description:
        'The gate-release loop has a pod waiting 12m 0s for its informer to catch up (informer stuck or far behind).',
    },
  ];

  for (const { alert, series, silentAt, firingAt, labels, description } of faultAlerts) {
    it(`${alert} stays silent before its cause has lasted and fires after`, async () => {
      const rule = alerts.find((r) => r.alert === alert);
      assert.ok(rule, `alert ${alert} is shipped`);
      await promtoolTest([
        {
          interval: '1m',
          input_series: series,
          alert_rule_test: [
            { eval_time: silentAt, alertname: alert, exp_alerts: [] },
            {
              eval_time: firingAt,
              alertname: alert,
              exp_alerts: [
                {
                  exp_labels: { ...rule.labels, ...labels },
                  exp_annotations: {
                    ...rule.annotations,
                    ...(description === undefined ? {} : { description }),
                  },
                },
              ],
            },
          ],
        },
      ]);
    });
  }

  it('a healthy run fires none of the alerts', async () => {
    await promtoolTest([
      {
        interval: '1m',
        input_series: [
          ...leaderA,
          {
            series: 'tollgate_oldest_gated_pod_timestamp_seconds{pod="tollgate-a",tenant="team-a"}',
            values: '0+60x200',
          },
          { series: 'tollgate_policy_head_invalid{pod="tollgate-a"}', values: '0x200' },
          {
            series: 'tollgate_resize_state_rejected_total{pod="tollgate-a",reason="forged"}',
            values: '0x200',
          },
          {
            series: 'tollgate_policy_last_load_timestamp_seconds{pod="tollgate-a"}',
            values: '0+60x200',
          },
          {
            series: 'tollgate_policy_load_errors_total{pod="tollgate-a",reason="fetch"}',
            values: '0x200',
          },
          {
            series: 'tollgate_api_requests_total{pod="tollgate-a",verb="patch",code="2xx"}',
            values: '0+10x200',
          },
          {
            series: 'tollgate_audit_push_failures_total{pod="tollgate-a",reason="rejected"}',
            values: '0+1x200',
          },
          { series: 'tollgate_audit_backlog{pod="tollgate-a"}', values: '0x200' },
          { series: 'tollgate_audit_history_rewritten{pod="tollgate-a"}', values: '0x200' },
          { series: 'tollgate_expired_total{pod="tollgate-a",action="Review"}', values: '0x200' },
          {
            series: 'tollgate_releases_total{pod="tollgate-a",tenant="team-a",result="stale"}',
            values: '0x200',
          },
          { series: 'tollgate_resizes_total{pod="tollgate-a",result="stale"}', values: '0x200' },
          {
            series: 'tollgate_view_unreadable_references{pod="tollgate-a",reason="unserved"}',
            values: '0x200',
          },
          {
            series: 'tollgate_blocked_writes_total{pod="tollgate-a",tenant="team-a",code="403"}',
            values: '0x200',
          },
          {
            series: 'tollgate_pods{pod="tollgate-a",tenant="team-a",state="orphaned"}',
            values: '0x200',
          },
          {
            series:
              'tollgate_resize_signal_unreadable{pod="tollgate-a",policy="api",signal="memory",read="error"}',
            values: '0x200',
          },
          { series: 'tollgate_policy_restart_required{pod="tollgate-a"}', values: '0x200' },
          { series: 'tollgate_dispatch_degraded{pod="tollgate-a"}', values: '0x200' },
        ],
        alert_rule_test: alerts.map((a) => ({
          eval_time: '190m',
          alertname: a.alert,
          exp_alerts: [],
        })),
      },
    ]);
  });
});
