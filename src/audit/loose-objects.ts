/**
 * The loose objects of the writer's clone (one zlib-compressed file per object, as
 * isomorphic-git writes them), read straight from disk for its maintenance: a file read
 * and an inflate each (commits and trees are then parsed by cat-file.ts's parseCommit and
 * parseTree, as for the system git's objects).
 *
 * Why not isomorphic-git's readCommit and readTree: each lookup goes through its
 * promise-based file system wrapper (several calls per object, and a thrown ENOENT where
 * it looks for the object in another place first), so packing 1,800 loose objects took
 * 3 s on a quiet two-core machine, and 6 s in a 10,000-pod run, during which the strict
 * intents behind it waited.
 */
import { readdirSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
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
