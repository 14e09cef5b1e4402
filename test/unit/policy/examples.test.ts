import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { loadPolicyFromDirectory, readPolicyDirectory } from '../../../src/policy/load.ts';
import { parsePolicyFile } from '../../../src/policy/parse.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { loadSchema, policyKinds } from '../../../src/policy/schema.ts';

const examples = resolve(import.meta.dirname, '../../../policy-examples');
const schemas = resolve(import.meta.dirname, '../../../schemas');

test('the example policy repository validates and compiles', async () => {
  const result = await loadPolicyFromDirectory(examples, { commit: 'abc123' });
  assert.equal(result.ok, true, result.ok ? '' : result.errors.map(formatPolicyError).join('\n'));
  if (!result.ok) return;
  const { policy } = result;
  assert.equal(policy.commit, 'abc123');
  assert.deepEqual([...policy.tenants.keys()].sort(), ['api', 'data-pipeline', 'ml-training']);
  const ml = policy.tenants.get('ml-training');
  assert.deepEqual(ml?.budget, {
    pods: 64,
    resources: { cpu: 256_000, memory: 2 * 2 ** 40, 'nvidia.com/gpu': 32 },
    neverGatedPods: 'Charge',
    unreadyNodeGraceMs: 300_000,
  });
  assert.equal(policy.tenants.get('data-pipeline')?.budget.neverGatedPods, 'Ignore');
  const gang = policy.gatePolicies.find((g) => g.name === 'gpu-gang');
  assert.deepEqual(gang?.expiry, { afterMs: 12 * 3_600_000, action: 'Cancel' });
  assert.deepEqual(gang?.conditions[2], { type: 'ImagePresent', minNodes: 2 });
  assert.deepEqual(gang?.conditions[3], {
    type: 'ObjectCondition',
    object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'dataset-ready' },
    field: 'data.ready',
    equals: 'true',
  });
  assert.deepEqual(gang?.source, { file: 'gates/ml-training.yaml', document: 0 });
  assert.deepEqual(policy.gatePolicies.find((g) => g.name === 'eval')?.source, {
    file: 'gates/ml-training.yaml',
    document: 1,
  });
  const api = policy.resizePolicies[0];
  assert.deepEqual(Object.keys(api?.containers ?? {}).sort(), ['cache', 'proxy', 'worker']);
  assert.deepEqual(api?.containers.proxy?.cpu, { min: 250, max: 4000, step: 250 });
  assert.deepEqual(api?.containers.cache?.memory, {
    min: 512 * 2 ** 20,
    max: 8 * 2 ** 30,
    step: 512 * 2 ** 20,
  });
  assert.equal(api?.slo?.forMs, 300_000);
  assert.equal(policy.staleness.source.file, 'staleness.yaml');
  assert.equal(policy.approvals[0]?.expiresAt, Date.UTC(2099, 11, 31, 23, 59, 59));
  assert.equal(policy.settings.audit.batch.maxDelayMs, 2_000);
});

/**
 * Modelines name the schema of the file's kind by a path relative to the file, into this
 * repository's schemas/: they resolve in a checkout today (docs/policy-reference.md says
 * how a policy repository of the user's own gets the same files).
 */
test('every example file parses on its own and its modeline names the schema of its kind in schemas/', async () => {
  const { files, errors } = await readPolicyDirectory(examples);
  assert.deepEqual(errors, []);
  assert.ok(files.length >= 9, `only ${files.length} files`);
  for (const file of files) {
    const parsed = parsePolicyFile(file.path, file.content);
    assert.deepEqual(parsed.errors, [], file.path);
    const modeline = /^# yaml-language-server: \$schema=(\S+)\n/.exec(file.content);
    assert.ok(modeline, `${file.path} starts with a yaml-language-server modeline`);
    const schemaPath = resolve(examples, dirname(file.path), modeline[1]!);
    assert.equal(dirname(schemaPath), schemas, `${file.path}: ${modeline[1]} is in schemas/`);
    assert.ok(existsSync(schemaPath), `${file.path}: ${modeline[1]} exists`);
    const schema = JSON.parse(readFileSync(schemaPath, 'utf8')) as { title: string };
    for (const doc of parsed.documents) {
      assert.equal((doc.value as { kind: string }).kind, schema.title, `${file.path}#${doc.index}`);
    }
  }
});

test('every kind appears in the examples', async () => {
  const { files } = await readPolicyDirectory(examples);
  const kinds = new Set(
    files.flatMap((f) =>
      parsePolicyFile(f.path, f.content).documents.map((d) => (d.value as { kind: string }).kind),
    ),
  );
  assert.deepEqual([...kinds].sort(), [...policyKinds].sort());
});

test('every schema forbids unknown fields on every object', () => {
  for (const kind of policyKinds) {
    const pending: unknown[] = [loadSchema(kind)];
    while (pending.length > 0) {
      const node = pending.pop();
      if (typeof node !== 'object' || node === null) continue;
      const record = node as Record<string, unknown>;
      if (record.type === 'object' && record.properties !== undefined) {
        assert.equal(
          record.additionalProperties,
          false,
          `${kind}: ${JSON.stringify(record).slice(0, 80)}`,
        );
      }
      pending.push(...Object.values(record));
    }
  }
});
