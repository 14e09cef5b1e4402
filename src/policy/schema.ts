/**
 * JSON Schema validation of raw policy documents against `schemas/*.schema.json`, the
 * single source of truth. The validators are compiled once, on first use, and shared.
 * Schema errors are rewritten into PolicyErrors with a field path and a reason a person
 * can act on (an unknown field names the field; a wrong enum lists the allowed values).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { PolicyError } from './errors.ts';
import { fieldPath } from './errors.ts';

export const policyKinds = [
  'Settings',
  'Tenant',
  'GatePolicy',
  'ResizePolicy',
  'StalenessPolicy',
  'Approval',
] as const;
export type PolicyKind = (typeof policyKinds)[number];

export const apiVersion = 'tollgate.io/v1alpha1';

/** Folder of the schema files, also read by the reference doc generator. */
export const schemaDir = join(import.meta.dirname, '../../schemas');

export function loadSchema(kind: PolicyKind): Record<string, unknown> {
  return JSON.parse(readFileSync(join(schemaDir, `${kind}.schema.json`), 'utf8')) as Record<
    string,
    unknown
  >;
}

let validators: Map<PolicyKind, ValidateFunction> | undefined;

function compiled(): Map<PolicyKind, ValidateFunction> {
  if (validators) return validators;
  const ajv = new Ajv2020({
    allErrors: true,
    strict: true,
    // A discriminator's tag is required on the parent and defined in each branch.
    strictRequired: false,
    discriminator: true,
  });
  // ajv-formats is CommonJS; its default export is the plugin function under Node's ESM interop.
  const addFormats =
    (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
    addFormatsModule;
  (addFormats as unknown as (ajv: Ajv2020, formats: string[]) => void)(ajv, ['uri', 'date-time']);
  validators = new Map(policyKinds.map((kind) => [kind, ajv.compile(loadSchema(kind))]));
  return validators;
}

/** Validates one document of a known kind; [] when valid. */
export function validateDocument(
  kind: PolicyKind,
  value: unknown,
  where: { file: string; document: number },
): PolicyError[] {
  const validate = compiled().get(kind);
  if (!validate || validate(value)) return [];
  const seen = new Set<string>();
  const out: PolicyError[] = [];
  for (const error of validate.errors ?? []) {
    const { path, message } = describe(error);
    const key = `${path}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ file: where.file, document: where.document, path, message });
  }
  return out;
}

function pointerParts(pointer: string): (string | number)[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((p) => (/^\d+$/.test(p) ? Number(p) : p));
}

function describe(error: ErrorObject): { path: string; message: string } {
  const parts = pointerParts(error.instancePath);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties':
      return {
        path: fieldPath([...parts, String(params.additionalProperty)]),
        message: `unknown field "${String(params.additionalProperty)}"`,
      };
    case 'required':
      return {
        path: fieldPath([...parts, String(params.missingProperty)]),
        message: 'required field is missing',
      };
    case 'enum':
      return {
        path: fieldPath(parts),
        message: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    case 'const':
      return {
        path: fieldPath(parts),
        message: `must be ${JSON.stringify(params.allowedValue)}`,
      };
    case 'discriminator':
      return {
        path: fieldPath([...parts, String(params.tag)]),
        message:
          params.error === 'mapping'
            ? `"${String(params.tagValue)}" is not a known ${String(params.tag)}`
            : `${String(params.tag)} must be a string`,
      };
    case 'pattern':
      if (String(params.pattern).includes('(ms|s|m|h|d)')) {
        return {
          path: fieldPath(parts),
          message: 'is not a duration (examples: 500ms, 30s, 5m, 1h30m, 7d)',
        };
      }
      return {
        path: fieldPath(parts),
        message: `does not match the pattern ${String(params.pattern)}`,
      };
    default:
      return { path: fieldPath(parts), message: error.message ?? error.keyword };
  }
}
