/**
 * Reading the audit branch back: from a local clone (a folder, bare or not, such as
 * the writer's cache) or from a remote URL (fetched into a temporary bare clone).
 * History is walked along first parents from the tip; each commit is returned with
 * its tree changes and the records of the files it added, oldest first.
 */
import * as fs from 'node:fs';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import git, { Errors } from 'isomorphic-git';
import { isCheckpointFile, parseCheckpoint } from './checkpoint.ts';
import { parseTrailers } from './message.ts';
import type { Carried } from '../decide/release-carried.ts';
import { parseBatch, type AuditRecord } from './record.ts';
import { AuditRepo } from './repo.ts';
import { CatFileObjects, systemGitPresent, type ParsedCommit } from './cat-file.ts';
import type { TokenSource } from '../policy/credentials.ts';
import { isSshUrl, type SshAccess } from '../policy/git-ssh.ts';
import { diffTrees, type Change, type Repo } from './tree.ts';
import { objectsOf } from './iso-objects.ts';

export interface AuditCommit {
  readonly oid: string;
  readonly parents: readonly string[];
  readonly message: string;
  readonly summary: string;
  readonly trailers: ReadonlyMap<string, string[]>;
  readonly author: { readonly name: string; readonly email: string; readonly timestamp: number };
  /** Committer time, epoch seconds. */
  readonly committedAt: number;
  readonly changes: readonly Change[];
  /** Records of the files the commit added, with the file and 1-based line each came from. */
  readonly records: readonly (AuditRecord & { readonly file: string; readonly line?: number })[];
  /** Files that could not be parsed, with the reason (named file, line and field). */
  readonly errors: readonly string[];
  /**
   * A checkpoint of open intents the commit added (checkpoint.ts); its lines are not
   * records. `carried`: the Blocked writes and gang memory it carries, when it does.
   */
  readonly checkpoint?: {
    readonly file: string;
    readonly open: readonly AuditRecord[];
    readonly carried?: Carried;
  };
  /** The commit's SSH/GPG signature and the exact bytes it signs, when signed. */
  readonly signature?: { readonly armored: string; readonly payload: string };
}

export interface AuditSource extends Repo {
  readonly tip: string | undefined;
  readonly description: string;
  close(): void;
}

async function resolveFirst(gitdir: string, refs: readonly string[]): Promise<string | undefined> {
  for (const ref of refs) {
    try {
      return await git.resolveRef({ fs, gitdir, ref });
    } catch (error) {
      if (!(error instanceof Errors.NotFoundError)) throw error;
    }
  }
  return undefined;
}

export interface SourceOptions {
  readonly token?: TokenSource;
  readonly ssh?: SshAccess;
  /**
   * Read objects through the system git when it is there (cat-file.ts): memory holds one
   * object, not the pack. For walks of the whole history (`audit verify`, `log`, `show`).
   */
  readonly systemGit?: boolean;
}

/**
 * Opens an audit source. `location` is a folder (a clone, a bare repo, or a writer's
 * cache dir holding audit.git), an http(s) URL, or an SSH one with `ssh` (its deploy
 * key); the token is used only for http(s) URLs.
 */
export async function openAuditSource(
  location: string,
  branch: string,
  options: SourceOptions = {},
): Promise<AuditSource> {
  const source = await openSource(location, branch, options);
  if (!options.systemGit || !systemGitPresent()) return source;
  const objects = new CatFileObjects(source.gitdir);
  return {
    ...source,
    objects,
    close: () => {
      objects.close();
      source.close();
    },
  };
}

async function openSource(
  location: string,
  branch: string,
  options: SourceOptions,
): Promise<AuditSource> {
  if (/^https?:\/\//.test(location) || (options.ssh && isSshUrl(location))) {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-read-'));
    const repo = new AuditRepo({
      dir,
      url: location,
      branch,
      ...(options.token === undefined ? {} : { token: options.token }),
      ...(options.ssh === undefined ? {} : { ssh: options.ssh }),
      author: { name: 'tollgate audit reader', email: 'reader@tollgate.invalid' },
      // Readers (log, show, verify) take the whole history.
      shallowDepth: 0,
      fetchWithSystemGit: options.systemGit === true && systemGitPresent(),
    });
    try {
      await repo.open();
      const tip = await repo.fetch();
      return {
        gitdir: dir,
        cache: {},
        tip,
        description: `${repo.url} branch ${branch}`,
        close: () => rmSync(dir, { recursive: true, force: true }),
      };
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      // No `cause`: the error is re-worded with the token removed; the original must not travel further.
      // eslint-disable-next-line preserve-caught-error
      throw new Error(
        `cannot read audit branch ${branch} from ${repo.url}: ${repo.redact((error as Error).message)}`,
      );
    }
  }
  const candidates = [join(location, 'audit.git'), join(location, '.git'), location];
  const gitdir = candidates.find(
    (candidate) => existsSync(join(candidate, 'HEAD')) && existsSync(join(candidate, 'objects')),
  );
  if (!gitdir)
    throw new Error(`${location} is not a git repository (looked for ${candidates.join(', ')})`);
  const tip = await resolveFirst(gitdir, [`refs/heads/${branch}`, `refs/remotes/origin/${branch}`]);
  return {
    gitdir,
    cache: {},
    tip,
    description: `${location} branch ${branch}`,
    close: () => undefined,
  };
}

export interface ReadOptions {
  /** Stop walking at commits committed before this (epoch ms); they are not returned. */
  readonly since?: number;
  /** Only decode records of files under this prefix (e.g. `audit/<cluster>/`). */
  readonly pathPrefix?: string;
  /** At most this many commits from the tip. */
  readonly limit?: number;
}

/**
 * The branch history newest first, one commit at a time, along first parents: memory
 * holds one commit's records, whatever the length of the history. `audit verify` and
 * recovery stream through this; `readAuditHistory` collects it for small ranges.
 */
export async function* walkAuditHistory(
  source: AuditSource,
  options: ReadOptions = {},
): AsyncGenerator<AuditCommit> {
  let oid = source.tip;
  // A step reads its parent for the parent's tree; the next step is that parent.
  let known: ParsedCommit | undefined;
  let count = 0;
  while (oid !== undefined && count < (options.limit ?? Number.POSITIVE_INFINITY)) {
    const step = await readOneCommit(source, oid, options, known);
    if (step === undefined) return;
    count += 1;
    yield step.found;
    oid = step.found.parents[0];
    known = step.parent;
  }
}

async function readOneCommit(
  source: AuditSource,
  oid: string,
  options: ReadOptions,
  known: ParsedCommit | undefined,
): Promise<{ found: AuditCommit; parent: ParsedCommit | undefined } | undefined> {
  const commit = known ?? (await readCommitOf(source, oid));
  if (options.since !== undefined && commit.committer.timestamp * 1000 < options.since)
    return undefined;
  const parentOid = commit.parent[0];
  const parent = parentOid ? await readCommitOf(source, parentOid) : undefined;
  const parentTree = parent?.tree;
  const changes = await diffTrees(source, parentTree, commit.tree);
  const records: (AuditRecord & { file: string; line: number })[] = [];
  const errors: string[] = [];
  let checkpoint: AuditCommit['checkpoint'];
  for (const change of changes) {
    if (change.change !== 'added' || !change.path.endsWith('.jsonl')) continue;
    if (options.pathPrefix && !change.path.startsWith(options.pathPrefix)) continue;
    const blob = await objectsOf(source).blob(change.oid);
    const text = Buffer.from(blob).toString('utf8');
    try {
      if (isCheckpointFile(change.path))
        checkpoint = { file: change.path, ...parseCheckpoint(text, change.path) };
      else
        for (const [index, record] of parseBatch(text, change.path).entries())
          records.push({ ...record, file: change.path, line: index + 1 });
    } catch (error) {
      errors.push((error as Error).message);
    }
  }
  const found: AuditCommit = {
    oid,
    parents: commit.parent,
    message: commit.message,
    summary: commit.message.split('\n')[0] ?? '',
    trailers: parseTrailers(commit.message),
    author: {
      name: commit.author.name,
      email: commit.author.email,
      timestamp: commit.author.timestamp,
    },
    committedAt: commit.committer.timestamp,
    changes,
    records,
    errors,
    ...(checkpoint ? { checkpoint } : {}),
    ...(commit.gpgsig
      ? { signature: { armored: commit.gpgsig, payload: await signedPayload(source, oid) } }
      : {}),
  };
  return { found, parent };
}

/** A commit read by the source's system git when it has one, by isomorphic-git otherwise. */
function readCommitOf(source: AuditSource, oid: string): Promise<ParsedCommit> {
  return objectsOf(source).commit(oid);
}

/**
 * The bytes a commit signature covers: the raw commit without its `gpgsig` header
 * (and the header's continuation lines), as `git verify-commit` computes it.
 * isomorphic-git's own `payload` only knows PGP armor and mangles SSH-signed commits.
 */
async function signedPayload(source: AuditSource, oid: string): Promise<string> {
  const text = (await objectsOf(source).raw(oid)).toString('utf8');
  const end = text.indexOf('\n\n');
  const headers = (end < 0 ? text : text.slice(0, end)).split('\n');
  const kept: string[] = [];
  let inSignature = false;
  for (const line of headers) {
    if (line.startsWith('gpgsig ')) inSignature = true;
    else if (!(inSignature && line.startsWith(' '))) {
      inSignature = false;
      kept.push(line);
    }
  }
  return `${kept.join('\n')}${end < 0 ? '' : text.slice(end)}`;
}

/** The branch history, oldest first, along first parents. */
export async function readAuditHistory(
  source: AuditSource,
  options: ReadOptions = {},
): Promise<AuditCommit[]> {
  const commits: AuditCommit[] = [];
  for await (const commit of walkAuditHistory(source, options)) commits.push(commit);
  return commits.reverse();
}

/** One commit by (possibly abbreviated) oid. */
export async function readAuditCommit(source: AuditSource, ref: string): Promise<AuditCommit> {
  let oid: string;
  try {
    oid =
      /^[0-9a-f]{4,40}$/i.test(ref) && ref.length < 40
        ? await git.expandOid({ fs, gitdir: source.gitdir, oid: ref, cache: source.cache })
        : ref;
  } catch (error) {
    throw new Error(
      `commit ${ref} not found in ${source.description}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  const history = await readAuditHistory({ ...source, tip: oid }, { limit: 1 }).catch(
    (error: Error) => {
      throw new Error(`commit ${ref} not found in ${source.description}: ${error.message}`);
    },
  );
  const found = history[0];
  if (!found || found.oid !== oid)
    throw new Error(`commit ${ref} could not be read from ${source.description}`);
  return found;
}

/** The writer's own clone as a source (its local branch includes commits not yet pushed). */
export async function repoSource(repo: AuditRepo): Promise<AuditSource> {
  return {
    gitdir: repo.gitdir,
    cache: repo.cache,
    tip: await repo.localTip(),
    description: `local clone of ${repo.url}`,
    close: () => undefined,
  };
}
