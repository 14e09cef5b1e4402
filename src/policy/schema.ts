/**
 * JSON Schema validation of raw policy documents against `schemas/*.schema.json`, the
 * single source of truth. The validators are compiled ahead of time by
 * `scripts/gen-types.ts` into `generated/validators.js` (Ajv's standalone code, checked
 * by `npm run schemas:check` like the generated types), so a command such as `validate`
 * pays no schema compilation at start. Schema errors are rewritten into PolicyErrors with
 * a field path and a reason a person can act on (an unknown field names the field; a
 * wrong enum lists the allowed values).
 */
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { PolicyError } from './errors.ts';
import { fieldPath } from './errors.ts';
import * as precompiled from './generated/validators.js';
import { policyKinds, type PolicyKind } from './schema-source.ts';

export {
  apiVersion,
  loadSchema,
  policyKinds,
  schemaDir,
  type PolicyKind,
} from './schema-source.ts';

const validators: ReadonlyMap<PolicyKind, ValidateFunction> = new Map(
  policyKinds.map((kind) => [kind, precompiled[kind] as ValidateFunction]),
);

/** Validates one document of a known kind; [] when valid. */
export function validateDocument(
  kind: PolicyKind,
  value: unknown,
  where: { file: string; document: number },
): PolicyError[] {
  const validate = validators.get(kind);
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
