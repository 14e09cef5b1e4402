/**
 * Generates the Helm chart's copy of what the kustomize base already says, so the two
 * cannot drift: `chart/tollgate/files/prometheusrule-groups.yaml` is the `spec` of
 * `deploy/components/monitoring/prometheusrule.yaml` (the single source of truth),
 * comments included, one indentation level out.
 *
 *   node scripts/gen-chart-files.ts          write the chart's file (npm run chart:files)
 *   node scripts/gen-chart-files.ts --check  fail (exit 1) when the committed file differs,
 *                                            so an alert added to deploy/ without
 *                                            regenerating the chart cannot pass CI
 *                                            (run by npm run schemas:check)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
export const ruleSource = 'deploy/components/monitoring/prometheusrule.yaml';
export const chartRuleGroupsFile = 'chart/tollgate/files/prometheusrule-groups.yaml';

const header =
  `# Generated from ${ruleSource} by scripts/gen-chart-files.ts\n` +
  `# (npm run chart:files). Do not edit: change the kustomize component and regenerate.\n`;

/** The chart's rule groups file from the kustomize PrometheusRule's text. */
export function chartRuleGroups(source: string): string {
  const lines = source.split('\n');
  const spec = lines.indexOf('spec:');
  if (spec < 0) throw new Error(`${ruleSource}: no top-level 'spec:' line`);
  const body = lines.slice(spec + 1).map((line, index) => {
    if (line === '') return line;
    if (!line.startsWith('  '))
      throw new Error(
        `${ruleSource}, line ${spec + 2 + index}: not inside spec (every line after 'spec:' is indented)`,
      );
    return line.slice(2);
  });
  return header + body.join('\n');
}

function generated(): string {
  return chartRuleGroups(readFileSync(join(root, ruleSource), 'utf8'));
}

if (import.meta.main) {
  if (process.argv.includes('--check')) {
    const committed = readFileSync(join(root, chartRuleGroupsFile), 'utf8');
    if (committed !== generated()) {
      process.stderr.write(
        `${chartRuleGroupsFile} is out of date with ${ruleSource}\nrun: npm run chart:files\n`,
      );
      process.exitCode = 1;
    } else {
      process.stdout.write(`chart:check: ${chartRuleGroupsFile} up to date\n`);
    }
  } else {
    writeFileSync(join(root, chartRuleGroupsFile), generated());
    process.stdout.write(`wrote ${chartRuleGroupsFile}\n`);
  }
}
