/**
 * The audit's git objects read by isomorphic-git: what the writer reads (its own clone,
 * through the writer's cache) and what the readers read where no system git runs. The
 * readers of whole histories prefer `CatFileObjects` (cat-file.ts): isomorphic-git reads a
 * pack into memory whole. Both answer the same `GitObjects` questions, so tree.ts and
 * reader.ts choose once (`objectsOf`), not at every read.
 */
import * as nodeFs from 'node:fs';
import git, { type FsClient, type TreeEntry } from 'isomorphic-git';
import type { GitObjects, ParsedCommit } from './cat-file.ts';

export interface IsoRepo {
  readonly gitdir: string;
  /** isomorphic-git's cache: the packs it read, kept while this object lives. */
  readonly cache: object;
  /** The file system objects are read through (default node:fs; a test counts reads). */
  readonly fs?: FsClient;
  /** Objects read another way (the system git), when the repository has them. */
  readonly objects?: GitObjects;
}

export class IsoGitObjects implements GitObjects {
  readonly #repo: { fs: FsClient; gitdir: string; cache: object };

  constructor(repo: IsoRepo) {
    this.#repo = { fs: repo.fs ?? nodeFs, gitdir: repo.gitdir, cache: repo.cache };
  }

  async commit(oid: string): Promise<ParsedCommit> {
    return (await git.readCommit({ ...this.#repo, oid })).commit;
  }

  async tree(oid: string): Promise<TreeEntry[]> {
    return (await git.readTree({ ...this.#repo, oid })).tree;
  }

  async blob(oid: string): Promise<Uint8Array> {
    return (await git.readBlob({ ...this.#repo, oid })).blob;
  }

  async raw(oid: string): Promise<Buffer> {
    const { object } = await git.readObject({ ...this.#repo, oid, format: 'content' });
    return Buffer.from(object as Uint8Array);
  }

  close(): void {}
}

/** The repository's own objects (the system git's) when it has them, isomorphic-git's otherwise. */
export function objectsOf(repo: IsoRepo): GitObjects {
  return repo.objects ?? new IsoGitObjects(repo);
}
