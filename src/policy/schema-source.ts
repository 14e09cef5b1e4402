/**
 * Where the policy schemas live and how they are compiled: the policy kinds, their
 * schema files (`schemas/*.schema.json`, the single source of truth) and the Ajv options.
 * Shared by the validators generated ahead of time (`scripts/gen-types.ts`), the
 * reference doc generator and `schema.ts`, which validates with the generated code.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Options } from 'ajv/dist/2020.js';

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

/** The Ajv options the validators are generated with (see scripts/gen-types.ts). */
export const ajvOptions: Options = {
  allErrors: true,
  strict: true,
  // A discriminator's tag is required on the parent and defined in each branch.
  strictRequired: false,
  discriminator: true,
};

/** The formats the schemas use, from ajv-formats. */
export const ajvFormats = ['uri', 'date-time'] as const;
