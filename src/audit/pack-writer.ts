/**
 * Writes a git pack (version 2, whole objects, no deltas) and its index (version 2) into
 * a clone's `objects/pack`, one object at a time, compressing each with node:zlib's
 * deflateSync.
 *
 * Why not isomorphic-git's packObjects and indexPack: they compress every object with a
 * new CompressionStream (or pako when none) whose native buffers are freed only by a later
 * garbage collection; merging a few thousand objects left the process's RSS 170-340 MB
 * higher for good (a leader's RSS +80% in the seed-7 30-minute soak, heap flat; the same
 * clone merged by hand: 106 -> 449 MB). deflateSync frees its buffers as it returns, so
 * one object's worth is held at a time, and the index is written from offsets and CRCs
 * already known (indexPack reads the whole pack back and inflates every object again).
 */
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { packfileCache } from '../lib/git-pack-cache.ts';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';

const typeCodes = { commit: 1, tree: 2, blob: 3, tag: 4 } as const;
export type PackObjectType = keyof typeof typeCodes;

/**
 * One object of a pack being written: an entry copied from another pack (its header and
 * compressed bytes, see copiedEntry), or an object's content, compressed here.
 */
export type PackInput =
  | { readonly oid: string; readonly entry: Buffer }
  | { readonly oid: string; readonly type: PackObjectType; readonly object: Uint8Array };

/** An entry's header: type and inflated size, 4 bits then 7 bits per byte, low first. */
function entryHeader(type: PackObjectType, size: number): Buffer {
  const bytes: number[] = [];
  let byte = (typeCodes[type] << 4) | (size & 0x0f);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest & 0x7f;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  return Buffer.from(bytes);
}

interface Entry {
  readonly oid: Buffer;
  readonly offset: number;
  readonly crc: number;
}

/** Packs written by this process (temporary file names stay unique). */
let written = 0;

/** Offsets past this need the index's 64-bit table; an audit pack is far smaller. */
const maxSmallOffset = 0x7fffffff;

/** Streams the pack of `count` objects to `put`; returns its entries and checksum. */
async function streamPack(
  count: number,
  inputs: AsyncIterable<PackInput> | Iterable<PackInput>,
  put: (bytes: Buffer) => void,
): Promise<{ entries: Entry[]; checksum: Buffer }> {
  const entries: Entry[] = [];
  const hash = createHash('sha1');
  let offset = 0;
  const add = (bytes: Buffer): void => {
    put(bytes);
    hash.update(bytes);
    offset += bytes.length;
  };
  const header = Buffer.alloc(12);
  header.write('PACK', 0, 'latin1');
  header.writeUInt32BE(2, 4);
  header.writeUInt32BE(count, 8);
  add(header);
  for await (const input of inputs) {
    const entry =
      'entry' in input
        ? input.entry
        : Buffer.concat([entryHeader(input.type, input.object.length), deflateSync(input.object)]);
    if (offset > maxSmallOffset) throw new Error('audit pack over 2 GiB: not supported');
    entries.push({ oid: Buffer.from(input.oid, 'hex'), offset, crc: crc32(entry) });
    add(entry);
  }
  if (entries.length !== count)
    throw new Error(`audit pack: ${entries.length} objects written, ${count} announced`);
  const checksum = hash.digest();
  put(checksum);
  return { entries, checksum };
}

/** The pack of `count` objects from `inputs`, in memory (what a push sends). */
export async function packBytes(
  count: number,
  inputs: AsyncIterable<PackInput> | Iterable<PackInput>,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await streamPack(count, inputs, (bytes) => chunks.push(bytes));
  return Buffer.concat(chunks);
}

/**
 * Writes `count` objects from `inputs` as one pack with its index into the clone; returns
 * the pack's file name (`pack-<sha>.pack`). Files appear under their final names only
 * when whole (written under a temporary name, then renamed, index last), so a reader
 * never meets half a pack.
 */
export async function writePack(
  gitdir: string,
  count: number,
  inputs: AsyncIterable<PackInput> | Iterable<PackInput>,
): Promise<string> {
  const folder = join(gitdir, 'objects', 'pack');
  const temporary = join(folder, `tmp-tollgate-${process.pid}-${(written += 1)}`);
  const fd = openSync(`${temporary}.pack`, 'w');
  let packed: { entries: Entry[]; checksum: Buffer };
  try {
    packed = await streamPack(count, inputs, (bytes) => void writeSync(fd, bytes));
  } catch (error) {
    closeSync(fd);
    rmSync(`${temporary}.pack`, { force: true });
    throw error;
  }
  closeSync(fd);
  const name = `pack-${packed.checksum.toString('hex')}`;
  const idxFd = openSync(`${temporary}.idx`, 'w');
  try {
    writeSync(idxFd, packIndex(packed.entries, packed.checksum));
  } finally {
    closeSync(idxFd);
  }
  renameSync(`${temporary}.pack`, join(folder, `${name}.pack`));
  renameSync(`${temporary}.idx`, join(folder, `${name}.idx`));
  return `${name}.pack`;
}

/** An entry of a pack, located by its index: where it starts and how long it is. */
export interface PackedEntry {
  readonly oid: string;
  readonly offset: number;
  readonly length: number;
}

/** The entries a version-2 index lists, in pack order, each with its length in the pack. */
export function indexedEntries(idx: Buffer, packLength: number): PackedEntry[] {
  if (idx.readUInt32BE(0) !== 0xff744f63 || idx.readUInt32BE(4) !== 2)
    throw new Error('pack index is not version 2');
  const count = idx.readUInt32BE(8 + 255 * 4);
  const ids = 8 + 256 * 4;
  const offsets = ids + count * 24;
  const located = Array.from({ length: count }, (_, index) => {
    const offset = idx.readUInt32BE(offsets + index * 4);
    if (offset & 0x80000000) throw new Error('pack index with 64-bit offsets: not supported');
    return { oid: idx.toString('hex', ids + index * 20, ids + (index + 1) * 20), offset };
  }).sort((a, b) => a.offset - b.offset);
  return located.map((entry, index) => ({
    ...entry,
    length: (located[index + 1]?.offset ?? packLength - 20) - entry.offset,
  }));
}

const ofsDelta = 6;
const refDelta = 7;

/**
 * An entry of `pack` as it goes into another pack, never inflated: a whole object or a
 * delta naming its base by id (REF_DELTA) is copied as it is; a delta naming its base by
 * its offset in this pack (OFS_DELTA) names it by id instead (`oidAt`), since offsets
 * change in the new pack. The compressed bytes are the same.
 */
export function copiedEntry(
  pack: Buffer,
  entry: PackedEntry,
  oidAt: (offset: number) => string | undefined,
): Buffer {
  const bytes = pack.subarray(entry.offset, entry.offset + entry.length);
  const type = ((bytes[0] as number) >> 4) & 0x07;
  if (type !== ofsDelta) return bytes;
  let at = 0;
  while ((bytes[at] as number) & 0x80) at += 1;
  const headerEnd = at + 1;
  let byte = bytes[headerEnd] as number;
  let distance = byte & 0x7f;
  at = headerEnd + 1;
  while (byte & 0x80) {
    byte = bytes[at] as number;
    distance = (distance + 1) * 128 + (byte & 0x7f);
    at += 1;
  }
  const base = oidAt(entry.offset - distance);
  if (base === undefined)
    throw new Error(`pack entry ${entry.oid}: no object at its delta base offset`);
  const header = Buffer.from(bytes.subarray(0, headerEnd));
  header[0] = ((header[0] as number) & 0x8f) | (refDelta << 4);
  return Buffer.concat([header, Buffer.from(base, 'hex'), bytes.subarray(at)]);
}

/** The version-2 index: fan-out, sorted ids, CRC-32s, offsets, pack checksum, own checksum. */
function packIndex(entries: readonly Entry[], packChecksum: Buffer): Buffer {
  const sorted = [...entries].sort((a, b) => Buffer.compare(a.oid, b.oid));
  const fanout = Buffer.alloc(256 * 4);
  let at = 0;
  for (let byte = 0; byte < 256; byte += 1) {
    while (at < sorted.length && (sorted[at] as Entry).oid[0]! <= byte) at += 1;
    fanout.writeUInt32BE(at, byte * 4);
  }
  const crcs = Buffer.alloc(sorted.length * 4);
  const offsets = Buffer.alloc(sorted.length * 4);
  sorted.forEach((entry, index) => {
    crcs.writeUInt32BE(entry.crc, index * 4);
    offsets.writeUInt32BE(entry.offset, index * 4);
  });
  const body = Buffer.concat([
    Buffer.from([0xff, 0x74, 0x4f, 0x63, 0, 0, 0, 2]),
    fanout,
    ...sorted.map((entry) => entry.oid),
    crcs,
    offsets,
    packChecksum,
  ]);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}

/**
 * The most pack bytes one merge takes. A merge copies entries without inflating them,
 * holding one source pack in memory at a time (pack-writer.ts); the bound keeps that pack
 * and the rewrite of old objects small. Packs above it stay as they are.
 */
export const maxMergeBytes = 16 * 1024 * 1024;

/**
 * Which packs to merge so the rest form a geometric progression (factor 2): sorted by
 * size, every pack smaller than twice the sum of all smaller ones is merged, never more
 * than `maxBytes` of them at once. What is kept is then at most about log2(total) packs
 * below that size plus one pack per `maxBytes` above it, and an object is rewritten
 * about log2(maxBytes) times over the life of the clone, not at every maintenance.
 */
export function packsToMerge<T extends { readonly size: number }>(
  packs: readonly T[],
  maxBytes: number = maxMergeBytes,
): T[] {
  const sorted = [...packs].sort((a, b) => a.size - b.size);
  let below = 0;
  let split = 0;
  for (const [index, pack] of sorted.entries()) {
    if (below + pack.size > maxBytes) break;
    if (index > 0 && pack.size < 2 * below) split = index + 1;
    below += pack.size;
  }
  return split >= 2 ? sorted.slice(0, split) : [];
}

/**
 * Merges a clone's small packs (packsToMerge) into one and deletes them, evicting them
 * from isomorphic-git's `cache`; returns how many were merged (0: none). Shared by the
 * audit clone's maintenance and the policy reader, whose clone gains a pack per fetch:
 * every object lookup scans the pack indexes, so a clone that keeps every pack it ever
 * fetched reads more with every change. Entries are copied without inflating them
 * (copiedEntry: a delta keeps its compressed bytes and names its base by id), one source
 * pack in memory at a time; an object in two packs goes once. The merged pack is whole
 * on disk (writePack) before a source pack is deleted.
 */
export async function mergeSmallPacks(gitdir: string, cache: object): Promise<number> {
  const folder = join(gitdir, 'objects', 'pack');
  const packs = (existsSync(folder) ? readdirSync(folder) : [])
    .filter(
      (name) => name.endsWith('.pack') && existsSync(join(folder, name.replace(/pack$/, 'idx'))),
    )
    .map((name) => ({ name, size: statSync(join(folder, name)).size }));
  const merging = packsToMerge(packs);
  if (merging.length === 0) return 0;
  const located = merging.map(({ name, size }) => ({
    name,
    entries: indexedEntries(readFileSync(join(folder, name.replace(/pack$/, 'idx'))), size),
  }));
  const count = new Set(located.flatMap(({ entries }) => entries.map((e) => e.oid))).size;
  const filename = await writePack(gitdir, count, mergedEntries(folder, located));
  const packCache = packfileCache(cache);
  for (const { name } of merging) {
    if (name === filename) continue;
    for (const file of [name, name.replace(/pack$/, 'idx')]) {
      packCache?.delete(join(folder, file));
      rmSync(join(folder, file), { force: true });
    }
  }
  return merging.length;
}

function* mergedEntries(
  folder: string,
  located: readonly { readonly name: string; readonly entries: readonly PackedEntry[] }[],
): Generator<PackInput> {
  const seen = new Set<string>();
  for (const { name, entries } of located) {
    const pack = readFileSync(join(folder, name));
    const oidAt = new Map(entries.map((entry) => [entry.offset, entry.oid]));
    for (const entry of entries) {
      if (seen.has(entry.oid)) continue;
      seen.add(entry.oid);
      yield { oid: entry.oid, entry: copiedEntry(pack, entry, (offset) => oidAt.get(offset)) };
    }
  }
}
