/**
 * Tree surgery on git objects without a working tree: add one file to a tree, drop the
 * folders older than a cutoff, look a path up, and diff two trees. The audit branch's
 * history only ever gains files (its tip's tree keeps a window of recent hours: repo.ts),
 * so these are all the writer (adding, pruning), the pusher (is my file already on the
 * remote?) and `audit verify` (did any commit modify or delete?) need.
 */
import type { TreeEntry } from 'isomorphic-git';
import { objectsOf, type IsoRepo } from './iso-objects.ts';
import { treeContent, utf8Order, writeLooseObject } from './loose-objects.ts';

/** A repository: isomorphic-git's, or the system git's objects for long walks (iso-objects.ts). */
export type Repo = IsoRepo;

/**
 * Trees parsed or written lately, by oid, per isomorphic-git cache object (so dropped with
 * it: the writer's releaseCache after each cycle, which carries the newest few over:
 * `carryNewestTrees`). A walk down the branch diffs each
 * commit's tree with its parent's, and the next step diffs that parent with its own:
 * without this every tree on the changed path (an hour folder of hundreds of files among
 * them) is read and parsed twice. A tree written here is kept as written (write-through),
 * so the next commit of a cycle adds its file without reading back from disk the trees
 * the last one wrote. Git objects never change, so an entry is never stale; the most
 * recent `parsedTreesKept` are kept (one walk step's trees many times over).
 */
const parsedTrees = new WeakMap<object, Map<string, readonly TreeEntry[]>>();
const parsedTreesKept = 64;

function keptTrees(repo: Repo): Map<string, readonly TreeEntry[]> {
  let kept = parsedTrees.get(repo.cache);
  if (kept === undefined) parsedTrees.set(repo.cache, (kept = new Map()));
  return kept;
}

function keep(kept: Map<string, readonly TreeEntry[]>, oid: string, tree: readonly TreeEntry[]) {
  if (!kept.delete(oid) && kept.size >= parsedTreesKept)
    kept.delete(kept.keys().next().value as string);
  kept.set(oid, tree);
}

/** At most this many tree entries in all are carried from a released cache to the next. */
export const carriedTreeEntries = 4_096;

/**
 * Carries the trees used last under cache `from` (newest first, while their entries total
 * at most `carriedTreeEntries`) to cache `to`: the writer releases its cache after each
 * cycle, and the next cycle's first commit adds its file under the same folders as the
 * last one, so it finds the trees on the tip's path here instead of reading them back
 * from disk. A tree too large to carry (an hour folder of thousands of files) is read
 * once again by the next cycle.
 */
export function carryNewestTrees(from: object, to: object): void {
  const kept = parsedTrees.get(from);
  if (kept === undefined) return;
  const carried: [string, readonly TreeEntry[]][] = [];
  let entriesCarried = 0;
  for (const [oid, tree] of [...kept].reverse()) {
    if (entriesCarried + tree.length > carriedTreeEntries) continue;
    entriesCarried += tree.length;
    carried.push([oid, tree]);
  }
  let into = parsedTrees.get(to);
  if (into === undefined) parsedTrees.set(to, (into = new Map()));
  for (const [oid, tree] of carried.reverse()) keep(into, oid, tree);
}

async function entries(repo: Repo, treeOid: string | undefined): Promise<TreeEntry[]> {
  if (treeOid === undefined) return [];
  const kept = keptTrees(repo);
  const tree = kept.get(treeOid) ?? (await objectsOf(repo).tree(treeOid));
  keep(kept, treeOid, tree); // moved to the newest end
  // A copy: addFile edits the list it is given.
  return [...tree];
}

/** Writes `list` as a tree object (loose-objects.ts) and keeps it, in the order a read gives (by name). */
async function writeTree(repo: Repo, list: TreeEntry[]): Promise<string> {
  const oid = await writeLooseObject(repo.gitdir, 'tree', treeContent(list));
  keep(keptTrees(repo), oid, [...list].sort(byName));
  return oid;
}

/** isomorphic-git's order of a tree's entries as it reads them (`utf8Order` of their names). */
function byName(a: TreeEntry, b: TreeEntry): number {
  return utf8Order(a.path, b.path);
}

export type AddResult = { readonly tree: string } | { readonly existing: string };

/**
 * Returns a new tree with `path` added as a regular file holding `blob`, or, when the
 * path already exists, the blob it holds (the caller decides: same content means the
 * file already landed, different content means a name collision).
 */
export async function addFile(
  repo: Repo,
  treeOid: string | undefined,
  path: string,
  blob: string,
): Promise<AddResult> {
  const segments = path.split('/');
  const insert = async (oid: string | undefined, depth: number): Promise<AddResult> => {
    const list = await entries(repo, oid);
    const name = segments[depth] as string;
    const index = list.findIndex((entry) => entry.path === name);
    if (depth === segments.length - 1) {
      if (index >= 0) return { existing: (list[index] as TreeEntry).oid };
      list.push({ mode: '100644', path: name, oid: blob, type: 'blob' });
    } else {
      const current = index >= 0 ? (list[index] as TreeEntry) : undefined;
      if (current && current.type !== 'tree')
        throw new Error(`cannot add ${path}: ${segments.slice(0, depth + 1).join('/')} is a file`);
      const result = await insert(current?.oid, depth + 1);
      if ('existing' in result) return result;
      const entry: TreeEntry = { mode: '040000', path: name, oid: result.tree, type: 'tree' };
      if (index >= 0) list[index] = entry;
      else list.push(entry);
    }
    return { tree: await writeTree(repo, list) };
  };
  return insert(treeOid, 0);
}

/**
 * Returns the tree with every folder older than `cutoff` removed along the cutoff's path:
 * `cutoff` is a folder's path split in segments (an hour folder,
 * `audit/<cluster>/YYYY/MM/DD/HH`), and from depth `from` down, each level drops the
 * entries that sort before the cutoff's segment there (zero-padded dates sort as they
 * fall) and descends into the one equal to it. Entries after it, and everything above
 * `from`, stay. The same oid when nothing was removed.
 */
export async function pruneBefore(
  repo: Repo,
  treeOid: string | undefined,
  cutoff: readonly string[],
  from: number,
): Promise<string | undefined> {
  // Undefined: the folder is left empty (its entry goes too).
  const prune = async (oid: string, depth: number): Promise<string | undefined> => {
    const list = await entries(repo, oid);
    const name = cutoff[depth] as string;
    let kept =
      depth >= from ? list.filter((entry) => entry.type !== 'tree' || entry.path >= name) : list;
    const index = kept.findIndex((entry) => entry.path === name && entry.type === 'tree');
    const child = index >= 0 && depth < cutoff.length - 1 ? (kept[index] as TreeEntry) : undefined;
    const pruned = child === undefined ? undefined : await prune(child.oid, depth + 1);
    if (child !== undefined && pruned !== child.oid)
      kept =
        pruned === undefined
          ? kept.filter((_, at) => at !== index)
          : kept.map((entry, at) => (at === index ? { ...child, oid: pruned } : entry));
    else if (kept.length === list.length) return oid;
    if (kept.length === 0) return undefined;
    return writeTree(repo, kept);
  };
  return treeOid === undefined ? undefined : prune(treeOid, 0);
}

/**
 * The oldest folder under `prefix` (path segments, e.g. audit, cluster) taken `levels`
 * deep, the first entry down each level (names that sort as dates), as its path; or
 * undefined when the tree has no such folder.
 */
export async function oldestFolder(
  repo: Repo,
  treeOid: string | undefined,
  prefix: readonly string[],
  levels: number,
): Promise<string | undefined> {
  let current = treeOid;
  for (const name of prefix) {
    const entry = (await entries(repo, current)).find(
      (item) => item.path === name && item.type === 'tree',
    );
    current = entry?.oid;
    if (current === undefined) return undefined;
  }
  const path = [...prefix];
  for (let level = 0; level < levels; level += 1) {
    const first = (await entries(repo, current))
      .filter((entry) => entry.type === 'tree')
      .sort((a, b) => (a.path < b.path ? -1 : 1))[0];
    if (first === undefined) return undefined;
    path.push(first.path);
    current = first.oid;
  }
  return path.join('/');
}

/** The blob oid at `path` in a tree, or undefined. */
export async function lookup(
  repo: Repo,
  treeOid: string | undefined,
  path: string,
): Promise<string | undefined> {
  let current = treeOid;
  const segments = path.split('/');
  for (const [depth, name] of segments.entries()) {
    const entry = (await entries(repo, current)).find((item) => item.path === name);
    if (!entry) return undefined;
    if (depth === segments.length - 1) return entry.type === 'blob' ? entry.oid : undefined;
    if (entry.type !== 'tree') return undefined;
    current = entry.oid;
  }
  return undefined;
}

export interface Change {
  readonly path: string;
  readonly change: 'added' | 'modified' | 'deleted';
  readonly oid: string;
}

/** Changes from tree `before` to tree `after`; identical subtrees are skipped by oid, so this costs only the changed paths. */
export async function diffTrees(
  repo: Repo,
  before: string | undefined,
  after: string | undefined,
  prefix = '',
): Promise<Change[]> {
  if (before === after) return [];
  const left = new Map((await entries(repo, before)).map((entry) => [entry.path, entry]));
  const right = new Map((await entries(repo, after)).map((entry) => [entry.path, entry]));
  const changes: Change[] = [];
  const names = [...new Set([...left.keys(), ...right.keys()])].sort();
  for (const name of names) {
    const a = left.get(name);
    const b = right.get(name);
    const path = prefix + name;
    if (a && b && a.oid === b.oid && a.mode === b.mode) continue;
    const aTree = a?.type === 'tree' ? a.oid : undefined;
    const bTree = b?.type === 'tree' ? b.oid : undefined;
    if (aTree !== undefined || bTree !== undefined) {
      changes.push(...(await diffTrees(repo, aTree, bTree, `${path}/`)));
    }
    const aFile = a && a.type !== 'tree' ? a : undefined;
    const bFile = b && b.type !== 'tree' ? b : undefined;
    if (aFile && bFile) changes.push({ path, change: 'modified', oid: bFile.oid });
    else if (bFile) changes.push({ path, change: 'added', oid: bFile.oid });
    else if (aFile) changes.push({ path, change: 'deleted', oid: aFile.oid });
  }
  return changes;
}

/**
 * The objects tree `after` holds and tree `before` does not: `after` itself, the trees
 * along every changed path and the blobs added or changed there. Identical subtrees are
 * skipped by oid, so this costs only the changed paths, whatever the size of the tree
 * (what a push sends for a commit over its parent).
 */
export async function objectsAdded(
  repo: Repo,
  before: string | undefined,
  after: string | undefined,
): Promise<string[]> {
  if (after === undefined || before === after) return [];
  const left = new Map((await entries(repo, before)).map((entry) => [entry.path, entry]));
  const added = [after];
  for (const entry of await entries(repo, after)) {
    const previous = left.get(entry.path);
    if (previous?.oid === entry.oid) continue;
    if (entry.type === 'blob') added.push(entry.oid);
    if (entry.type !== 'tree') continue;
    const previousTree = previous?.type === 'tree' ? previous.oid : undefined;
    added.push(...(await objectsAdded(repo, previousTree, entry.oid)));
  }
  return added;
}
