/**
 * The digest tables of `audit verify` (verify.ts): what it has met, to find a record or
 * an intent met twice anywhere in a history of any length.
 *
 * - `DigestSet`: 128-bit digests in one typed array, in memory (16 bytes a slot).
 * - `SpillingDigestSet`: the same up to a fixed number of digests in memory; beyond it the
 *   table is written to a folder as a sorted run (16 bytes a digest) and emptied, and runs
 *   of like size are merged (as a log-structured merge tree does), so a history of n
 *   digests leaves at most about log2(n / inMemory) runs. Memory then holds the table and,
 *   per run, a Bloom filter (1 to 2 bytes a digest, against 21 to 43 in the table) and the
 *   first digest of every block of 256 (a sparse index: 1/256 of the run); a lookup that
 *   misses the table reads one block (at most 4 KiB, from the page cache) of only those
 *   runs whose filter may hold the digest. The answers are exactly the in-memory table's.
 */
import { hash } from 'node:crypto';
import { closeSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** What verify asks of a digest table. */
export interface DigestStore {
  readonly size: number;
  has(digest: Uint8Array): boolean;
  /** Adds the digest; false when it was there already. */
  add(digest: Uint8Array): boolean;
  /** Releases what the table holds outside memory (files). */
  close(): void;
}

/** The first 128 bits of the text's SHA-256 (DigestSet reads 16 bytes). */
export function digest128(text: string): Buffer {
  return hash('sha256', text, 'buffer');
}

const slotWords = 4;
/** Grow when 3/4 full: probes stay short, an entry costs 16 B / 0.375..0.75 load. */
const maxLoad = 0.75;

/**
 * A set of 128-bit digests in one Uint32Array (open addressing, linear probing) that
 * doubles when 3/4 full: 16 bytes a slot, against about 150 bytes for a 22-character
 * string in a Set. An all-zero slot is empty; the all-zero digest is kept apart.
 */
export class DigestSet implements DigestStore {
  #slots: Uint32Array;
  #mask: number;
  #size = 0;
  #hasZero = false;

  /** `capacity`: slots to start with, rounded up to a power of two. */
  constructor(capacity = 1_024) {
    let slots = 1;
    while (slots < capacity) slots *= 2;
    this.#slots = new Uint32Array(slots * slotWords);
    this.#mask = slots - 1;
  }

  get size(): number {
    return this.#size;
  }

  /** Bytes held by the table (its slots). */
  get bytes(): number {
    return this.#slots.byteLength;
  }

  get capacity(): number {
    return this.#mask + 1;
  }

  has(digest: Uint8Array): boolean {
    const [a, b, c, d] = words(digest);
    if ((a | b | c | d) === 0) return this.#hasZero;
    return this.#find(this.#slots, this.#mask, a, b, c, d) >= 0;
  }

  /** Adds the digest's first 16 bytes; false when they were there already. */
  add(digest: Uint8Array): boolean {
    const [a, b, c, d] = words(digest);
    if ((a | b | c | d) === 0) {
      if (this.#hasZero) return false;
      this.#hasZero = true;
      this.#size += 1;
      return true;
    }
    if (this.#find(this.#slots, this.#mask, a, b, c, d) >= 0) return false;
    if (this.#size + 1 > this.capacity * maxLoad) this.#grow();
    place(this.#slots, this.#mask, a, b, c, d);
    this.#size += 1;
    return true;
  }

  /** Nothing to release: the table lives in memory only. */
  close(): void {}

  /** Every digest but the all-zero one, four words each, in ascending order (a, b, c, d unsigned). */
  sortedEntries(): Uint32Array {
    const slots = this.#slots;
    const count = this.#size - (this.#hasZero ? 1 : 0);
    const at = new Uint32Array(count);
    let n = 0;
    for (let slot = 0; slot < slots.length; slot += slotWords)
      if (
        ((slots[slot] as number) |
          (slots[slot + 1] as number) |
          (slots[slot + 2] as number) |
          (slots[slot + 3] as number)) !==
        0
      )
        at[n++] = slot;
    at.sort((x, y) => compareAt(slots, x, slots, y));
    const entries = new Uint32Array(count * slotWords);
    for (let i = 0; i < count; i += 1)
      entries.set(slots.subarray(at[i] as number, (at[i] as number) + slotWords), i * slotWords);
    return entries;
  }

  /** The slot index holding the digest, or -1 (an empty slot ends the probe). */
  #find(slots: Uint32Array, mask: number, a: number, b: number, c: number, d: number): number {
    for (let index = a & mask; ; index = (index + 1) & mask) {
      const at = index * slotWords;
      const x = slots[at] as number;
      const y = slots[at + 1] as number;
      const z = slots[at + 2] as number;
      const w = slots[at + 3] as number;
      if ((x | y | z | w) === 0) return -1;
      if (x === a && y === b && z === c && w === d) return index;
    }
  }

  #grow(): void {
    const old = this.#slots;
    const mask = (this.#mask + 1) * 2 - 1;
    const slots = new Uint32Array((mask + 1) * slotWords);
    for (let at = 0; at < old.length; at += slotWords) {
      const a = old[at] as number;
      const b = old[at + 1] as number;
      const c = old[at + 2] as number;
      const d = old[at + 3] as number;
      if ((a | b | c | d) !== 0) place(slots, mask, a, b, c, d);
    }
    this.#slots = slots;
    this.#mask = mask;
  }
}

function words(digest: Uint8Array): [number, number, number, number] {
  if (digest.length < 16)
    throw new RangeError(`a digest has 16 bytes or more, not ${digest.length}`);
  const view = new DataView(digest.buffer, digest.byteOffset, 16);
  return [
    view.getUint32(0, true),
    view.getUint32(4, true),
    view.getUint32(8, true),
    view.getUint32(12, true),
  ];
}

/** Puts a digest known to be absent in the first empty slot of its probe. */
function place(slots: Uint32Array, mask: number, a: number, b: number, c: number, d: number): void {
  let index = a & mask;
  while (
    ((slots[index * slotWords] as number) |
      (slots[index * slotWords + 1] as number) |
      (slots[index * slotWords + 2] as number) |
      (slots[index * slotWords + 3] as number)) !==
    0
  )
    index = (index + 1) & mask;
  const at = index * slotWords;
  slots[at] = a;
  slots[at + 1] = b;
  slots[at + 2] = c;
  slots[at + 3] = d;
}

/** Compares the four-word entries at `i` of `x` and at `j` of `y` (unsigned, a then b, c, d). */
function compareAt(x: Uint32Array, i: number, y: Uint32Array, j: number): number {
  for (let k = 0; k < slotWords; k += 1) {
    const left = x[i + k] as number;
    const right = y[j + k] as number;
    if (left !== right) return left < right ? -1 : 1;
  }
  return 0;
}

const blockEntries = 256;
const entryBytes = slotWords * 4;
/** Entries read or written at once when runs are merged. */
const chunkEntries = 4_096;

/**
 * A Bloom filter of a run's digests, 8 to 16 bits a digest, its four probes the digest's
 * own four words (SHA-256 bits, uniform already): a digest it has never seen is told
 * absent without reading the run for all but about 0.2 to 2.4% of them.
 */
class DigestFilter {
  readonly #bits: Uint32Array;
  readonly #mask: number;

  constructor(entries: number) {
    let bits = 64;
    while (bits < entries * 8) bits *= 2;
    this.#bits = new Uint32Array(bits / 32);
    this.#mask = bits - 1;
  }

  get bytes(): number {
    return this.#bits.byteLength;
  }

  add(entries: Uint32Array, at: number): void {
    for (let k = 0; k < slotWords; k += 1) {
      const bit = (entries[at + k] as number) & this.#mask;
      this.#bits[bit >>> 5] = (this.#bits[bit >>> 5] as number) | (1 << (bit & 31));
    }
  }

  mayHave(key: Uint32Array): boolean {
    for (let k = 0; k < slotWords; k += 1) {
      const bit = (key[k] as number) & this.#mask;
      if (((this.#bits[bit >>> 5] as number) & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }
}

/** A sorted run of digests in a file, with its filter and the first digest of every block in memory. */
class SortedRun {
  readonly count: number;
  readonly #fd: number;
  readonly #path: string;
  readonly #index: Uint32Array;
  readonly #filter: DigestFilter;
  readonly #block = new Uint32Array(blockEntries * slotWords);

  private constructor(
    path: string,
    fd: number,
    count: number,
    index: Uint32Array,
    filter: DigestFilter,
  ) {
    this.#path = path;
    this.#fd = fd;
    this.count = count;
    this.#index = index;
    this.#filter = filter;
  }

  /** Writes `chunks` (`expected` entries, sorted, four words an entry, in order) to `path` as a run. */
  static write(path: string, expected: number, chunks: Iterable<Uint32Array>): SortedRun {
    const fd = openSync(path, 'w+');
    const index: number[] = [];
    const filter = new DigestFilter(expected);
    let count = 0;
    try {
      for (const chunk of chunks) {
        for (let at = 0; at < chunk.length; at += slotWords) {
          if ((count + at / slotWords) % blockEntries === 0)
            index.push(...chunk.subarray(at, at + slotWords));
          filter.add(chunk, at);
        }
        writeAll(fd, chunk);
        count += chunk.length / slotWords;
      }
    } catch (error) {
      closeSync(fd);
      rmSync(path, { force: true });
      throw error;
    }
    return new SortedRun(path, fd, count, Uint32Array.from(index), filter);
  }

  /** Bytes this run holds in memory (its filter, its sparse index and one block). */
  get bytes(): number {
    return this.#filter.bytes + this.#index.byteLength + this.#block.byteLength;
  }

  has(key: Uint32Array): boolean {
    if (!this.#filter.mayHave(key)) return false;
    const blocks = this.#index.length / slotWords;
    // The last block whose first digest is not above the key.
    let low = 0;
    let high = blocks - 1;
    if (blocks === 0 || compareAt(this.#index, 0, key, 0) > 0) return false;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (compareAt(this.#index, middle * slotWords, key, 0) <= 0) low = middle;
      else high = middle - 1;
    }
    const first = low * blockEntries;
    const entries = Math.min(blockEntries, this.count - first);
    readAll(this.#fd, this.#block, entries * slotWords, first * entryBytes);
    let from = 0;
    let to = entries - 1;
    while (from <= to) {
      const middle = (from + to) >> 1;
      const order = compareAt(this.#block, middle * slotWords, key, 0);
      if (order === 0) return true;
      if (order < 0) from = middle + 1;
      else to = middle - 1;
    }
    return false;
  }

  /** The run's entries in order, a chunk at a time. */
  *chunks(): Generator<Uint32Array> {
    for (let first = 0; first < this.count; first += chunkEntries) {
      const entries = Math.min(chunkEntries, this.count - first);
      const chunk = new Uint32Array(entries * slotWords);
      readAll(this.#fd, chunk, chunk.length, first * entryBytes);
      yield chunk;
    }
  }

  close(): void {
    closeSync(this.#fd);
    rmSync(this.#path, { force: true });
  }
}

function writeAll(fd: number, words: Uint32Array): void {
  const bytes = new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
  for (let done = 0; done < bytes.length;) done += writeSync(fd, bytes, done);
}

function readAll(fd: number, into: Uint32Array, words: number, position: number): void {
  const bytes = new Uint8Array(into.buffer, into.byteOffset, words * 4);
  for (let done = 0; done < bytes.length;) {
    const read = readSync(fd, bytes, done, bytes.length - done, position + done);
    if (read === 0) throw new Error(`a digest run ends before ${position + bytes.length} bytes`);
    done += read;
  }
}

/** The entries of two sorted runs merged in order, a chunk at a time (no digest is in both). */
function* merged(older: SortedRun, newer: SortedRun): Generator<Uint32Array> {
  const left = older.chunks();
  const right = newer.chunks();
  let a = left.next();
  let b = right.next();
  let i = 0;
  let j = 0;
  let out = new Uint32Array(chunkEntries * slotWords);
  let n = 0;
  while (!a.done || !b.done) {
    let fromLeft: boolean;
    if (a.done) fromLeft = false;
    else if (b.done) fromLeft = true;
    else fromLeft = compareAt(a.value, i, b.value, j) <= 0;
    if (fromLeft) {
      out.set(a.value!.subarray(i, i + slotWords), n);
      i += slotWords;
      if (i >= a.value!.length) {
        a = left.next();
        i = 0;
      }
    } else {
      out.set(b.value!.subarray(j, j + slotWords), n);
      j += slotWords;
      if (j >= b.value!.length) {
        b = right.next();
        j = 0;
      }
    }
    n += slotWords;
    if (n === out.length) {
      yield out;
      out = new Uint32Array(chunkEntries * slotWords);
      n = 0;
    }
  }
  if (n > 0) yield out.subarray(0, n);
}

/** The folder of a SpillingDigestSet could not be written or read: named, with the reason. */
export class DigestSpillError extends Error {
  override readonly name = 'DigestSpillError';
}

/** Digests kept in memory before a spill by default: 3/4 of 2^18 slots, a 4 MiB table. */
export const defaultDigestsInMemory = 196_608;

/**
 * A DigestSet that holds at most `inMemory` digests in memory and the rest in sorted runs
 * in `dir` (see above). `close` removes its runs.
 */
export class SpillingDigestSet implements DigestStore {
  readonly #dir: string;
  readonly #name: string;
  readonly #inMemory: number;
  #table: DigestSet;
  #runs: SortedRun[] = [];
  #files = 0;
  #size = 0;
  #hasZero = false;
  readonly #key = new Uint32Array(slotWords);

  constructor(dir: string, name: string, inMemory = defaultDigestsInMemory) {
    if (!Number.isInteger(inMemory) || inMemory < 1)
      throw new RangeError(`digests in memory: a positive integer, not ${inMemory}`);
    this.#dir = dir;
    this.#name = name;
    this.#inMemory = inMemory;
    this.#table = new DigestSet();
  }

  get size(): number {
    return this.#size;
  }

  /** Runs on disk now. */
  get runs(): number {
    return this.#runs.length;
  }

  /** Bytes held in memory: the table, and each run's sparse index and block. */
  get bytes(): number {
    return this.#table.bytes + this.#runs.reduce((sum, run) => sum + run.bytes, 0);
  }

  has(digest: Uint8Array): boolean {
    const key = this.#keyOf(digest);
    if (key === undefined) return this.#hasZero;
    if (this.#table.has(digest)) return true;
    return this.#runs.some((run) => run.has(key));
  }

  add(digest: Uint8Array): boolean {
    if (this.#keyOf(digest) === undefined) {
      if (this.#hasZero) return false;
      this.#hasZero = true;
      this.#size += 1;
      return true;
    }
    if (this.has(digest)) return false;
    this.#table.add(digest);
    this.#size += 1;
    if (this.#table.size >= this.#inMemory) this.#spill();
    return true;
  }

  close(): void {
    for (const run of this.#runs) run.close();
    this.#runs = [];
    this.#table = new DigestSet();
  }

  /** The digest's four words in the reused key, or undefined for the all-zero digest. */
  #keyOf(digest: Uint8Array): Uint32Array | undefined {
    const [a, b, c, d] = words(digest);
    if ((a | b | c | d) === 0) return undefined;
    this.#key[0] = a;
    this.#key[1] = b;
    this.#key[2] = c;
    this.#key[3] = d;
    return this.#key;
  }

  #spill(): void {
    try {
      const entries = this.#table.sortedEntries();
      this.#runs.push(SortedRun.write(this.#nextPath(), entries.length / slotWords, [entries]));
      this.#table = new DigestSet();
      // Merge while the newest run is at least half the one before it: runs double in size.
      while (this.#runs.length >= 2) {
        const newer = this.#runs[this.#runs.length - 1] as SortedRun;
        const older = this.#runs[this.#runs.length - 2] as SortedRun;
        if (older.count > 2 * newer.count) break;
        const run = SortedRun.write(
          this.#nextPath(),
          older.count + newer.count,
          merged(older, newer),
        );
        older.close();
        newer.close();
        this.#runs.splice(this.#runs.length - 2, 2, run);
      }
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new DigestSpillError(
        `cannot keep the ${this.#name} digests in ${this.#dir}: ${reason}`,
      );
    }
  }

  #nextPath(): string {
    this.#files += 1;
    return join(this.#dir, `${this.#name}-${this.#files}.run`);
  }
}
