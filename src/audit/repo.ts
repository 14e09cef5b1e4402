/**
 * The local clone of the audit branch (a bare repo in a persisted cache dir) and the
 * push loop. Commits are built from objects (blob, trees, commit) without a working
 * tree; each adds exactly one new file, so replaying them on another tip can never
 * conflict in content.
 *
 * Why every push failure is retried after refreshing from the remote: the branch is
 * shared by several controllers (clusters), so a rejected push almost always means
 * another writer got there first. We fetch, rebuild our unpushed commits on the new
 * tip (re-adding our own files; a file already present with the same content means
 * that commit landed before and is skipped), and push again, with jittered
 * exponential backoff so writers that collided do not collide again in lockstep.
 * Attempts and elapsed time are bounded: after that the commits stay local (the
 * backlog, counted in metrics) and the caller decides when to try again. We never
 * force push, so nothing another writer pushed can be lost.
 *
 * Which local commits are unpushed is derived from git alone, so a restart finds them:
 * walking back from the local tip, a commit is unpushed while its file is absent from
 * the last fetched remote tree (the remote only grows, and our chain is pushed in order).
 *
 * Credentials: only through `onAuth`; the remote URL stored in the clone's config and
 * every message we produce are stripped of user info and of the token. A token file is
 * read again each time the server asks for credentials, so a rotated Secret is used from
 * the next push on; every token used so far is scrubbed from messages.
 */
import * as fs from 'node:fs';
import { mkdirSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import git, { Errors, type AuthCallback, type CommitObject, type FsClient } from 'isomorphic-git';
import http from 'isomorphic-git/http/node';
import { withUnbornHeadRepair } from './http.ts';
import { fetchOverHttp, parseCommit, parseTree } from './cat-file.ts';
import {
  forgetWrittenLately,
  looseObjects,
  objectWrittenLately,
  pacedLooseReader,
  commitContent,
  writeLooseObject,
  type CommitToWrite,
  type LooseObject,
} from './loose-objects.ts';
import type { Clock } from '../lib/clock.ts';
import { systemClock } from '../lib/clock.ts';
import { redactUrl, silentLogger, type Logger } from '../observe/log.ts';
import { currentToken, type TokenSource } from '../policy/credentials.ts';
import {
  fetchRef,
  isSshUrl,
  listRemoteRefs,
  pushRef,
  SshGitError,
  type SshAccess,
} from '../policy/git-ssh.ts';
import { parseTrailers, trailerKeys } from './message.ts';
import {
  auditHistoryRewritten,
  auditPushFailuresTotal,
  auditPushSeconds,
  type PushFailureReason,
} from './metrics.ts';
import type { SshSigner } from './sign.ts';
import { advertisedRefs, sendPack, type ReceivePackTarget } from './receive-pack.ts';
import {
  mergeSmallPacks,
  packBytes,
  writePack,
  type PackInput,
  type PackObjectType,
} from './pack-writer.ts';

export { maxMergeBytes, packsToMerge } from './pack-writer.ts';
import {
  addFile,
  carryNewestTrees,
  diffTrees,
  lookup,
  objectsAdded,
  oldestFolder,
  pruneBefore,
  type Repo,
} from './tree.ts';
import { defaultTreeWindowHours, hourFolderOf, windowCutoff, yearDepth } from './window.ts';

export interface RetryOptions {
  /** Push attempts per `push()` call, the first included. */
  readonly maxAttempts: number;
  /** Give up once this much time has passed since the first attempt. */
  readonly maxElapsedMs: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const defaultRetry: RetryOptions = {
  maxAttempts: 8,
  maxElapsedMs: 60_000,
  baseDelayMs: 100,
  maxDelayMs: 5_000,
};

export interface PushOptions {
  /**
   * At most this many commits (the oldest unpushed) in one push; the rest stay for the
   * next call. A long backlog then lands in bounded pushes, each one kept by the remote
   * whatever happens to the next. Over SSH the system git pushes the whole branch.
   */
  readonly maxCommits?: number;
  /**
   * The leader's fence, asked before every attempt: a process paused in a retry's backoff
   * and resumed past its lease must not push (the next leader's recovery has read the
   * trail without these commits). Closed: AuditPushError `fenced`, the commits stay local.
   */
  readonly fence?: () => boolean;
}

export interface AuditRepoOptions {
  /** Local cache folder holding the bare clone; persisted so unpushed commits survive a restart. */
  readonly dir: string;
  /** HTTP(S) URL of the remote; user info in it is moved to auth and never stored. */
  readonly url: string;
  readonly branch: string;
  /** The token, or a function reading the current one (a token file, re-read per request). */
  readonly token?: TokenSource;
  /** Basic-auth user name sent with the token (forges accept any; default "x-access-token"). */
  readonly username?: string;
  /** The deploy key of an SSH URL: the system git fetches and pushes (policy/git-ssh.ts). */
  readonly ssh?: SshAccess;
  readonly author: { readonly name: string; readonly email: string };
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly retry?: Partial<RetryOptions>;
  /** Jitter source in [0, 1). */
  readonly random?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Signs every commit (SSH, see sign.ts); replayed commits are signed again. */
  readonly signer?: SshSigner;
  /**
   * A fresh clone fetches this many commits of the branch, not its whole history; term
   * start deepens it (doubling) only while recovery has not reached a checkpoint of open
   * intents (checkpoint.ts). Default 500 (the writer checkpoints every 200 of its
   * commits); 0 fetches the whole history (readers).
   */
  readonly shallowDepth?: number;
  /**
   * Fetch over http(s) with the system git (cat-file.ts `fetchOverHttp`), not
   * isomorphic-git, which receives and indexes the pack in memory: for readers of the
   * whole history (`audit verify --repo URL`). SSH remotes are fetched by git anyway.
   */
  readonly fetchWithSystemGit?: boolean;
  /**
   * Hours of each cluster's folders the tip's tree keeps before the file a commit adds
   * (window.ts); older folders stay in the history only. Default 24; 0 keeps them all.
   */
  readonly treeWindowHours?: number;
  /** The file system git objects are read and written through (default node:fs; a test counts reads). */
  readonly fs?: FsClient;
}

/** Commits whose tree an AuditRepo keeps (about 100 bytes each); all dropped when full. */
const treesOfCommitsKept = 4_096;

export interface LocalCommit {
  readonly oid: string;
  readonly parent: string | undefined;
  readonly path: string;
  readonly blob: string;
  readonly message: string;
  readonly author: CommitObject['author'];
  readonly decisions: number;
}

/**
 * The remote branch no longer contains the last commit tollgate saw on it (its
 * remote-tracking ref, persisted in the cache): someone force-pushed or reset the
 * branch. tollgate refuses to build on it and keeps its commits local; a person must
 * look (`tollgate audit verify`) and, if the new history is to be trusted, remove the
 * cache folder so the next start takes the branch as it is.
 */
export class AuditHistoryRewrittenError extends Error {
  readonly known: string;
  readonly remote: string;
  constructor(
    branch: string,
    url: string,
    known: string,
    remote: string,
    anchor = 'the last commit tollgate saw there',
  ) {
    super(
      `audit branch ${branch} on ${url} was rewritten: its tip ${remote.slice(0, 12)} does not contain ${known.slice(0, 12)}, ${anchor}; refusing to build on it (a force push or reset); audit commits stay local until a person checks the branch (tollgate audit verify)`,
    );
    this.name = 'AuditHistoryRewrittenError';
    this.known = known;
    this.remote = remote;
  }
}

export class AuditPushError extends Error {
  readonly reason: PushFailureReason;
  constructor(message: string, reason: PushFailureReason) {
    super(message);
    this.name = 'AuditPushError';
    this.reason = reason;
  }
}

const remoteName = 'origin';

/** The loose objects' contents, read one at a time as the pack is written. */
async function* looseContents(
  oids: Iterable<string>,
  read: (oid: string) => Promise<LooseObject>,
): AsyncGenerator<PackInput> {
  for (const oid of oids) yield { oid, ...(await read(oid)) };
}

/** The decisions an audit commit holds, from its trailer (0 when it names none). */
function decisionsOf(message: string): number {
  const count = Number.parseInt(parseTrailers(message).get(trailerKeys.decisions)?.[0] ?? '0', 10);
  return Number.isFinite(count) ? count : 0;
}

function errorCode(error: unknown): string {
  const value = error as { code?: unknown; cause?: { code?: unknown } };
  return String(value?.code ?? value?.cause?.code ?? '');
}

export function classifyPushError(error: unknown): PushFailureReason {
  const code = errorCode(error);
  if (error instanceof AuditHistoryRewrittenError) return 'rewritten';
  if (
    error instanceof Errors.PushRejectedError ||
    error instanceof Errors.GitPushError ||
    error instanceof Errors.NotFoundError
  ) {
    return 'rejected';
  }
  if (error instanceof Errors.HttpError) {
    const status = (error.data as { statusCode?: number }).statusCode ?? 0;
    return status === 401 || status === 403 ? 'auth' : 'http';
  }
  if (error instanceof Errors.UserCanceledError) return 'auth';
  if (error instanceof SshGitError) return sshFailureReason[error.kind];
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EPIPE|EAI_AGAIN|UND_ERR_\w+)$/.test(code))
    return 'network';
  if (error instanceof Error && /socket hang up|fetch failed|network/i.test(error.message))
    return 'network';
  return 'other';
}

const sshFailureReason: Record<SshGitError['kind'], PushFailureReason> = {
  auth: 'auth',
  'host-key': 'auth',
  network: 'network',
  rejected: 'rejected',
  'not-found': 'rejected',
  other: 'other',
};

/**
 * The oid a loose ref file holds; undefined when there is none (the ref may be in
 * packed-refs, or symbolic: isomorphic-git's resolveRef answers those). One read, where
 * resolveRef looks for the repository and the file in several steps on every call.
 */
let refWrites = 0;

async function readLooseRef(gitdir: string, ref: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(join(gitdir, ref), 'utf8');
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return undefined;
    throw error;
  }
  const oid = text.trim();
  return /^[0-9a-f]{40}$/.test(oid) ? oid : undefined;
}

export class AuditRepo implements Repo {
  readonly gitdir: string;
  readonly fs: FsClient;
  /**
   * isomorphic-git's cache: the pack indexes and the whole packs it read stay in it, so
   * one cache for the life of the process holds the clone's packs in memory (the largest
   * grows with the history). The writer drops it after each cycle (releaseCache): a cycle
   * still reads each pack once, and memory does not grow with the trail.
   */
  #cache: object = {};
  get cache(): object {
    return this.#cache;
  }

  /**
   * Forgets every pack and index isomorphic-git loaded (the next read loads what it needs),
   * and the objects this clone wrote lately (loose-objects.ts): a cycle's push has packed
   * them, so a quiet writer holds none of them. The trees last used (the tip's path, when
   * small: tree.ts `carryNewestTrees`) stay, so the next cycle's first commit reads none
   * of them back.
   */
  releaseCache(): void {
    const released = this.#cache;
    this.#cache = {};
    carryNewestTrees(released, this.#cache);
    forgetWrittenLately(this.gitdir);
  }
  readonly branch: string;
  readonly url: string;
  readonly #token: TokenSource | undefined;
  readonly #ssh: SshAccess | undefined;
  /** Every token offered so far, scrubbed from messages (a rotated one included). */
  readonly #seenTokens = new Set<string>();
  readonly #username: string;
  readonly #fetchWithSystemGit: boolean;
  readonly #author: { readonly name: string; readonly email: string };
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #retry: RetryOptions;
  readonly #random: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #signer: SshSigner | undefined;
  readonly #shallowDepth: number;
  readonly #treeWindowHours: number;
  /** Per cluster, the cutoff hour the trees this clone built were last pruned to. */
  readonly #prunedTo = new Map<string, string>();
  /** How many commits the next `deepen` adds: the clone's depth so far. */
  #depth: number;
  /** Set when the remote was found rewritten against an anchor kept outside the clone. */
  #refused: AuditHistoryRewrittenError | undefined;
  /** The last `unpushed` walk and the tips it was made between. */
  /** What the last ref advertisement or push said of the server: its capabilities, the branch's tip. */
  #server:
    { readonly capabilities: ReadonlySet<string>; readonly tip: string | undefined } | undefined;
  #lastUnpushed:
    | {
        readonly local: string | undefined;
        readonly remote: string | undefined;
        readonly commits: readonly LocalCommit[];
      }
    | undefined;

  constructor(options: AuditRepoOptions) {
    this.gitdir = options.dir;
    this.fs = options.fs ?? fs;
    this.branch = options.branch;
    let token: TokenSource | undefined = options.token;
    let username = options.username;
    let url: string;
    this.#ssh = options.ssh;
    try {
      if (isSshUrl(options.url) && !options.ssh)
        throw new Error('an SSH URL needs a deploy key (--audit-ssh-key-file)');
      // An SSH URL carries no secret (its user is the forge's fixed "git").
      const parsed = new URL(isSshUrl(options.url) ? 'https://ssh.invalid/' : options.url);
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
        throw new Error(`audit repo URL must be http(s) or ssh, got ${parsed.protocol}`);
      }
      // Credentials embedded in the URL become auth, so they never land in .git/config.
      if (parsed.password) token ??= decodeURIComponent(parsed.password);
      else if (parsed.username && !token) token = decodeURIComponent(parsed.username);
      else if (parsed.username) username ??= decodeURIComponent(parsed.username);
      url = isSshUrl(options.url) ? options.url : redactUrl(options.url);
    } catch (error) {
      // No `cause`: URL errors carry the input, credentials included.
      // eslint-disable-next-line preserve-caught-error
      throw new Error(
        `audit repo URL ${redactUrl(options.url)} is not valid: ${(error as Error).message}`,
      );
    }
    this.url = url;
    this.#token = token;
    this.#username = username ?? 'x-access-token';
    this.#author = options.author;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#retry = { ...defaultRetry, ...options.retry };
    this.#random = options.random ?? Math.random;
    this.#signer = options.signer;
    this.#shallowDepth = options.shallowDepth ?? 500;
    this.#fetchWithSystemGit = options.fetchWithSystemGit ?? false;
    this.#treeWindowHours = options.treeWindowHours ?? defaultTreeWindowHours;
    this.#depth = this.#shallowDepth;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Removes the token from any text before it reaches a log line or an error. */
  redact(text: string): string {
    let out = text;
    if (typeof this.#token === 'string') this.#seenTokens.add(this.#token);
    for (const token of this.#seenTokens) out = out.split(token).join('[redacted]');
    return out.replace(/(https?:\/\/)[^/@\s]*@/g, '$1');
  }

  /** The token now (a token file is read here, at each request for credentials). */
  #onAuth: AuthCallback = () => this.#credentials() ?? {};
  #credentials(): { username: string; password: string } | undefined {
    const token = currentToken(this.#token);
    if (!token) return undefined;
    this.#seenTokens.add(token);
    return { username: this.#username, password: token };
  }
  // A refused token must not be offered again in a loop; one failure is the answer.
  #onAuthFailure: AuthCallback = () => ({ cancel: true });

  get #localRef(): string {
    return `refs/heads/${this.branch}`;
  }
  get #trackingRef(): string {
    return `refs/remotes/${remoteName}/${this.branch}`;
  }

  /** Creates the bare clone if missing and points its remote at the (credential-free) URL. */
  async open(): Promise<void> {
    mkdirSync(this.gitdir, { recursive: true });
    if (!fs.existsSync(`${this.gitdir}/HEAD`)) {
      await git.init({ fs: this.fs, gitdir: this.gitdir, bare: true, defaultBranch: this.branch });
    }
    await git.addRemote({
      fs: this.fs,
      gitdir: this.gitdir,
      remote: remoteName,
      url: this.url,
      force: true,
    });
  }

  async #resolve(ref: string): Promise<string | undefined> {
    const loose = await readLooseRef(this.gitdir, ref);
    if (loose !== undefined) return loose;
    try {
      return await git.resolveRef({ fs: this.fs, gitdir: this.gitdir, ref });
    } catch (error) {
      if (error instanceof Errors.NotFoundError) return undefined;
      throw error;
    }
  }

  /**
   * Points `ref` at `oid` (created or moved, whatever it held): its loose ref file written
   * whole and renamed into place, so a crash leaves the old value or the new one. A loose
   * ref is what git reads before packed-refs.
   */
  async #setRef(ref: string, oid: string): Promise<void> {
    const file = join(this.gitdir, ref);
    const temporary = join(this.gitdir, `tollgate-ref-${process.pid}-${(refWrites += 1)}.tmp`);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(temporary, `${oid}\n`);
    await rename(temporary, file);
  }

  localTip(): Promise<string | undefined> {
    return this.#resolve(this.#localRef);
  }

  trackingTip(): Promise<string | undefined> {
    return this.#resolve(this.#trackingRef);
  }

  async treeOf(commit: string | undefined): Promise<string | undefined> {
    if (commit === undefined) return undefined;
    const known = this.#treesOfCommits.get(commit);
    if (known !== undefined) return known;
    const { tree } = (
      await git.readCommit({ fs: this.fs, gitdir: this.gitdir, oid: commit, cache: this.cache })
    ).commit;
    this.#treeKnown(commit, tree);
    return tree;
  }

  /**
   * Commits one new file on top of the local tip. When the path is taken (a restart
   * reusing a sequence number within the same second), a numeric suffix is added: a
   * commit never replaces content.
   */
  async commitFile(
    path: string,
    content: string,
    message: string,
  ): Promise<{ oid: string; path: string }> {
    const parent = await this.localTip();
    const blob = await writeLooseObject(this.gitdir, 'blob', Buffer.from(content, 'utf8'));
    const { tree, path: finalPath } = await this.#placeFile(await this.treeOf(parent), path, blob);
    if (tree === undefined)
      throw new Error(`audit file ${path} already exists with the same content`);
    const seconds = Math.floor(this.#clock.now() / 1000);
    const person = { ...this.#author, timestamp: seconds, timezoneOffset: 0 };
    const commit = {
      message,
      tree,
      parent: parent ? [parent] : [],
      author: person,
      committer: person,
    };
    const rendered = commitContent(commit);
    const oid = await this.#writeCommit(commit, rendered.content);
    this.#treeKnown(oid, tree);
    await this.#setRef(this.#localRef, oid);
    this.#extendUnpushed(parent, {
      oid,
      parent,
      path: finalPath,
      blob,
      message: rendered.message,
      author: { name: person.name, email: person.email, timestamp: seconds, timezoneOffset: 0 },
      decisions: decisionsOf(message),
    });
    return { oid, path: finalPath };
  }

  /**
   * A commit made on the local tip the last `unpushed` answer ended at extends that
   * answer, so a backlog pushed in chunks while new commits land is walked once, not
   * again after every commit. What the commit holds is known from its writing: nothing is
   * read back.
   */
  #extendUnpushed(parent: string | undefined, added: LocalCommit): void {
    const last = this.#lastUnpushed;
    if (last === undefined || last.local !== parent) return;
    this.#lastUnpushed = { ...last, local: added.oid, commits: [...last.commits, added] };
  }

  /**
   * Each commit's tree, as written or read here: a commit never changes, so the tip's
   * tree, a pushed commit's and its parent's are known without reading the commit again
   * (a strict wave commits and pushes a few hundred times). At most `treesOfCommitsKept`.
   */
  readonly #treesOfCommits = new Map<string, string>();

  #treeKnown(commit: string, tree: string): void {
    if (this.#treesOfCommits.size >= treesOfCommitsKept) this.#treesOfCommits.clear();
    this.#treesOfCommits.set(commit, tree);
  }

  /** `content`: `commitContent(commit)`'s, when the caller rendered it already. */
  async #writeCommit(
    commit: CommitToWrite,
    content: Buffer = commitContent(commit).content,
  ): Promise<string> {
    const signer = this.#signer;
    if (!signer) return writeLooseObject(this.gitdir, 'commit', content);
    // git.commit renders the exact payload and calls onSign; the tree is given, so no index is read.
    return git.commit({
      fs: this.fs,
      gitdir: this.gitdir,
      tree: commit.tree,
      parent: [...commit.parent],
      message: commit.message,
      author: commit.author,
      committer: commit.committer,
      ref: this.#localRef,
      noUpdateBranch: true,
      signingKey: 'ssh',
      onSign: ({ payload }) => ({ signature: signer.sign(payload) }),
      cache: this.cache,
    });
  }

  /** Adds `blob` at `path` (or a suffixed path on collision); tree undefined = the same content is already there. */
  async #placeFile(
    tree: string | undefined,
    path: string,
    blob: string,
  ): Promise<{ tree: string | undefined; path: string }> {
    for (let suffix = 0; ; suffix += 1) {
      const candidate = suffix === 0 ? path : path.replace(/\.jsonl$/, `-${suffix}.jsonl`);
      const result = await addFile(this, tree, candidate, blob);
      if ('tree' in result)
        return { tree: await this.#windowed(result.tree, candidate), path: candidate };
      if (result.existing === blob) return { tree: undefined, path: candidate };
    }
  }

  /**
   * The tree without the folders older than the tip's window before `path` (window.ts).
   * Pruned once per cluster and cutoff hour: the folders before the cutoff are gone from
   * every tree this clone builds after that, until the cutoff moves on an hour. Pruning
   * at every commit read the folder an hour before the window's from the clone's pack
   * each time (the pack's index loaded again after every cycle's cache release): 8 times
   * the commit's cost on a trail longer than the window (72-77 against 8-10 ms).
   */
  async #windowed(tree: string, path: string): Promise<string> {
    const cutoff = windowCutoff(path, this.#treeWindowHours);
    if (cutoff === undefined) return tree;
    const cluster = cutoff[1] as string;
    const key = cutoff.join('/');
    if (this.#prunedTo.get(cluster) === key) return tree;
    const pruned = (await pruneBefore(this, tree, cutoff, yearDepth)) ?? tree;
    this.#prunedTo.set(cluster, key);
    return pruned;
  }

  /** A blob of the clone as text (a leftover commit's file). */
  async readText(oid: string): Promise<string> {
    const { blob } = await git.readBlob({
      fs: this.fs,
      gitdir: this.gitdir,
      oid,
      cache: this.cache,
    });
    return Buffer.from(blob).toString('utf8');
  }

  /**
   * Moves the local branch to the remote-tracking tip, leaving the commits it held
   * unreachable (pruned by the next maintenance): the writer then commits their planned
   * replay (leftovers.ts). No tip (the remote has no branch yet): the local branch goes.
   */
  async resetToRemote(): Promise<void> {
    const tip = await this.trackingTip();
    if (tip === undefined)
      await git
        .deleteRef({ fs: this.fs, gitdir: this.gitdir, ref: this.#localRef })
        .catch(() => undefined);
    else await this.#setRef(this.#localRef, tip);
  }

  /**
   * Local commits not yet on the remote, oldest first. The answer depends on the two tips
   * alone (git objects never change), so while neither moved the last walk's answer is
   * given again: a term start asks several times before and after it rebuilds a backlog
   * of leftovers, and each walk reads every leftover's trees.
   */
  async unpushed(): Promise<LocalCommit[]> {
    const local = await this.localTip();
    const remoteTip = await this.trackingTip();
    const last = this.#lastUnpushed;
    if (last !== undefined && last.local === local && last.remote === remoteTip)
      return [...last.commits];
    const commits = await this.#walkUnpushed(local, remoteTip);
    this.#lastUnpushed = { local, remote: remoteTip, commits };
    return [...commits];
  }

  /** The walk behind `unpushed`: back from `local` while a commit adds one audit file the remote lacks. */
  async #walkUnpushed(
    local: string | undefined,
    remoteTip: string | undefined,
  ): Promise<LocalCommit[]> {
    const remoteTree = await this.treeOf(remoteTip);
    const onRemote = new FirstParentChain(this, remoteTip);
    const oldestKept = new Map<string, Promise<string | undefined>>();
    const beforeWindow = async (path: string): Promise<boolean> => {
      const hour = hourFolderOf(path);
      if (hour === undefined) return false;
      const cluster = hour[1] as string;
      if (!oldestKept.has(cluster))
        // The oldest hour folder the remote's tip keeps (year, month, day, hour down).
        oldestKept.set(cluster, oldestFolder(this, remoteTree, hour.slice(0, yearDepth), 4));
      const oldest = await oldestKept.get(cluster);
      return oldest === undefined || hour.join('/') < oldest;
    };
    const found: LocalCommit[] = [];
    let oid = local;
    while (oid !== undefined && oid !== remoteTip) {
      const { commit } = await git.readCommit({
        fs: this.fs,
        gitdir: this.gitdir,
        oid,
        cache: this.cache,
      });
      const parent = commit.parent[0];
      const added = (await diffTrees(this, await this.treeOf(parent), commit.tree)).filter(
        (change) => change.change === 'added',
      );
      // A commit that is not one of ours (no single added audit file) came from the remote.
      if (added.length !== 1 || !(added[0] as { path: string }).path.startsWith('audit/')) break;
      const file = added[0] as { path: string; oid: string };
      if ((await lookup(this, remoteTree, file.path)) === file.oid) break;
      // A file older than every folder the remote's tip keeps may have been pushed and
      // dropped from its window since (window.ts): the remote's history tells.
      if ((await beforeWindow(file.path)) && (await onRemote.has(oid))) break;
      found.push({
        oid,
        parent,
        path: file.path,
        blob: file.oid,
        message: commit.message,
        author: commit.author,
        decisions: decisionsOf(commit.message),
      });
      oid = parent;
    }
    return found.reverse();
  }

  /** The clone holds this commit (fetched or made here). */
  holds(oid: string): Promise<boolean> {
    return this.#has(oid);
  }

  async #has(oid: string): Promise<boolean> {
    return git
      .readCommit({ fs: this.fs, gitdir: this.gitdir, oid, cache: this.cache })
      .then(() => true)
      .catch(() => false);
  }

  /**
   * Refuses the remote from now on (fetch and push fail with `error`): the branch no
   * longer holds a commit tollgate pushed, known from an anchor outside the clone (the
   * leader Lease). Until a person checks the branch and the process is restarted.
   */
  refuse(error: AuditHistoryRewrittenError): void {
    this.#refused = error;
    auditHistoryRewritten.set(1);
  }

  /**
   * Whether the remote branch, as last fetched, contains `oid` (a commit tollgate pushed
   * earlier). A shallow clone is deepened until it holds the commit or is whole.
   */
  async contains(oid: string): Promise<boolean> {
    const tip = await this.trackingTip();
    if (tip === undefined) return false;
    if (tip === oid) return true;
    while (!(await this.#has(oid))) if (!(await this.deepen())) return false;
    return git.isDescendent({
      fs: this.fs,
      gitdir: this.gitdir,
      oid: tip,
      ancestor: oid,
      depth: -1,
      cache: this.cache,
    });
  }

  /** Refreshes the remote-tracking ref; undefined when the remote has no audit branch yet (empty repo or new branch). */
  async fetch(): Promise<string | undefined> {
    if (this.#refused) throw this.#refused;
    const refs = this.#ssh
      ? await listRemoteRefs(this.#ssh, this.url, [this.#localRef])
      : await git.listServerRefs({
          http,
          url: this.url,
          prefix: this.#localRef,
          onAuth: this.#onAuth,
          onAuthFailure: this.#onAuthFailure,
        });
    const remote = refs.find((ref) => ref.ref === this.#localRef);
    const known = await this.trackingTip();
    if (!remote) {
      // A branch tollgate saw is gone: deleting history is a rewrite too.
      if (known !== undefined)
        throw new AuditHistoryRewrittenError(this.branch, this.url, known, '(deleted)');
      return undefined;
    }
    let tip = remote.oid;
    const present = known === remote.oid && (await this.#has(remote.oid));
    if (!present) {
      // A fresh clone takes the recent history only (term start deepens it as needed).
      const fresh =
        this.#shallowDepth > 0 && known === undefined && (await this.localTip()) === undefined;
      const result = await this.#fetchBranch(fresh ? { depth: this.#shallowDepth } : {}).catch(
        async (error: unknown) => {
          // isomorphic-git moves the tracking ref before it stores the pack; undo that.
          if (known) await this.#setRef(this.#trackingRef, known);
          else
            await git
              .deleteRef({ fs: this.fs, gitdir: this.gitdir, ref: this.#trackingRef })
              .catch(() => undefined);
          throw error;
        },
      );
      // The branch may have moved since it was listed; what was fetched is the truth.
      tip = result.fetchHead ?? remote.oid;
      // git's fetch checks what it brought; isomorphic-git's read would load the pack whole.
      if (!result.fetchedBySystemGit && !(await this.#has(tip)))
        throw new Error(`fetch of ${this.branch} did not bring its tip ${tip}`);
      await this.#refuseRewritten(known, tip);
    }
    await this.#setRef(this.#trackingRef, tip);
    // A fresh clone (or one whose local branch fell behind) starts from the remote tip.
    const local = await this.localTip();
    if (local === undefined) await this.#setRef(this.#localRef, tip);
    return tip;
  }

  /**
   * A fetch of the audit branch alone (over http into the remote-tracking ref; over SSH
   * by the system git, no ref moved); `fetchHead` is the commit fetched.
   */
  async #fetchBranch(
    shallow: { depth?: number; relative?: boolean } = {},
  ): Promise<{ fetchHead: string | null; fetchedBySystemGit?: boolean }> {
    if (!this.#ssh && this.#fetchWithSystemGit && shallow.depth === undefined) {
      const fetchHead = await fetchOverHttp(
        this.gitdir,
        this.url,
        this.#localRef,
        this.#credentials(),
        (text) => this.redact(text),
      );
      return { fetchHead, fetchedBySystemGit: true };
    }
    if (!this.#ssh) return git.fetch({ ...this.#fetchOptions(), ...shallow });
    const depth = shallow.relative ? { deepen: shallow.depth } : { depth: shallow.depth };
    const fetchHead = await fetchRef(this.#ssh, this.gitdir, this.url, this.#localRef, {
      ...(shallow.depth === undefined ? {} : depth),
    });
    return { fetchHead };
  }

  /** A fetch of the audit branch alone into the remote-tracking ref. */
  #fetchOptions() {
    return {
      fs: this.fs,
      http: withUnbornHeadRepair(this.branch),
      gitdir: this.gitdir,
      remote: remoteName,
      ref: this.branch,
      singleBranch: true,
      tags: false,
      onAuth: this.#onAuth,
      onAuthFailure: this.#onAuthFailure,
      cache: this.cache,
    };
  }

  /** The clone's shallow boundary commits (none: the clone holds the whole history). */
  shallowCommits(): string[] {
    const file = join(this.gitdir, 'shallow');
    if (!fs.existsSync(file)) return [];
    return fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => /^[0-9a-f]{40}$/.test(line));
  }

  /**
   * Fetches as many older commits again as the shallow clone holds (its depth doubles);
   * false when the clone already holds the whole history.
   */
  async deepen(): Promise<boolean> {
    if (this.shallowCommits().length === 0) return false;
    await this.#fetchBranch({ depth: this.#depth, relative: true });
    this.#depth *= 2;
    return true;
  }

  /**
   * The tamper anchor: the remote-tracking ref is the last remote tip tollgate saw (after
   * a fetch or its own push). The remote may only have grown since; a tip that does not
   * descend from it means history was rewritten, and the tracking ref is put back.
   */
  async #refuseRewritten(known: string | undefined, tip: string): Promise<void> {
    if (known === undefined || known === tip || !(await this.#has(known))) return;
    const grown = await git.isDescendent({
      fs: this.fs,
      gitdir: this.gitdir,
      oid: tip,
      ancestor: known,
      depth: -1,
      cache: this.cache,
    });
    if (grown) return;
    auditHistoryRewritten.set(1);
    await this.#setRef(this.#trackingRef, known);
    throw new AuditHistoryRewrittenError(this.branch, this.url, known, tip);
  }

  /**
   * Maintenance of the local clone, in-process (the image ships no git binary): the
   * objects this clone wrote itself (loose, one file each: blobs, trees and commits of
   * every audit commit) go into one pack with its index, and loose objects no branch
   * reaches (commits replaced when a lost race rebuilt them) are deleted. Fetched
   * objects already arrive packed. Reachability is walked only through loose objects:
   * whatever a packed commit or tree reaches was packed with it, so the walk stops at
   * the first packed commit and costs what was written since the last maintenance.
   * Run between writes (the writer calls it in its serial cycle).
   */
  async maintain(): Promise<{ packed: number; pruned: number; merged: number }> {
    const { packed, pruned } = await this.#packLoose();
    return { packed, pruned, merged: await this.#mergePacks() };
  }

  async #packLoose(): Promise<{ packed: number; pruned: number }> {
    const loose = looseObjects(this.gitdir);
    if (loose.size === 0) return { packed: 0, pruned: 0 };
    const read = pacedLooseReader(loose);
    const reachable = await this.#reachableLoose(loose, read);
    if (reachable.size > 0)
      await writePack(this.gitdir, reachable.size, looseContents(reachable, read));
    for (const [, path] of loose) fs.rmSync(path, { force: true });
    for (const folder of new Set([...loose.values()].map((path) => dirname(path))))
      if (fs.readdirSync(folder).length === 0) fs.rmdirSync(folder);
    return { packed: reachable.size, pruned: loose.size - reachable.size };
  }

  /**
   * The loose objects the branch and its tracking ref reach, walked through loose
   * objects only (read from disk, loose-objects.ts): what a packed commit or tree
   * reaches was packed with it.
   */
  async #reachableLoose(
    loose: ReadonlyMap<string, string>,
    read: (oid: string) => Promise<LooseObject>,
  ): Promise<Set<string>> {
    const reachable = new Set<string>();
    const visitTree = async (oid: string): Promise<void> => {
      if (!loose.has(oid) || reachable.has(oid)) return;
      reachable.add(oid);
      for (const entry of parseTree((await read(oid)).object, oid))
        if (entry.type === 'tree') await visitTree(entry.oid);
        else if (loose.has(entry.oid)) reachable.add(entry.oid);
    };
    for (const tip of [await this.localTip(), await this.trackingTip()]) {
      let oid = tip;
      while (oid !== undefined && loose.has(oid) && !reachable.has(oid)) {
        reachable.add(oid);
        const commit = parseCommit((await read(oid)).object, oid);
        await visitTree(commit.tree);
        oid = commit.parent[0];
      }
    }
    return reachable;
  }

  /** The objects' contents, read one at a time as the pack is written. */
  async *#contents(oids: Iterable<string>): AsyncGenerator<PackInput> {
    for (const oid of oids) yield { oid, ...(await this.#content(oid)) };
  }

  /**
   * An object's content, deltas resolved: from the objects written lately when it is one
   * of them (loose-objects.ts), else through isomorphic-git's reader.
   */
  async #content(oid: string): Promise<{ type: PackObjectType; object: Uint8Array }> {
    const written = objectWrittenLately(this.gitdir, oid);
    if (written !== undefined) return written;
    const { type, object } = await git.readObject({
      fs: this.fs,
      gitdir: this.gitdir,
      oid,
      format: 'content',
      cache: this.cache,
    });
    if (type === 'deflated' || type === 'wrapped')
      throw new Error(`audit clone: object ${oid} read as ${type}, not as its content`);
    return { type, object: object as Uint8Array };
  }

  /**
   * Merges small packs into one (mergeSmallPacks, pack-writer.ts), so the clone holds a
   * few packs whatever its age: every object lookup scans the pack indexes, and
   * isomorphic-git keeps each pack it read in memory. Returns how many packs were merged.
   */
  #mergePacks(): Promise<number> {
    return mergeSmallPacks(this.gitdir, this.cache);
  }

  /**
   * Refreshes from the remote; when nothing local is unpushed, the local branch moves to
   * the remote tip (another writer's commits), so a reader of this clone sees the branch
   * as the remote has it. With unpushed commits, the next push rebuilds them on that tip.
   */
  async sync(): Promise<void> {
    const tip = await this.fetch();
    if (tip === undefined || (await this.unpushed()).length > 0) return;
    await this.#setRef(this.#localRef, tip);
  }

  /**
   * Rebuilds `pending` on `base` (the remote-tracking tip), skipping commits whose file
   * already landed; returns the new local tip. What it wrote is what `unpushed` would find
   * now, so it becomes that walk's answer (no walk of the rebuilt backlog follows).
   */
  async #rebuild(
    pending: readonly LocalCommit[],
    base: string | undefined,
  ): Promise<string | undefined> {
    let tip = base;
    const rebuilt: LocalCommit[] = [];
    for (const commit of pending) {
      const { tree, path } = await this.#placeFile(
        await this.treeOf(tip),
        commit.path,
        commit.blob,
      );
      if (tree === undefined) continue;
      if (path !== commit.path)
        this.#logger.warn(
          { from: commit.path, to: path },
          'audit file name taken on the remote; renamed',
        );
      const committer = {
        ...this.#author,
        timestamp: Math.floor(this.#clock.now() / 1000),
        timezoneOffset: 0,
      };
      const parent = tip;
      tip = await this.#writeCommit({
        message: commit.message,
        tree,
        parent: parent ? [parent] : [],
        author: commit.author,
        committer,
      });
      rebuilt.push({ ...commit, oid: tip, parent, path });
    }
    if (tip === undefined) return tip;
    await this.#setRef(this.#localRef, tip);
    this.#lastUnpushed = { local: tip, remote: base, commits: rebuilt };
    return tip;
  }

  /**
   * Term start: the unpushed commits, when they sit on another base than the remote tip
   * (the remote moved since), are rebuilt on it locally, so the clone reads as the remote
   * will once they are pushed. Returns how many commits are unpushed.
   */
  async rebase(): Promise<number> {
    const pending = await this.unpushed();
    const base = await this.trackingTip();
    if (pending.length === 0 || (pending[0] as LocalCommit).parent === base) return pending.length;
    await this.#rebuild(pending, base);
    return (await this.unpushed()).length;
  }

  /**
   * Pushes the local branch to the remote's: over SSH by the system git; over HTTP with
   * the commits `pending` holds on `base` (receive-pack.ts), so a push reads only what
   * it sends, whatever the history. A branch the remote does not have yet takes
   * isomorphic-git's push (everything is new then).
   */
  async #pushBranch(pending: readonly LocalCommit[], base: string | undefined): Promise<void> {
    if (this.#ssh) return pushRef(this.#ssh, this.gitdir, this.url, this.#localRef);
    if (base === undefined) return this.#pushNewBranch();
    const target = { http, url: this.url, headers: this.#authHeaders() };
    const tip = (pending.at(-1) as LocalCommit).oid;
    if (await this.#sentAtOnce(target, pending, base)) return;
    const advertised = await advertisedRefs(target);
    const current = advertised.refs.get(this.#localRef);
    this.#server = { capabilities: advertised.capabilities, tip: current };
    if (current === tip) return; // it landed before: the answer to that push was lost
    // The remote moved: on to commits of ours that landed (their answer lost), or elsewhere.
    const from = current === base ? 0 : pending.findIndex((commit) => commit.oid === current) + 1;
    if (from === 0 && current !== base) throw new Errors.PushRejectedError('not-fast-forward');
    const packfile = await this.#packOf(pending.slice(from));
    await sendPack(target, advertised, { ref: this.#localRef, old: current, new: tip }, packfile);
    this.#server = { capabilities: advertised.capabilities, tip };
  }

  /**
   * The pack sent without asking for the refs first, when this process last saw the
   * remote at `base` (its own push landed there, or the server said so) and knows the
   * server's capabilities: one round trip, not two. The server still moves the ref only
   * from `base`; a refusal (another writer moved it, or an answer was lost) or any other
   * failure is not an answer: the push asks for the refs and goes on as before.
   */
  async #sentAtOnce(
    target: ReceivePackTarget,
    pending: readonly LocalCommit[],
    base: string,
  ): Promise<boolean> {
    const server = this.#server;
    if (server === undefined || server.tip !== base) return false;
    const tip = (pending.at(-1) as LocalCommit).oid;
    this.#server = undefined;
    try {
      const packfile = await this.#packOf(pending);
      await sendPack(
        target,
        { refs: new Map(), capabilities: server.capabilities },
        { ref: this.#localRef, old: base, new: tip },
        packfile,
      );
    } catch (error) {
      this.#logger.debug(
        { err: this.redact(error instanceof Error ? error.message : String(error)) },
        'audit pack sent at once not taken; asking the server for its refs',
      );
      return false;
    }
    this.#server = { capabilities: server.capabilities, tip };
    return true;
  }

  /**
   * A push landed `chunk`: the remote-tracking ref moves to its last commit, and `rest`
   * (already based on it) becomes the answer of `unpushed` (no walk of the rest follows).
   */
  async #pushed(chunk: readonly LocalCommit[], rest: readonly LocalCommit[]): Promise<void> {
    const tip = (chunk.at(-1) as LocalCommit).oid;
    await this.#setRef(this.#trackingRef, tip);
    this.#lastUnpushed = { local: await this.localTip(), remote: tip, commits: rest };
  }

  /** The pack a push of `commits` sends: what they add over their parents. */
  async #packOf(commits: readonly LocalCommit[]): Promise<Uint8Array> {
    const oids = await this.#objectsOf(commits);
    return packBytes(oids.length, this.#contents(oids));
  }

  /** What the commits add over their parents: each commit, its changed trees and its blob. */
  async #objectsOf(commits: readonly LocalCommit[]): Promise<string[]> {
    const oids = new Set<string>();
    for (const commit of commits) {
      oids.add(commit.oid);
      const added = await objectsAdded(
        this,
        await this.treeOf(commit.parent),
        await this.treeOf(commit.oid),
      );
      for (const oid of added) oids.add(oid);
    }
    return [...oids];
  }

  /** The Authorization header of the current token (a token file is read here). */
  #authHeaders(): Record<string, string> {
    const auth = this.#credentials();
    if (auth === undefined) return {};
    const basic = Buffer.from(`${auth.username}:${auth.password}`, 'utf8');
    return { Authorization: `Basic ${basic.toString('base64')}` };
  }

  async #pushNewBranch(): Promise<void> {
    await git.push({
      fs: this.fs,
      http,
      gitdir: this.gitdir,
      remote: remoteName,
      ref: this.#localRef,
      remoteRef: this.#localRef,
      onAuth: this.#onAuth,
      onAuthFailure: this.#onAuthFailure,
      cache: this.cache,
    });
  }

  #delay(attempt: number): number {
    const ceiling = Math.min(this.#retry.maxDelayMs, this.#retry.baseDelayMs * 2 ** (attempt - 1));
    // Equal jitter: at least half the ceiling, so retries still back off, plus a random half.
    return Math.round(ceiling / 2 + this.#random() * (ceiling / 2));
  }

  /**
   * Pushes the unpushed commits, the oldest `options.maxCommits` of them when that is
   * given (PushOptions). Returns the number of decisions that landed. When the
   * remote moved under them, `replan` may first commit them anew on its tip (the writer
   * plans them against what the remote recorded meanwhile: leftovers.ts).
   * Throws AuditPushError after the attempt or time bound; the commits stay local.
   */
  async push(
    replan?: (pending: readonly LocalCommit[]) => Promise<void>,
    options: PushOptions = {},
  ): Promise<number> {
    if (this.#refused) {
      auditPushFailuresTotal.inc({ reason: 'rewritten' });
      throw new AuditPushError(this.#refused.message, 'rewritten');
    }
    const started = this.#clock.now();
    const wallStart = performance.now();
    let attempt = 0;
    let landed = 0;
    for (;;) {
      let pending = await this.unpushed();
      if (pending.length === 0) return landed;
      if (options.fence && !options.fence()) {
        auditPushFailuresTotal.inc({ reason: 'fenced' });
        throw new AuditPushError(
          `push of ${pending.length} audit commit(s) to ${this.url} branch ${this.branch} stopped after ${attempt} attempt(s): the lease is lost (fenced); the commits stay local`,
          'fenced',
        );
      }
      const base = await this.trackingTip();
      if ((pending[0] as LocalCommit).parent !== base && replan) {
        await replan(pending);
        pending = await this.unpushed();
        if (pending.length === 0) return landed;
      }
      if ((pending[0] as LocalCommit).parent !== base) {
        await this.#rebuild(pending, base);
        pending = await this.unpushed();
        if (pending.length === 0) return landed;
      }
      attempt += 1;
      const chunk = this.#ssh ? pending : pending.slice(0, options.maxCommits ?? pending.length);
      try {
        await this.#pushBranch(chunk, base);
        await this.#pushed(chunk, pending.slice(chunk.length));
        landed += chunk.reduce((sum, commit) => sum + commit.decisions, 0);
        auditPushSeconds.observe((performance.now() - wallStart) / 1000);
        return landed;
      } catch (error) {
        const reason = classifyPushError(error);
        auditPushFailuresTotal.inc({ reason });
        const message = this.redact(error instanceof Error ? error.message : String(error));
        const delay = this.#delay(attempt);
        const elapsed = this.#clock.now() - started;
        this.#logger.warn(
          { reason, attempt, commits: pending.length, err: message },
          'audit push failed',
        );
        if (attempt >= this.#retry.maxAttempts || elapsed + delay > this.#retry.maxElapsedMs) {
          auditPushSeconds.observe((performance.now() - wallStart) / 1000);
          throw new AuditPushError(
            `push of ${pending.length} audit commit(s) to ${this.url} branch ${this.branch} failed after ${attempt} attempt(s) in ${elapsed}ms (${reason}): ${message}`,
            reason,
          );
        }
        await this.#sleep(delay);
        try {
          await this.fetch();
        } catch (fetchError) {
          const fetchReason = classifyPushError(fetchError);
          auditPushFailuresTotal.inc({ reason: fetchReason });
          if (fetchError instanceof AuditHistoryRewrittenError)
            throw new AuditPushError(fetchError.message, 'rewritten');
          this.#logger.warn(
            {
              reason: fetchReason,
              err: this.redact(
                fetchError instanceof Error ? fetchError.message : String(fetchError),
              ),
            },
            'audit fetch before retry failed',
          );
        }
      }
    }
  }
}

/**
 * The commits of a branch's first-parent chain (the audit branch is linear), read
 * lazily from its tip back and remembered: `has` reads only as far back as it must.
 * It ends at the root or at the end of a shallow clone's history.
 */
class FirstParentChain {
  readonly #repo: AuditRepo;
  readonly #seen = new Set<string>();
  #next: string | undefined;

  constructor(repo: AuditRepo, tip: string | undefined) {
    this.#repo = repo;
    this.#next = tip;
  }

  async has(oid: string): Promise<boolean> {
    while (!this.#seen.has(oid) && this.#next !== undefined) {
      const current = this.#next;
      this.#seen.add(current);
      this.#next = await git
        .readCommit({
          fs: this.#repo.fs,
          gitdir: this.#repo.gitdir,
          oid: current,
          cache: this.#repo.cache,
        })
        .then(({ commit }) => commit.parent[0])
        .catch(() => undefined);
    }
    return this.#seen.has(oid);
  }
}
