/**
 * The chart's PrometheusRule groups are generated from the kustomize component
 * (scripts/gen-chart-files.ts), not copied by hand: the committed file is exactly what the
 * generator makes of deploy/components/monitoring/prometheusrule.yaml, and the generator
 * keeps every group, rule and comment while refusing a source it cannot read.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import {
  chartRuleGroups,
  chartRuleGroupsFile,
  ruleSource,
} from '../../../scripts/gen-chart-files.ts';

const root = resolve(import.meta.dirname, '../../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

const rule = (alert: string): string =>
  [
    'apiVersion: monitoring.coreos.com/v1',
    'kind: PrometheusRule',
    'metadata:',
    '  name: tollgate',
    'spec:',
    '  groups:',
    '    - name: tollgate',
    '      rules:',
    `        # ${alert} fires when it should`,
    `        - alert: ${alert}`,
    '          expr: vector(1)',
    '',
  ].join('\n');

describe("the chart's PrometheusRule groups", () => {
  it('are what the generator makes of the kustomize component, byte for byte', () => {
    assert.equal(read(chartRuleGroupsFile), chartRuleGroups(read(ruleSource)));
  });

  it('hold the same groups as the kustomize PrometheusRule once parsed', () => {
    const source = parse(read(ruleSource)) as { spec: { groups: unknown[] } };
    const chart = parse(read(chartRuleGroupsFile)) as { groups: unknown[] };
    assert.deepEqual(chart.groups, source.spec.groups);
    assert.ok(chart.groups.length >= 2, `${chart.groups.length} groups`);
  });

  for (const alert of ['TollgateA', 'TollgateNewAlert']) {
    it(`follow a rule added to the source (${alert}), with its comment`, () => {
      const generated = chartRuleGroups(rule(alert));
      assert.match(generated, new RegExp(`^      # ${alert} fires when it should$`, 'm'));
      assert.deepEqual(parse(generated), {
        groups: [{ name: 'tollgate', rules: [{ alert, expr: 'vector(1)' }] }],
      });
    });
  }

  for (const [what, source, message] of [
    ['a source without spec', 'kind: PrometheusRule\n', /no top-level 'spec:' line/],
    [
      'a line outside spec after it',
      'spec:\n  groups: []\nstatus: {}\n',
      /line 3: not inside spec/,
    ],
  ] as const) {
    it(`refuse ${what}, naming the line`, () => {
      assert.throws(() => chartRuleGroups(source), message);
    });
  }

  it('are checked by npm run schemas:check (the --check mode passes on the committed tree)', () => {
    const check = spawnSync(
      process.execPath,
      [join(root, 'scripts/gen-chart-files.ts'), '--check'],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(check.status, 0, check.stderr);
    assert.match(check.stdout, /up to date/);
  });
});
