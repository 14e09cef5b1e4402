/**
 * Checkpoints of open intents, committed to the audit branch itself, so a term start
 * reads the trail only back to the last one (recover.ts `openIntents`), whatever the
 * length of the history.
 *
 * A checkpoint is a commit like any other audit commit (one new file, nothing changed),
 * written by the leader's writer every `checkpointEvery` commits. Its file lies beside
 * the records of its hour, `…/THHMMSSZ-<controller>-<seq>.checkpoint.jsonl`: a header
 * line, then every intent of the cluster that had no outcome in the history before it,
 * as its record line (the same bytes as in its intent file). Recovery from a checkpoint
 * and the commits after it gives the same open intents as a read of the whole branch:
 * an outcome after the checkpoint closes a listed intent, an intent after it is new.
 * Readers of decisions skip checkpoint files (their lines are copies, not decisions);
 * `audit verify` checks that each one lists exactly the intents open at its place.
 *
 * The header also carries, in its optional `carried` field, the Blocked writes still in
 * force and the gang memory (decide/release-carried.ts), so a new term knows every
 * Blocked pod from its last checkpoint on, however old (audit/carried.ts). The field
 * keeps schema version 1: a checkpoint written before it (no field) is read as before,
 * and a tollgate older than it reads a checkpoint with it and ignores the field.
 */
import type { Decision } from '../decide/decision.ts';
import type { Carried, CarriedBlock } from '../decide/release-carried.ts';
import { trailerKeys } from './message.ts';
import { parseBatch, phaseOf, serializeBatch, shortDigest, type AuditRecord } from './record.ts';

export const checkpointSuffix = '.checkpoint.jsonl';
const kind = 'tollgate-open-intents';

export function isCheckpointFile(path: string): boolean {
  return path.endsWith(checkpointSuffix);
}

/** The checkpoint's path, beside the records file `recordsPath` would have been. */
export function checkpointPath(recordsPath: string): string {
  return recordsPath.replace(/\.jsonl$/, checkpointSuffix);
}

export function serializeCheckpoint(
  cluster: string,
  open: readonly Decision[],
  carried?: Carried,
): string {
  const header = JSON.stringify({
    v: 1,
    kind,
    cluster,
    open: open.length,
    ...(carried ? { carried } : {}),
  });
  return `${header}\n${serializeBatch(open)}`;
}

export interface ParsedCheckpoint {
  readonly open: AuditRecord[];
  /** Absent in a checkpoint written before checkpoints carried it. */
  readonly carried?: Carried;
}

/** The open intents (and carried state) a checkpoint file lists; throws naming the file and what is wrong. */
export function parseCheckpoint(text: string, file: string): ParsedCheckpoint {
  const newline = text.indexOf('\n');
  const first = newline < 0 ? text : text.slice(0, newline);
  let header: { v?: unknown; kind?: unknown; open?: unknown; carried?: unknown };
  try {
    header = JSON.parse(first) as typeof header;
  } catch (error) {
    throw new Error(`${file}:1: checkpoint header is not JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (header.v !== 1 || header.kind !== kind)
    throw new Error(`${file}:1: not a checkpoint of schema version 1 (kind ${kind})`);
  const open = parseBatch(newline < 0 ? '' : text.slice(newline + 1), file);
  if (open.length !== header.open)
    throw new Error(
      `${file}: header says ${String(header.open)} open intents, lists ${open.length}`,
    );
  const notIntent = open.find((record) => record.phase !== 'intent');
  if (notIntent) throw new Error(`${file}: lists ${notIntent.id}, which is not an intent`);
  if (header.carried === undefined) return { open };
  return { open, carried: parseCarried(header.carried, `${file}:1: carried`) };
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function parseCarried(value: unknown, where: string): Carried {
  if (!isRecord(value) || !Array.isArray(value.blocked) || !isRecord(value.gangReleases))
    throw new Error(`${where}: not {blocked: [...], gangReleases: {...}}`);
  const blocked = value.blocked.map((block, index) =>
    parseBlock(block, `${where}.blocked[${index}]`),
  );
  const gangReleases: Record<string, number> = {};
  for (const [uid, at] of Object.entries(value.gangReleases)) {
    if (typeof at !== 'number') throw new Error(`${where}.gangReleases.${uid}: not a time`);
    gangReleases[uid] = at;
  }
  return { blocked, gangReleases };
}

function parseBlock(value: unknown, where: string): CarriedBlock {
  const target = isRecord(value) ? value.target : undefined;
  const policy = isRecord(value) ? value.policy : undefined;
  const strings = (object: unknown, keys: readonly string[]) =>
    isRecord(object) && keys.every((key) => typeof object[key] === 'string');
  if (
    !isRecord(value) ||
    typeof value.at !== 'number' ||
    !strings(value, ['id', 'reason']) ||
    !strings(target, ['namespace', 'name', 'uid', 'resourceVersion']) ||
    !strings(policy, ['commit'])
  )
    throw new Error(`${where}: not a Blocked state (id, at, target, policy.commit, reason)`);
  const t = target as Record<string, string>;
  return {
    id: value.id as string,
    at: value.at,
    target: {
      namespace: t.namespace!,
      name: t.name!,
      uid: t.uid!,
      resourceVersion: t.resourceVersion!,
    },
    policy: { commit: (policy as Record<string, string>).commit! },
    reason: value.reason as string,
  };
}

export function checkpointMessage(
  open: number,
  context: { readonly controller: string; readonly cluster: string },
): string {
  return [
    `checkpoint: ${open} open ${open === 1 ? 'intent' : 'intents'}`,
    '',
    `${trailerKeys.controller}: ${context.controller}`,
    `${trailerKeys.cluster}: ${context.cluster}`,
    `${trailerKeys.decisions}: 0`,
    `${trailerKeys.batch}: checkpoint`,
    '',
  ].join('\n');
}

/**
 * The open intents of one writer's cluster, kept as its commits land: an intent opens,
 * its outcome closes it. Seeded at term start from the trail (`openIntents`).
 */
export class OpenIntents {
  readonly #open = new Map<string, Decision>();

  constructor(seed: readonly Decision[]) {
    for (const intent of seed) this.#open.set(intent.id, intent);
  }

  committed(decisions: readonly Decision[]): void {
    for (const decision of decisions) {
      const phase = phaseOf(decision);
      if (phase === 'intent') this.#open.set(decision.id, decision);
      else if (phase === 'outcome') this.#open.delete(decision.id);
    }
  }

  list(): Decision[] {
    return [...this.#open.values()];
  }
}

interface PendingCheckpoint {
  readonly commit: string;
  readonly file: string;
  /** id digest -> id, of the intents the checkpoint lists. */
  readonly listed: ReadonlyMap<string, string>;
  /** Intents and outcomes of its cluster between it and the next older checkpoint. */
  readonly intents: Map<string, string>;
  readonly outcomes: Set<string>;
}

export interface CheckpointProblem {
  readonly commit: string;
  readonly file: string;
  readonly message: string;
}

const clusterOf = (file: string): string => file.split('/')[1] ?? '';

/**
 * `audit verify`'s check of checkpoints, fed commits newest first: each checkpoint must
 * list exactly the intents open at its place, i.e. the next older checkpoint's (none at
 * the root) plus the intents between them, less the intents whose outcome lies between.
 * Memory holds what lies between two checkpoints of a cluster.
 */
export class CheckpointChain {
  readonly #pending = new Map<string, PendingCheckpoint>();
  readonly #problems: CheckpointProblem[] = [];

  add(commit: {
    readonly oid: string;
    readonly records: readonly (AuditRecord & { readonly file: string })[];
    readonly checkpoint?: { readonly file: string; readonly open: readonly AuditRecord[] };
  }): void {
    for (const record of commit.records) {
      const pending = this.#pending.get(clusterOf(record.file));
      if (!pending) continue;
      if (record.phase === 'intent') pending.intents.set(shortDigest(record.id), record.id);
      else if (record.phase === 'outcome') pending.outcomes.add(shortDigest(record.id));
    }
    if (!commit.checkpoint) return;
    const { file, open } = commit.checkpoint;
    const listed = new Map(open.map((intent) => [shortDigest(intent.id), intent.id]));
    const cluster = clusterOf(file);
    const newer = this.#pending.get(cluster);
    if (newer) this.#compare(newer, listed);
    this.#pending.set(cluster, {
      commit: commit.oid,
      file,
      listed,
      intents: new Map(),
      outcomes: new Set(),
    });
  }

  /** Problems found; `complete` = the walk reached the root (no `--since` cut). */
  finish(complete: boolean): readonly CheckpointProblem[] {
    if (complete) for (const pending of this.#pending.values()) this.#compare(pending, new Map());
    this.#pending.clear();
    return this.#problems;
  }

  #compare(newer: PendingCheckpoint, older: ReadonlyMap<string, string>): void {
    const expected = new Map([...older, ...newer.intents]);
    for (const key of newer.outcomes) expected.delete(key);
    const missing = [...expected].filter(([key]) => !newer.listed.has(key)).map(([, id]) => id);
    const extra = [...newer.listed].filter(([key]) => !expected.has(key)).map(([, id]) => id);
    if (missing.length === 0 && extra.length === 0) return;
    const some = (ids: string[]) => ids.slice(0, 3).join(', ') + (ids.length > 3 ? ', …' : '');
    const parts = [
      missing.length > 0 ? `omits ${missing.length} open intent(s) (${some(missing)})` : '',
      extra.length > 0 ? `lists ${extra.length} intent(s) not open there (${some(extra)})` : '',
    ].filter(Boolean);
    this.#problems.push({
      commit: newer.commit,
      file: newer.file,
      message: `checkpoint ${newer.file} ${parts.join(' and ')}`,
    });
  }
}
