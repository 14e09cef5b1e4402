/**
 * Reads a policy tree out of a Git repository over HTTP(S) with isomorphic-git: a bare
 * cache clone per source, fetched on every poll, files read straight from the object
 * store (no working tree, so nothing on disk can be tampered with between polls).
 *
 * Credentials: a token reaches the server only through `onAuth` (Basic auth, the token
 * as password). User info in the URL is moved into auth and stripped, and every error
 * message is scrubbed of the token, so neither logs, errors nor printed URLs carry it.
 * A refused token is not offered twice (`onAuthFailure` cancels): one 401 is the answer.
 */
import { mergeSmallPacks } from '../audit/pack-writer.ts';
import { packfileCache } from '../lib/git-pack-cache.ts';
import * as fs from 'node:fs';
import { mkdirSync } from 'node:fs';
import git, { Errors, type AuthCallback, type HttpClient } from 'isomorphic-git';
import http from 'isomorphic-git/http/node';
import { redactUrl } from '../observe/log.ts';
import { currentToken, plainHttpProblem, type TokenSource } from './credentials.ts';
import { fetchRef, isSshUrl, listRemoteRefs, SshGitError, type SshAccess } from './git-ssh.ts';
import type { PolicyError } from './errors.ts';
import { isPolicyFile, type PolicyFile } from './load.ts';
import { limits } from './parse.ts';

export type PolicyFetchErrorKind = 'auth' | 'not-found' | 'network' | 'http' | 'other';

/** A fetch that failed for reasons outside the policy's content (I/O, auth, a missing ref). */
export class PolicyFetchError extends Error {
  readonly kind: PolicyFetchErrorKind;
  constructor(kind: PolicyFetchErrorKind, message: string) {
    super(message);
    this.name = 'PolicyFetchError';
    this.kind = kind;
  }
}

export interface GitLocation {
  /** http(s) URL; user info in it is used as credentials and never printed. */
  readonly url: string;
  /** Branch or tag (default "main"). */
  readonly ref?: string;
  /** Sub-folder holding the policy ("" = the repository root). */
  readonly path?: string;
  /** The token, or a function reading the current one (a token file, re-read per fetch). */
  readonly token?: TokenSource;
  /** Basic-auth user sent with the token (forges accept any; default "x-access-token"). */
  readonly username?: string;
  /** The deploy key of an SSH URL (git-ssh.ts: the system git runs the network steps). */
  readonly ssh?: SshAccess;
}

export interface FetchedTree {
  readonly commit: string;
  readonly files: PolicyFile[];
  /** Problems with the tree itself (sizes, file count, a missing sub-folder). */
  readonly errors: PolicyError[];
}

/**
 * The isomorphic-git HTTP client with a cap on response bytes: a repository stuffed
 * with history or huge blobs is refused while downloading, before it fills the disk
 * or memory, since per-file limits can only apply once the pack has arrived.
 */
export function cappedHttp(maxBytes: number): HttpClient {
  return {
    async request(request) {
      const response = await http.request(request);
      const body = response.body;
      if (!body) return response;
      return {
        ...response,
        body: (async function* () {
          let total = 0;
          for await (const chunk of body) {
            total += chunk.byteLength;
            if (total > maxBytes) {
              throw new PolicyFetchError(
                'other',
                `the repository sent more than ${maxBytes} bytes; refused`,
              );
            }
            yield chunk;
          }
        })(),
      };
    },
  };
}

export function isGitUrl(location: string): boolean {
  return /^https?:\/\//i.test(location);
}

/** An http(s) or SSH repository URL (`tollgate run` reads both; SSH needs a deploy key). */
export function isRemoteGitUrl(location: string): boolean {
  return isGitUrl(location) || isSshUrl(location);
}

/** Splits user info out of a URL: the clean URL and the password (or lone user) as token. */
export function splitCredentials(url: string): { url: string; token?: string; username?: string } {
  try {
    const parsed = new URL(url);
    if (!parsed.username && !parsed.password) return { url };
    const token = decodeURIComponent(parsed.password || parsed.username);
    const username = parsed.password ? decodeURIComponent(parsed.username) : undefined;
    return { url: redactUrl(url), token, ...(username ? { username } : {}) };
  } catch {
    return { url: redactUrl(url) };
  }
}

export class GitPolicyReader {
  readonly url: string;
  readonly ref: string;
  readonly path: string;
  readonly #gitdir: string;
  readonly #tokenSource: TokenSource | undefined;
  /** The token of the fetch in progress, read once per fetch from `#tokenSource`. */
  #token: string | undefined;
  /** Every token used so far, scrubbed from messages (a rotated one included). */
  readonly #seenTokens = new Set<string>();
  readonly #allowInsecureHttp: boolean;
  readonly #username: string;
  /**
   * isomorphic-git's cache: each pack read stays in it whole, with its index and the
   * objects inflated from it. A long-lived reader fetches a pack per policy change and
   * reads the history behind each approval file (fileChangedAt), so one cache for the
   * life of the process grew with every change (about 0.1 MiB of heap per commit). The
   * source drops it after each poll (releaseCache); a poll still reads each pack once.
   */
  #cache: object = {};
  #maintenanceError: string | undefined;

  readonly #maxFetchBytes: number;
  readonly #ssh: SshAccess | undefined;

  constructor(
    location: GitLocation,
    cacheDir: string,
    options: { maxFetchBytes?: number; allowInsecureHttp?: boolean } = {},
  ) {
    this.#maxFetchBytes = options.maxFetchBytes ?? limits.maxFetchBytes;
    this.#allowInsecureHttp = options.allowInsecureHttp ?? false;
    this.#ssh = location.ssh;
    if (isSshUrl(location.url) && !location.ssh)
      throw new PolicyFetchError('auth', `${location.url} is an SSH URL: it needs a deploy key`);
    const split = isSshUrl(location.url) ? { url: location.url } : splitCredentials(location.url);
    this.url = split.url;
    this.ref = location.ref ?? 'main';
    this.path = (location.path ?? '').replace(/^\/+|\/+$/g, '');
    this.#tokenSource = location.token ?? split.token;
    this.#username = location.username ?? split.username ?? 'x-access-token';
    this.#gitdir = cacheDir;
  }

  #onAuth: AuthCallback = () =>
    this.#token ? { username: this.#username, password: this.#token } : {};
  #onAuthFailure: AuthCallback = () => ({ cancel: true });

  /** A message safe to print: no token, no user info. */
  #scrub(text: string): string {
    let out = text.split(this.url).join(redactUrl(this.url));
    for (const token of this.#seenTokens) out = out.split(token).join('[redacted]');
    return out.replace(/\/\/[^@/\s]*@/g, '//');
  }

  #wrap(error: unknown, what: string): PolicyFetchError {
    if (error instanceof PolicyFetchError) return error;
    if (error instanceof SshGitError) {
      const kind =
        error.kind === 'not-found'
          ? 'not-found'
          : error.kind === 'network'
            ? 'network'
            : error.kind === 'other' || error.kind === 'rejected'
              ? 'other'
              : 'auth';
      return new PolicyFetchError(kind, error.message);
    }
    const where = `${redactUrl(this.url)} (ref ${this.ref})`;
    if (error instanceof Errors.HttpError) {
      const status = (error.data as { statusCode?: number }).statusCode ?? 0;
      if (status === 401 || status === 403) {
        return new PolicyFetchError(
          'auth',
          `${what} ${where}: HTTP ${status}, the server refused the credentials (${this.#token ? 'check the Git token' : 'no token was configured'})`,
        );
      }
      if (status === 404)
        return new PolicyFetchError('not-found', `${what} ${where}: HTTP 404, no such repository`);
      return new PolicyFetchError('http', `${what} ${where}: HTTP ${status}`);
    }
    if (error instanceof Errors.UserCanceledError) {
      // onAuthFailure cancelled after a 401/403: one refusal is the answer.
      return new PolicyFetchError(
        'auth',
        `${what} ${where}: the server refused the credentials (${this.#token ? 'check the Git token' : 'no token was configured'})`,
      );
    }
    const code = (error as NodeJS.ErrnoException).code;
    const message = error instanceof Error ? error.message : String(error);
    if (code && /^E[A-Z]+$/.test(code)) {
      return new PolicyFetchError('network', this.#scrub(`${what} ${where}: ${code}`));
    }
    return new PolicyFetchError('other', this.#scrub(`${what} ${where}: ${message}`));
  }

  async #open(): Promise<void> {
    mkdirSync(this.#gitdir, { recursive: true });
    if (!fs.existsSync(`${this.#gitdir}/HEAD`)) {
      await git.init({ fs, gitdir: this.#gitdir, bare: true });
    }
    await git.addRemote({ fs, gitdir: this.#gitdir, remote: 'origin', url: this.url, force: true });
  }

  /**
   * Reads the current token (a rotated file is picked up here) and refuses to go on
   * when it would travel over plain http to a host that is not loopback.
   */
  #prepareCredentials(): void {
    try {
      this.#token = currentToken(this.#tokenSource);
    } catch (error) {
      throw new PolicyFetchError('auth', error instanceof Error ? error.message : String(error));
    }
    if (this.#token === undefined) return;
    this.#seenTokens.add(this.#token);
    const problem = plainHttpProblem(this.url, this.#allowInsecureHttp);
    if (problem) throw new PolicyFetchError('auth', problem);
  }

  /**
   * Why the last merge of the clone's packs failed, once (the source logs it); the poll
   * went on: a clone with more packs is slower to read, not wrong.
   */
  takeMaintenanceError(): string | undefined {
    const error = this.#maintenanceError;
    this.#maintenanceError = undefined;
    return error;
  }

  /**
   * Each fetch adds a pack to the clone; small ones are merged (mergeSmallPacks), so a
   * long-lived clone holds a few packs, not one per policy change it ever fetched.
   */
  async #mergePacks(): Promise<void> {
    try {
      await mergeSmallPacks(this.#gitdir, this.#cache);
    } catch (error) {
      this.#maintenanceError = error instanceof Error ? error.message : String(error);
    }
  }

  /** Forgets every pack and object isomorphic-git loaded (the next read loads what it needs). */
  releaseCache(): void {
    this.#cache = {};
  }

  /** How many packs isomorphic-git holds in memory for this reader (for tests and benches). */
  get cachedPacks(): number {
    return packfileCache(this.#cache)?.size ?? 0;
  }

  /** The commit the ref names on the server right now (one cheap ref advertisement). */
  async remoteCommit(): Promise<{ commit: string; tag: boolean }> {
    let refs;
    try {
      refs = this.#ssh
        ? await listRemoteRefs(this.#ssh, this.url, [
            `refs/heads/${this.ref}`,
            `refs/tags/${this.ref}`,
          ])
        : await this.#listOverHttp();
    } catch (error) {
      throw this.#wrap(error, 'cannot list refs of');
    }
    const branch = refs.find((r) => r.ref === `refs/heads/${this.ref}` || r.ref === this.ref);
    if (branch) return { commit: branch.oid, tag: false };
    const tag = refs.find((r) => r.ref === `refs/tags/${this.ref}`);
    if (tag) return { commit: tag.peeled ?? tag.oid, tag: true };
    throw new PolicyFetchError(
      'not-found',
      `${redactUrl(this.url)} has no branch or tag "${this.ref}"`,
    );
  }

  #listOverHttp() {
    this.#prepareCredentials();
    return git.listServerRefs({
      http,
      url: this.url,
      peelTags: true,
      onAuth: this.#onAuth,
      onAuthFailure: this.#onAuthFailure,
    });
  }

  async #has(oid: string): Promise<boolean> {
    return git
      .readCommit({ fs, gitdir: this.#gitdir, oid, cache: this.#cache })
      .then(() => true)
      .catch(() => false);
  }

  /**
   * Fetches the ref if its commit is not already in the cache, then reads the policy
   * files of that commit. When the ref still names `unlessCommit` (the commit the caller
   * read last), nothing is fetched or read: the files come back empty. A poll every 30 s
   * then costs one listing of refs, not a read of the tree from every pack the clone
   * ever fetched.
   */
  async fetch(options: { readonly unlessCommit?: string } = {}): Promise<FetchedTree> {
    const { commit, tag: isTag } = await this.remoteCommit();
    if (commit === options.unlessCommit) return { commit, files: [], errors: [] };
    try {
      await this.#open();
      if (!(await this.#has(commit)) && this.#ssh) {
        const ref = isTag ? `refs/tags/${this.ref}` : `refs/heads/${this.ref}`;
        await fetchRef(this.#ssh, this.#gitdir, this.url, ref);
      } else if (!(await this.#has(commit))) {
        await git.fetch({
          fs,
          http: cappedHttp(this.#maxFetchBytes),
          gitdir: this.#gitdir,
          remote: 'origin',
          ref: isTag ? `refs/tags/${this.ref}` : this.ref,
          singleBranch: true,
          tags: isTag,
          onAuth: this.#onAuth,
          onAuthFailure: this.#onAuthFailure,
          cache: this.#cache,
        });
        await this.#mergePacks();
      }
    } catch (error) {
      throw this.#wrap(error, 'cannot fetch');
    }
    if (!(await this.#has(commit))) {
      throw new PolicyFetchError(
        'other',
        `fetched ${redactUrl(this.url)} but commit ${commit} is missing`,
      );
    }
    return this.readTree(commit);
  }

  /**
   * The ancestors of `commit` in the cache clone, newest first (first parents and
   * merged branches alike, as `git log` orders them), at most `depth`, `commit` excluded.
   */
  async ancestors(commit: string, depth: number): Promise<string[]> {
    try {
      const log = await git.log({
        fs,
        gitdir: this.#gitdir,
        ref: commit,
        depth: depth + 1,
        cache: this.#cache,
      });
      return log.map((entry) => entry.oid).filter((oid) => oid !== commit);
    } catch (error) {
      throw this.#wrap(error, 'cannot read the history of');
    }
  }

  /**
   * When `file` (a path inside the policy folder) last changed up to `commit`: the
   * committer time (epoch ms) of the newest commit that changed it; undefined when the
   * history cannot be read (approval-times.ts falls back to the commit's own time).
   */
  async fileChangedAt(commit: string, file: string): Promise<number | undefined> {
    try {
      const [last] = await git.log({
        fs,
        gitdir: this.#gitdir,
        ref: commit,
        filepath: this.path ? `${this.path}/${file}` : file,
        depth: 1,
        cache: this.#cache,
      });
      return last ? last.commit.committer.timestamp * 1000 : undefined;
    } catch {
      return undefined;
    }
  }

  /** The committer time (epoch ms) of `commit`. */
  async commitTime(commit: string): Promise<number | undefined> {
    try {
      const { commit: c } = await git.readCommit({ fs, gitdir: this.#gitdir, oid: commit });
      return c.committer.timestamp * 1000;
    } catch {
      return undefined;
    }
  }

  /** Reads the policy files under `path` of a commit, with the same caps as a folder. */
  async readTree(commit: string): Promise<FetchedTree> {
    const files: PolicyFile[] = [];
    const errors: PolicyError[] = [];
    let root;
    try {
      root = await git.readTree({
        fs,
        gitdir: this.#gitdir,
        oid: commit,
        ...(this.path ? { filepath: this.path } : {}),
        cache: this.#cache,
      });
    } catch (error) {
      if (error instanceof Errors.NotFoundError) {
        return {
          commit,
          files,
          errors: [
            {
              file: this.path || '.',
              path: '',
              message: `commit ${commit.slice(0, 12)} has no folder "${this.path}"`,
            },
          ],
        };
      }
      throw this.#wrap(error, 'cannot read the tree of');
    }
    let total = 0;
    const pending: { prefix: string; entries: typeof root.tree }[] = [
      { prefix: '', entries: root.tree },
    ];
    while (pending.length > 0) {
      const { prefix, entries } = pending.pop() as (typeof pending)[number];
      for (const entry of entries) {
        const path = `${prefix}${entry.path}`;
        if (entry.path.startsWith('.')) continue;
        if (entry.type === 'tree') {
          const sub = await git.readTree({
            fs,
            gitdir: this.#gitdir,
            oid: entry.oid,
            cache: this.#cache,
          });
          pending.push({ prefix: `${path}/`, entries: sub.tree });
          continue;
        }
        if (entry.type !== 'blob' || !isPolicyFile(path)) continue;
        if (entry.mode === '120000') {
          errors.push({
            file: path,
            path: '',
            message: 'symbolic links are not followed in a policy folder',
          });
          continue;
        }
        if (files.length >= limits.maxFiles) {
          errors.push({
            file: path,
            path: '',
            message: `more than ${limits.maxFiles} policy files in the repository`,
          });
          return { commit, files: [], errors };
        }
        const { blob } = await git.readBlob({
          fs,
          gitdir: this.#gitdir,
          oid: entry.oid,
          cache: this.#cache,
        });
        if (blob.byteLength > limits.maxFileBytes) {
          errors.push({
            file: path,
            path: '',
            message: `file is ${blob.byteLength} bytes, over the ${limits.maxFileBytes} byte limit`,
          });
          continue;
        }
        total += blob.byteLength;
        if (total > limits.maxRepoBytes) {
          errors.push({
            file: path,
            path: '',
            message: `policy files exceed ${limits.maxRepoBytes} bytes in total`,
          });
          return { commit, files: [], errors };
        }
        files.push({ path, content: Buffer.from(blob).toString('utf8') });
      }
    }
    files.sort((a, b) => (a.path < b.path ? -1 : 1));
    return { commit, files, errors };
  }
}
