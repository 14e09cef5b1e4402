/**
 * One audit record per line (JSONL): a Decision plus the schema version and its phase.
 *
 * Serialisation is deterministic so the same decisions always produce the same bytes,
 * the same blob and (with the same parent and clock) the same commit: top-level keys in
 * a fixed order, nested objects (condition values are arbitrary JSON) with sorted keys.
 * A reader that meets a newer `v` refuses the line instead of guessing.
 */
import { createHash } from 'node:crypto';
import {
  decisionKinds,
  loops,
  type ConditionInput,
  type Decision,
  type DecisionKind,
  type Loop,
  type Outcome,
} from '../decide/decision.ts';

export const recordSchemaVersion = 1;

/**
 * A 16-byte digest of a decision id or record line, for sets that must remember every
 * id of a long history (verify, recovery) in a bounded fraction of the ids' size.
 */
export function shortDigest(text: string): string {
  return createHash('sha256').update(text).digest('base64').slice(0, 22);
}

/** Which batch a decision belongs to: an intent before its write, an outcome after, or a record of a decision without a write. */
export const phases = ['intent', 'outcome', 'record'] as const;
export type Phase = (typeof phases)[number];

/** The batch names used in commit trailers and metrics. */
export const batchKinds = ['intents', 'outcomes', 'records'] as const;
export type BatchKind = (typeof batchKinds)[number];

export function phaseOf(decision: Decision): Phase {
  switch (decision.outcome.result) {
    case 'pending':
      return 'intent';
    case 'recorded':
      return 'record';
    case 'succeeded':
    case 'conflict':
    case 'failed':
    case 'expired':
    case 'cancelled':
    case 'unknown':
      return 'outcome';
  }
}

export function batchOf(phase: Phase): BatchKind {
  return phase === 'intent' ? 'intents' : phase === 'outcome' ? 'outcomes' : 'records';
}

export interface AuditRecord extends Decision {
  readonly v: number;
  readonly phase: Phase;
}

/**
 * Canonical JSON: object keys sorted at every depth (by UTF-16 code unit, as
 * `Array.prototype.sort` compares), members whose value is undefined left out, no
 * whitespace; in arrays undefined, holes and non-finite numbers are null, as
 * JSON.stringify writes them. Built as one string without intermediate arrays: every
 * audit record and every record fingerprint goes through here.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return scalarJson(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${out}]`;
  }
  const object = value as Record<string, unknown>;
  let out = '{';
  for (const key of Object.keys(object).sort()) {
    const item = object[key];
    if (item === undefined) continue;
    out += (out.length === 1 ? '' : ',') + JSON.stringify(key) + ':' + canonicalJson(item);
  }
  return `${out}}`;
}

function scalarJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (typeof value === 'number' && !Number.isFinite(value)) return 'null';
  return JSON.stringify(value);
}

/** `,"key":<canonical value>`, or nothing when the value is undefined. */
function field(key: string, value: unknown): string {
  return value === undefined ? '' : `,"${key}":${canonicalJson(value)}`;
}

/** The JSONL line of a decision, without the trailing newline. */
export function serializeRecord(decision: Decision): string {
  return (
    `{"v":${recordSchemaVersion}` +
    field('phase', phaseOf(decision)) +
    field('id', decision.id) +
    field('at', decision.at) +
    field('time', new Date(decision.at).toISOString()) +
    field('loop', decision.loop) +
    field('kind', decision.kind) +
    field('tenant', decision.tenant) +
    field('target', decision.target) +
    field('policy', decision.policy) +
    field('inputs', decision.inputs) +
    field('reason', decision.reason) +
    field('outcome', decision.outcome) +
    '}'
  );
}

/** A whole batch file: one line per decision, each ending in a newline. */
export function serializeBatch(decisions: readonly Decision[]): string {
  let out = '';
  for (const decision of decisions) out += `${serializeRecord(decision)}\n`;
  return out;
}

export class RecordParseError extends Error {
  constructor(where: string, fieldName: string, reason: string) {
    super(`${where}: field "${fieldName}" ${reason}`);
    this.name = 'RecordParseError';
  }
}

const outcomeResults = [
  'pending',
  'succeeded',
  'conflict',
  'failed',
  'expired',
  'cancelled',
  'unknown',
  'recorded',
];

function expectString(where: string, object: Record<string, unknown>, key: string): string {
  const value = object[key];
  if (typeof value !== 'string')
    throw new RecordParseError(where, key, `must be a string, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * Parses one JSONL line. `where` names the file and line for errors, e.g.
 * "audit/prod/2026/11/29/T070000Z-c1-000001.jsonl:3".
 */
export function parseRecord(line: string, where: string): AuditRecord {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (error) {
    throw new RecordParseError(where, '(line)', `is not JSON: ${(error as Error).message}`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new RecordParseError(where, '(line)', 'must be a JSON object');
  }
  const object = raw as Record<string, unknown>;
  if (object.v !== recordSchemaVersion) {
    throw new RecordParseError(
      where,
      'v',
      `is ${JSON.stringify(object.v)}; this tollgate reads schema version ${recordSchemaVersion}`,
    );
  }
  const phase = expectString(where, object, 'phase');
  if (!(phases as readonly string[]).includes(phase))
    throw new RecordParseError(where, 'phase', `must be one of ${phases.join(', ')}`);
  const id = expectString(where, object, 'id');
  if (typeof object.at !== 'number' || !Number.isFinite(object.at))
    throw new RecordParseError(where, 'at', 'must be epoch milliseconds');
  const loop = expectString(where, object, 'loop');
  if (!(loops as readonly string[]).includes(loop))
    throw new RecordParseError(where, 'loop', `must be one of ${loops.join(', ')}`);
  const kind = expectString(where, object, 'kind');
  if (!(decisionKinds as readonly string[]).includes(kind)) {
    throw new RecordParseError(where, 'kind', `must be one of ${decisionKinds.join(', ')}`);
  }
  const target = object.target as Record<string, unknown> | undefined;
  if (target === null || typeof target !== 'object')
    throw new RecordParseError(where, 'target', 'must be an object');
  for (const key of ['namespace', 'name', 'uid', 'resourceVersion'])
    expectString(`${where} target`, target, key);
  const policy = object.policy as Record<string, unknown> | undefined;
  if (policy === null || typeof policy !== 'object')
    throw new RecordParseError(where, 'policy', 'must be an object');
  for (const key of ['commit', 'file', 'name']) expectString(`${where} policy`, policy, key);
  if (!Array.isArray(object.inputs))
    throw new RecordParseError(where, 'inputs', 'must be an array');
  const reason = expectString(where, object, 'reason');
  const outcome = object.outcome as Record<string, unknown> | undefined;
  if (
    outcome === null ||
    typeof outcome !== 'object' ||
    !outcomeResults.includes(String(outcome.result))
  ) {
    throw new RecordParseError(
      where,
      'outcome',
      `must be an object whose result is one of ${outcomeResults.join(', ')}`,
    );
  }
  if (object.tenant !== undefined && typeof object.tenant !== 'string')
    throw new RecordParseError(where, 'tenant', 'must be a string');
  return {
    v: recordSchemaVersion,
    phase: phase as Phase,
    id,
    at: object.at,
    loop: loop as Loop,
    kind: kind as DecisionKind,
    ...(object.tenant === undefined ? {} : { tenant: object.tenant as string }),
    target: target as unknown as Decision['target'],
    policy: policy as unknown as Decision['policy'],
    inputs: object.inputs as ConditionInput[],
    reason,
    outcome: outcome as unknown as Outcome,
  };
}

/** Parses a batch file; empty trailing line allowed, every other line must be a record. */
export function parseBatch(text: string, file: string): AuditRecord[] {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((line, index) => parseRecord(line, `${file}:${index + 1}`));
}
