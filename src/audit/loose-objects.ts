/**
 * The loose objects of the writer's clone (one zlib-compressed file per object), written
 * by the writer (`writeLooseObject`: its blobs and trees) and read straight from disk for
 * its maintenance: a file read
 * and an inflate each (commits and trees are then parsed by cat-file.ts's parseCommit and
 * parseTree, as for the system git's objects).
 *
 * Why not isomorphic-git's readCommit and readTree: each lookup goes through its
 * promise-based file system wrapper (several calls per object, and a thrown ENOENT where
 * it looks for the object in another place first), so packing 1,800 loose objects took
 * 3 s on a quiet two-core machine, and 6 s in a 10,000-pod run, during which the strict
 * intents behind it waited.
 */
import { createHash } from 'node:crypto';
import { readdirSync, existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deflate, inflateSync } from 'node:zlib';
import type { PackObjectType } from './pack-writer.ts';

/** oid -> the file of every loose object under `gitdir/objects`. */
export function looseObjects(gitdir: string): Map<string, string> {
  const found = new Map<string, string>();
  const objects = join(gitdir, 'objects');
  for (const folder of existsSync(objects) ? readdirSync(objects) : []) {
    if (!/^[0-9a-f]{2}$/.test(folder)) continue;
    for (const file of readdirSync(join(objects, folder)))
      if (/^[0-9a-f]{38}$/.test(file)) found.set(folder + file, join(objects, folder, file));
  }
  return found;
}

export interface LooseObject {
  readonly type: PackObjectType;
  readonly object: Buffer;
}

const types = new Set<string>(['commit', 'tree', 'blob', 'tag']);

/** A loose object's type and content; an error naming the file when it is not one. */
export function readLooseObject(path: string): LooseObject {
  let raw: Buffer;
  try {
    raw = inflateSync(readFileSync(path));
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') throw error;
    throw new Error(`audit clone: ${path}: not a zlib stream (${(error as Error).message})`, {
      cause: error,
    });
  }
  const space = raw.indexOf(0x20);
  const nul = raw.indexOf(0x00);
  const type = raw.toString('latin1', 0, Math.max(0, space));
  const size = Number(raw.toString('latin1', space + 1, nul));
  if (space < 0 || nul < space || !types.has(type) || size !== raw.length - nul - 1)
    throw new Error(`audit clone: ${path}: not a loose git object`);
  return { type: type as PackObjectType, object: raw.subarray(nul + 1) };
}

/** Reads between two turns of the event loop: a maintenance of thousands of objects does not hold it. */
const readsPerTurn = 256;

/**
 * A reader of the loose objects in `loose` (oid -> file) for one maintenance, its walk and
 * its pack alike: every `readsPerTurn` reads it lets the event loop have a turn.
 */
export function pacedLooseReader(
  loose: ReadonlyMap<string, string>,
): (oid: string) => Promise<LooseObject> {
  let reads = 0;
  return async (oid) => {
    reads += 1;
    if (reads % readsPerTurn === 0) await new Promise((resolve) => setImmediate(resolve));
    const path = loose.get(oid);
    if (path === undefined) throw new Error(`audit clone: object ${oid} is not loose`);
    return readLooseObject(path);
  };
}

/**
 * Writes one loose object as git does (zlib of `<type> <size>\0<content>`, named by the
 * SHA-1 of that) and returns its oid. The hash through node:crypto, the compression
 * through node:zlib on its thread pool, into a temporary file renamed into place, so a
 * crash leaves no half-written object under its name; an object already there is left as
 * it is. Why not isomorphic-git's writeBlob and writeTree: each compresses through a
 * CompressionStream fed by a Blob's web stream and hashes through SubtleCrypto, a dozen
 * promise turns per object: a tree of 10 entries cost 1.1–1.6 ms of CPU there against
 * 0.5 here (bench: the audit writer writes a blob and a tree per folder level for every
 * commit).
 */
export async function writeLooseObject(
  gitdir: string,
  type: PackObjectType,
  content: Uint8Array,
): Promise<string> {
  const wrapped = Buffer.concat([Buffer.from(`${type} ${content.length}\0`, 'latin1'), content]);
  const oid = createHash('sha1').update(wrapped).digest('hex');
  const folder = join(gitdir, 'objects', oid.slice(0, 2));
  const file = join(folder, oid.slice(2));
  rememberWritten(gitdir, oid, type, content);
  if (existsSync(file)) return oid;
  const deflated = await deflateAsync(wrapped);
  await mkdir(folder, { recursive: true });
  const temporary = join(folder, `tmp_obj_${process.pid}_${(temporaries += 1)}`);
  try {
    await writeFile(temporary, deflated, { mode: 0o444 });
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
  return oid;
}

let temporaries = 0;
const deflateAsync = promisify(deflate);

/**
 * The objects written lately, any clone's, so a push packs them without reading back
 * from disk what was just written there (a strict wave pushes each commit's blob and
 * trees within a second of writing them). At most `writtenLatelyBytes` of content, the
 * oldest dropped first, and a clone's forgotten when the writer releases its cache after
 * a cycle (`forgetWrittenLately`); a lookup that misses reads from disk as before.
 */
const writtenLately = new Map<string, LooseObject>();
let writtenLatelySize = 0;
export const writtenLatelyBytes = 8 * 1024 * 1024;

function rememberWritten(
  gitdir: string,
  oid: string,
  type: PackObjectType,
  content: Uint8Array,
): void {
  const key = `${gitdir}\0${oid}`;
  if (writtenLately.has(key) || content.length > writtenLatelyBytes) return;
  const object = Buffer.from(content.buffer, content.byteOffset, content.length);
  writtenLately.set(key, { type, object });
  writtenLatelySize += object.length;
  for (const [oldest, kept] of writtenLately) {
    if (writtenLatelySize <= writtenLatelyBytes) break;
    writtenLately.delete(oldest);
    writtenLatelySize -= kept.object.length;
  }
}

/** Forgets the objects of `gitdir` written lately (the writer's cache released after a cycle). */
export function forgetWrittenLately(gitdir: string): void {
  const prefix = `${gitdir}\0`;
  for (const [key, kept] of writtenLately)
    if (key.startsWith(prefix)) {
      writtenLately.delete(key);
      writtenLatelySize -= kept.object.length;
    }
}

/** The object `oid` of `gitdir` when it was written lately (`writeLooseObject`), else undefined. */
export function objectWrittenLately(gitdir: string, oid: string): LooseObject | undefined {
  return writtenLately.get(`${gitdir}\0${oid}`);
}

/** A commit as the writer writes it: no signature (a signed commit is isomorphic-git's). */
export interface CommitToWrite {
  readonly tree: string;
  readonly parent: readonly string[];
  readonly author: GitPerson;
  readonly committer: GitPerson;
  readonly message: string;
}

export interface GitPerson {
  readonly name: string;
  readonly email: string;
  /** Seconds since the epoch. */
  readonly timestamp: number;
  /** Minutes west of UTC, as isomorphic-git gives it (0 is written +0000). */
  readonly timezoneOffset: number;
}

/**
 * A commit object's content, byte for byte as isomorphic-git's writeCommit renders it
 * (`tree`, `parent` lines, `author`, `committer`, a blank line, the message without
 * carriage returns, leading newlines or more than one trailing newline), and the message
 * as a read of the commit gives it back. Written by `writeLooseObject`, a commit is known
 * to the push that packs it (objects written lately) instead of read back from disk.
 */
export function commitContent(commit: CommitToWrite): { content: Buffer; message: string } {
  const message = `${commit.message.replace(/\r/g, '').replace(/^\n+/, '').replace(/\n+$/, '')}\n`;
  let headers = `tree ${commit.tree}\n`;
  for (const parent of commit.parent) headers += `parent ${parent}\n`;
  headers += `author ${formatPerson(commit.author)}\n`;
  headers += `committer ${formatPerson(commit.committer)}\n`;
  return { content: Buffer.from(`${headers}\n${message}`, 'utf8'), message };
}

/** `name <email> seconds ±hhmm`: git's offset is east of UTC, isomorphic-git's minutes west. */
function formatPerson(person: GitPerson): string {
  const east = person.timezoneOffset === 0 ? person.timezoneOffset : -person.timezoneOffset;
  const sign = east < 0 || Object.is(east, -0) ? '-' : '+';
  const minutes = Math.abs(east);
  const hhmm = `${String(Math.floor(minutes / 60)).padStart(2, '0')}${String(minutes % 60).padStart(2, '0')}`;
  return `${person.name} <${person.email}> ${person.timestamp} ${sign}${hhmm}`;
}

/** A tree entry as written: mode (`040000` for a folder), name and object id. */
export interface TreeEntryToWrite {
  readonly mode: string;
  readonly path: string;
  readonly oid: string;
}

/**
 * A tree object's content: its entries in git's order (names compared as bytes, a
 * folder's as if it ended in `/`), each `<mode> <name>\0<20-byte oid>`, the mode without
 * its leading zero (`40000`), as git writes it.
 */
export function treeContent(entries: readonly TreeEntryToWrite[]): Buffer {
  const keyed = entries.map((entry) => {
    const mode = entry.mode.replace(/^0+/, '');
    return { entry, mode, key: mode === '40000' ? `${entry.path}/` : entry.path };
  });
  keyed.sort((a, b) => utf8Order(a.key, b.key));
  const parts: Buffer[] = [];
  for (const { entry, mode } of keyed) {
    if (!/^[0-9a-f]{40}$/.test(entry.oid))
      throw new Error(`tree entry ${entry.path}: oid ${entry.oid}`);
    if (entry.path === '' || entry.path.includes('/') || entry.path.includes('\0'))
      throw new Error(`tree entry name ${JSON.stringify(entry.path)} is not one path segment`);
    parts.push(Buffer.from(`${mode} ${entry.path}\0`, 'utf8'));
    parts.push(Buffer.from(entry.oid, 'hex'));
  }
  return Buffer.concat(parts);
}

/**
 * Two names in the order of their UTF-8 bytes: git's order, and isomorphic-git's when it
 * reads a tree. Where both are printable ASCII, `<` gives the same order without encoding.
 */
export function utf8Order(a: string, b: string): number {
  if (outsidePrintableAscii.test(a) || outsidePrintableAscii.test(b))
    return Buffer.compare(Buffer.from(a), Buffer.from(b));
  return a < b ? -1 : a > b ? 1 : 0;
}

const outsidePrintableAscii = /[^ -~]/;
