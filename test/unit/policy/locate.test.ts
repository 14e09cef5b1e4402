/**
 * Errors that name a field say where it is: line and column in the file, for an author,
 * an editor or a CI annotation (src/policy/locate.ts, wired in load.ts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { loadPolicyFromFiles, type PolicyFile } from '../../../src/policy/load.ts';
import { pathParts } from '../../../src/policy/locate.ts';

describe('a field path read back into its parts', () => {
  const table: [string, (string | number)[]][] = [
    ['spec.gate', ['spec', 'gate']],
    ['spec.conditions[1].minNodes', ['spec', 'conditions', 1, 'minNodes']],
    ['spec.selector.matchLabels["app/x.y"]', ['spec', 'selector', 'matchLabels', 'app/x.y']],
    ['spec.selector.matchLabels["a\\"b"].x', ['spec', 'selector', 'matchLabels', 'a"b', 'x']],
    ['spec.containers.app-server.cpu', ['spec', 'containers', 'app-server', 'cpu']],
  ];
  for (const [path, parts] of table)
    it(path, () => {
      assert.deepEqual(pathParts(path), parts);
    });
});

const v = 'apiVersion: tollgate.io/v1alpha1\n';
const files: PolicyFile[] = [
  { path: 'tollgate.yaml', content: `${v}kind: Settings\nspec:\n  cluster: test\n` },
  {
    path: 'tenants/a.yaml',
    content: `${v}kind: Tenant\nmetadata:\n  name: team-a\nspec:\n  namespaces: [a1]\n  gatePrefixes: [a.tollgate.io/]\n`,
  },
  {
    path: 'gates/two.yaml',
    content: [
      `${v}kind: GatePolicy`,
      'metadata: { name: first }',
      'spec:',
      '  tenant: team-a',
      '  gate: a.tollgate.io/first',
      '---',
      'apiVersion: tollgate.io/v1alpha1',
      'kind: GatePolicy',
      'metadata: { name: second }',
      'spec:',
      '  tenant: team-a',
      '  gate: b.tollgate.io/second',
      '  selector:',
      '    matchLabels:',
      '      "Bad.Example/app": web',
      '    matchExpressions:',
      '      - { key: zone, operator: In, values: [ok, "not ok"] }',
      '',
    ].join('\n'),
  },
  {
    path: 'gates/missing.yaml',
    content: `${v}kind: GatePolicy\nmetadata: { name: missing }\nspec:\n  tenant: team-a\n`,
  },
];

describe('errors that name a field carry its line and column', () => {
  const result = loadPolicyFromFiles(files);
  assert.equal(result.ok, false);
  const errors = result.ok ? [] : result.errors;
  const at = (file: string, path: string) =>
    errors.filter((e) => e.file === file && e.path === path).map((e) => [e.line, e.column]);

  const table: [string, string, string, [number, number]][] = [
    ['in the second document of a file', 'gates/two.yaml', 'spec.gate', [13, 9]],
    [
      'a quoted label key',
      'gates/two.yaml',
      'spec.selector.matchLabels["Bad.Example/app"]',
      [16, 26],
    ],
    [
      'an item of a flow sequence',
      'gates/two.yaml',
      'spec.selector.matchExpressions[0].values[1]',
      [18, 49],
    ],
    ['a missing required field: its parent', 'gates/missing.yaml', 'spec.gate', [5, 3]],
  ];
  for (const [name, file, path, position] of table)
    it(`${name}: ${file} ${path}`, () => {
      assert.deepEqual(at(file, path)[0], position, errors.map(formatPolicyError).join('\n'));
    });

  it('and the printed line says it', () => {
    const printed = errors.map(formatPolicyError);
    assert.ok(
      printed.some((p) => /^gates\/two\.yaml#1 spec\.gate: .* \(line 13, column 9\)$/.test(p)),
      printed.join('\n'),
    );
  });
});
