/**
 * docs/install.md's sizing table says what was measured and where: the whole `tollgate
 * run` figures it gives are the ones docs/BENCHMARKS.md states (its summary row on memory,
 * and its 50,000-pod run), every request covers the figures in its row, and the defaults
 * shipped (deploy/base, the chart) are the 1,000-pod row.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

const root = resolve(import.meta.dirname, '../../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

/** The rows of the first Markdown table after `heading`, as cells by column header. */
function tableAfter(markdown: string, heading: string): Record<string, string>[] {
  const lines = markdown.slice(markdown.indexOf(heading)).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith('|'));
  const table = lines.slice(first, end);
  assert.ok(first >= 0 && table.length > 2, `a table after ${heading}`);
  const cells = (line: string) =>
    line
      .slice(1, -1)
      .split('|')
      .map((c) => c.trim());
  const [header, , ...rows] = table;
  const names = cells(header!);
  return rows.map((row) => Object.fromEntries(cells(row).map((c, i) => [names[i], c])));
}

const mebibytes = (quantity: string): number => {
  const match = /^(\d+)(Mi|Gi)$/.exec(quantity.replaceAll('`', ''));
  assert.ok(match, `a quantity in Mi or Gi: ${quantity}`);
  return Number(match[1]) * (match[2] === 'Gi' ? 1024 : 1);
};
const megabytesIn = (text: string): number[] =>
  [...text.matchAll(/([\d,]+(?:\.\d+)?) MB/g)].map((m) => Number(m[1]!.replaceAll(',', '')));

/** BENCHMARKS.md's whole-process figures: "**179 MB at 0 pods, 299 MB at 10,000** (peak 306)". */
function benchmarkedWholeRun(): { atZero: number; atTenThousand: number; peak: number } {
  const summary = read('docs/BENCHMARKS.md')
    .split('\n')
    .find((l) => l.startsWith('| memory under 150 MB at 10,000 pods'));
  assert.ok(summary, 'BENCHMARKS.md has its memory summary row');
  const figures = /\*\*(\d+) MB at 0 pods, (\d+) MB at 10,000\*\* \(peak (\d+)\)/.exec(summary);
  assert.ok(figures, `the summary row gives the whole-process figures: ${summary}`);
  return { atZero: +figures[1]!, atTenThousand: +figures[2]!, peak: +figures[3]! };
}

/** BENCHMARKS.md's whole-process figure at `pods` (as written there): "**279 MB at 50,000** (peak 366)". */
function benchmarkedWholeRunAt(pods: string): { rss: string; peak: string } {
  const figure = new RegExp(`\\*\\*(\\d+) MB at ${pods}\\*\\* \\(peak (\\d+)\\)`);
  const line = read('docs/BENCHMARKS.md')
    .split('\n')
    .find((l) => figure.test(l));
  assert.ok(line, `BENCHMARKS.md gives a whole tollgate run at ${pods} pods`);
  const [, rss, peak] = figure.exec(line) ?? [];
  return { rss: rss!, peak: peak! };
}

const sizing = tableAfter(read('docs/install.md'), '## Sizing');
const row = (pods: string) => sizing.find((r) => r['pods watched'] === pods) ?? assert.fail(pods);
const whole = 'whole `tollgate run`, RSS';

describe('the sizing table in docs/install.md', () => {
  it('has the rows the issue asks for: 1,000, 10,000 and 50,000 pods', () => {
    assert.deepEqual(
      sizing.map((r) => r['pods watched']),
      ['1,000', '10,000', '50,000'],
    );
  });

  it("cites BENCHMARKS.md's whole-process figures at 0 and 10,000 pods", () => {
    const measured = benchmarkedWholeRun();
    assert.match(
      row('10,000')[whole] ?? '',
      new RegExp(`^${measured.atTenThousand} MB \\(peak ${measured.peak} MB\\)`),
    );
    assert.match(row('1,000')[whole] ?? '', new RegExp(`${measured.atZero} MB at 0 pods`));
  });

  it("cites BENCHMARKS.md's whole-process figure at 1,000 pods, the defaults' row", () => {
    const { rss, peak } = benchmarkedWholeRunAt('1,000');
    assert.match(
      row('1,000')[whole] ?? '',
      new RegExp(`; ${rss} MB at 1,000 \\(peak ${peak} MB\\)`),
    );
  });

  it("cites BENCHMARKS.md's whole-process figure at 50,000 pods", () => {
    const { rss, peak } = benchmarkedWholeRunAt('50,000');
    assert.match(row('50,000')[whole] ?? '', new RegExp(`^${rss} MB \\(peak ${peak} MB\\)`));
  });

  it('gives every row a request above every figure measured in it', () => {
    for (const r of sizing) {
      const request = mebibytes(r['memory request']!) * 1.048576;
      const figures = [...megabytesIn(r[whole]!), ...megabytesIn(r['the view alone, RSS']!)];
      assert.ok(figures.length > 0, `${r['pods watched']}: a figure measured`);
      for (const mb of figures)
        assert.ok(request >= mb, `${r['pods watched']}: request ${request} MB < ${mb} MB`);
      assert.ok(mebibytes(r['memory limit']!) > mebibytes(r['memory request']!));
    }
  });

  it('is what deploy/base and the chart ship by default: the 1,000-pod row', () => {
    const defaults = row('1,000');
    const deployment = parseAllDocuments(read('deploy/base/deployment.yaml'))
      .map((d) => d.toJS())
      .find((d) => d?.kind === 'Deployment');
    const container = deployment.spec.template.spec.containers[0];
    const values = parse(read('chart/tollgate/values.yaml'));
    for (const resources of [container.resources, values.resources]) {
      assert.equal(resources.requests.memory, defaults['memory request']!.replaceAll('`', ''));
      assert.equal(resources.limits.memory, defaults['memory limit']!.replaceAll('`', ''));
    }
    const heap = defaults['`--max-old-space-size`'];
    assert.equal(
      container.env.find((e: { name: string }) => e.name === 'NODE_OPTIONS').value,
      `--max-old-space-size=${heap}`,
    );
    assert.equal(String(values.maxHeapMiB), heap);
  });
});
