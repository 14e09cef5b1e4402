/**
 * Generates docs/policy-reference.md from schemas/*.schema.json, so the reference can
 * never drift from what tollgate validates. `npm run docs:policy` writes it; the unit
 * test test/unit/policy/reference-doc.test.ts fails when the committed file is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { format } from 'prettier';
import { defaultStaleness, settingsFile } from '../src/policy/compile.ts';
import { limits } from '../src/policy/parse.ts';
import { apiVersion, policyKinds, schemaDir, type PolicyKind } from '../src/policy/schema.ts';

type Schema = {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  examples?: unknown[];
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minItems?: number;
  maxItems?: number;
  discriminator?: { propertyName: string };
  title?: string;
};

export const referencePath = join(import.meta.dirname, '../docs/policy-reference.md');

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const code = (value: unknown): string =>
  `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;

function typeOf(schema: Schema): string {
  if (schema.const !== undefined) return code(schema.const);
  if (schema.enum) return schema.enum.map(code).join(' | ');
  if (schema.oneOf && !schema.discriminator) return schema.oneOf.map(typeOf).join(' or ');
  if (schema.description?.includes('A duration')) return 'duration';
  if (schema.type === 'array') return `list of ${schema.items ? typeOf(schema.items) : 'any'}`;
  if (
    schema.type === 'object' &&
    schema.additionalProperties &&
    typeof schema.additionalProperties === 'object' &&
    !schema.properties
  ) {
    return `map of ${typeOf(schema.additionalProperties)}`;
  }
  if (schema.format) return `${schema.type} (${schema.format})`;
  return String(schema.type ?? 'any');
}

function constraints(schema: Schema): string[] {
  const out: string[] = [];
  if (schema.minimum !== undefined) out.push(`≥ ${schema.minimum}`);
  if (schema.exclusiveMinimum !== undefined) out.push(`> ${schema.exclusiveMinimum}`);
  if (schema.maximum !== undefined) out.push(`≤ ${schema.maximum}`);
  if (schema.minItems !== undefined) out.push(`at least ${schema.minItems}`);
  if (schema.maxItems !== undefined) out.push(`at most ${schema.maxItems}`);
  return out;
}

interface Row {
  readonly path: string;
  readonly schema: Schema;
  readonly required: boolean;
}

function rows(
  schema: Schema,
  prefix: string,
  out: Row[],
  sections: { title: string; rows: Row[]; description?: string }[],
): void {
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    const path = prefix ? `${prefix}.${name}` : name;
    out.push({ path, schema: child, required: schema.required?.includes(name) ?? false });
    descend(child, path, out, sections);
  }
}

function descend(
  schema: Schema,
  path: string,
  out: Row[],
  sections: { title: string; rows: Row[]; description?: string }[],
): void {
  if (schema.properties) rows(schema, path, out, sections);
  if (schema.type === 'array' && schema.items) descend(schema.items, `${path}[]`, out, sections);
  if (
    schema.additionalProperties &&
    typeof schema.additionalProperties === 'object' &&
    schema.additionalProperties.properties
  ) {
    rows(schema.additionalProperties, `${path}.<name>`, out, sections);
  }
  if (schema.discriminator && schema.oneOf) {
    const tag = schema.discriminator.propertyName;
    for (const variant of schema.oneOf) {
      const value = variant.properties?.[tag]?.const;
      const variantRows: Row[] = [];
      rows(variant, path, variantRows, sections);
      sections.push({
        title: `\`${path}\` with \`${tag}: ${String(value)}\``,
        rows: variantRows,
        ...(variant.description ? { description: variant.description } : {}),
      });
    }
  }
}

function table(list: readonly Row[]): string {
  const lines = [
    '| Field | Type | Required | Default | Description |',
    '| --- | --- | --- | --- | --- |',
  ];
  for (const row of list) {
    const s = row.schema;
    const notes = [
      s.description ?? '',
      ...constraints(s),
      ...(s.examples ? [`Example: ${s.examples.map(code).join(', ')}`] : []),
    ].filter(Boolean);
    lines.push(
      `| \`${row.path}\` | ${cell(typeOf(s))} | ${row.required ? 'yes' : ''} | ${s.default !== undefined ? cell(code(s.default)) : ''} | ${cell(notes.join(' '))} |`,
    );
  }
  return lines.join('\n');
}

function folderOf(kind: PolicyKind): string {
  switch (kind) {
    case 'Settings':
      return '';
    case 'Tenant':
      return 'tenants/';
    case 'GatePolicy':
      return 'gates/';
    case 'ResizePolicy':
      return 'resize/';
    case 'StalenessPolicy':
      return '';
    case 'Approval':
      return 'approvals/';
  }
}

export async function renderPolicyReference(): Promise<string> {
  const parts: string[] = [
    '# Policy reference',
    '<!-- Generated from schemas/*.schema.json by scripts/gen-policy-reference.ts (npm run docs:policy). Do not edit. -->',
    `A tollgate policy repository is a folder of YAML files (\`*.yaml\`, \`*.yml\`; dot-folders are skipped). Every document has \`apiVersion: ${apiVersion}\`, a \`kind\`, \`metadata.name\` and a \`spec\`; a file may hold several documents separated by \`---\`. Folder names are free; [policy-examples/](../policy-examples/) shows a complete repository for three tenants.`,
    "Editors validate while you type with a modeline on the first line naming the schema of the document's kind by a path relative to the file. The schemas are the files in `schemas/` of the tollgate you run (the checkout you built the image from: the image's `tollgate version` prints that commit as its revision, and the image holds them in `/app/schemas`). Copy them into your policy repository, e.g. `git -C path/to/tollgate archive COMMIT schemas | tar -x -C path/to/policy-repo`, and point at them; from `gates/team.yaml` with `schemas/` at the repository's root:\n\n```yaml\n# yaml-language-server: $schema=../schemas/GatePolicy.schema.json\n```\n\ntollgate reads only `*.yaml`/`*.yml`, so the schema files do not disturb the policy; [policy-examples/](../policy-examples/) points at this repository's `schemas/` the same way. Releases also attach the schemas (CHANGELOG.md).",
    'Durations are strings such as `500ms`, `30s`, `5m`, `1h30m`, `7d`. Quantities are Kubernetes quantities such as `500m`, `2`, `1.5Gi`, `256Mi` (write them as strings in YAML).',
    "Label keys, label values and selectors (`spec.selector`, a gang's `groupLabel` and `sizeAnnotation`) are checked as the API server checks them, with its messages: a key is `[prefix/]name`, the prefix a lowercase DNS subdomain of at most 253 characters, the name at most 63 letters, digits, `-`, `_` or `.` that start and end with a letter or digit (an annotation key may write its prefix in capitals); a value is empty or such a name; `In` and `NotIn` need values, `Exists` and `DoesNotExist` take none.",
    '## Kinds',
    policyKinds.map((kind) => `- [${kind}](#${kind.toLowerCase()})`).join('\n'),
  ];
  for (const kind of policyKinds) {
    const schema = JSON.parse(
      readFileSync(join(schemaDir, `${kind}.schema.json`), 'utf8'),
    ) as Schema;
    const sections: { title: string; rows: Row[]; description?: string }[] = [];
    const main: Row[] = [];
    rows(schema, '', main, sections);
    const where =
      kind === 'Settings'
        ? `Exactly one, in \`${settingsFile}\` at the top of the policy folder.`
        : kind === 'StalenessPolicy'
          ? 'At most one per repository.'
          : `Any number, names unique per kind${folderOf(kind) ? `; by convention under \`${folderOf(kind)}\`` : ''}.`;
    parts.push(
      `## ${kind}`,
      schema.description ?? '',
      `${where} Schema: [schemas/${kind}.schema.json](../schemas/${kind}.schema.json).`,
      table(main),
      ...sections.flatMap((s) => [`### ${s.title}`, s.description ?? '', table(s.rows)]),
    );
    if (kind === 'StalenessPolicy') {
      parts.push(
        'Without a StalenessPolicy these values are in force:',
        `\`\`\`json\n${JSON.stringify({ ...defaultStaleness, source: undefined }, null, 2)}\n\`\`\``,
      );
    }
  }
  parts.push(
    '## Checks beyond the schema',
    [
      'Every error names the file, the YAML document (0-based), the field path and the reason, e.g. `gates/ml.yaml#1 spec.gate: gate "x.io/a" is not under a prefix tenant "ml" owns (ml.tollgate.io/)`. All errors are reported at once.',
      '',
      '- Durations and quantities parse; quantities are not negative.',
      '- Resize bounds: `min` ≤ `max`, `step` > 0, `min` > 0; at least one container or the pod has bounds; signal names are unique; a signal has `scaleUpAbove` and/or `scaleDownBelow`, and `scaleDownBelow` < `scaleUpAbove`.',
      '- `recheck.initial` ≤ `recheck.max`; `requeue.base` ≤ `requeue.max`.',
      '- Names are unique per kind; one gate is governed by one GatePolicy.',
      '- References resolve: `GatePolicy.spec.tenant`, `ResizePolicy.spec.tenant`, Approval targets (a Pod in a namespace some tenant owns; an existing ResizePolicy, and a namespace of its tenant).',
      "- Tenancy: a gate falls under a prefix its tenant owns; an ObjectCondition's `object.namespace` is one of the tenant's; every vector selector of every PromQL query (signals, SLO), parsed with the Prometheus grammar, carries `namespace=\"$namespace\"` (the pod's namespace) and no other `namespace` matcher (regex, negative and literal matchers, `info()`, comments and text that does not parse are refused, see docs/security.md); two tenants never share a namespace or overlapping gate prefixes.",
      '- Selectors: `In`/`NotIn` need values, `Exists`/`DoesNotExist` take none.',
      '- An ObjectCondition checks either `conditionType` (and `status`) or `field` with `equals`.',
      '- Approval actions fit their target: `Release`/`Cancel` a Pod, `Resume` a ResizePolicy.',
    ].join('\n'),
    '## Limits on untrusted YAML',
    [
      'Policy files come from pull requests, so parsing is defensive. Each limit is refused with an error naming the file:',
      '',
      `- one file at most ${limits.maxFileBytes} bytes; all policy files together at most ${limits.maxRepoBytes} bytes; at most ${limits.maxFiles} files; at most ${limits.maxDocumentsPerFile} documents per file;`,
      `- nesting at most ${limits.maxNestingDepth} levels and at most ${limits.maxTokensPerFile} YAML tokens per file (checked by the parser as it reads, in a worker thread so a poll never blocks the process);`,
      `- a Git fetch may download at most ${limits.maxFetchBytes} bytes;`,
      `- aliases may expand to at most ${limits.maxAliasCount} nodes per document (no "billion laughs");`,
      '- duplicate keys, merge keys (`<<`) and tags outside the YAML 1.2 core schema (`!!js/function`, custom `!Tags`) are errors;',
      '- symbolic links are not followed.',
    ].join('\n'),
  );
  return format(parts.join('\n\n') + '\n', { parser: 'markdown', proseWrap: 'preserve' });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(referencePath, await renderPolicyReference());
  process.stdout.write(`wrote docs/policy-reference.md\n`);
}
