/**
 * Git objects read by the system git, one at a time, through one long-lived
 * `git cat-file --batch`: memory holds the object asked for, whatever the size of the
 * repository. isomorphic-git reads a pack into one buffer with an index of every object
 * in it, so `audit verify` over a million records held 536 MiB (docs/BENCHMARKS.md); the
 * readers of whole histories (`audit verify`, `log`, `show`) read through this when the
 * system git is there (the image ships /usr/bin/git for SSH remotes), and through
 * isomorphic-git otherwise. git itself is held to small pack windows and delta cache.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { TreeEntry } from 'isomorphic-git';
import { fetchedHead, gitEnv } from '../policy/git-ssh.ts';

/** A commit as the audit reader needs it (the fields isomorphic-git's readCommit gives). */
export interface ParsedCommit {
  readonly tree: string;
  readonly parent: string[];
  readonly author: { readonly name: string; readonly email: string; readonly timestamp: number };
  readonly committer: { readonly timestamp: number };
  readonly message: string;
  readonly gpgsig?: string;
}

/** What the audit reader asks of a repository's objects. */
export interface GitObjects {
  commit(oid: string): Promise<ParsedCommit>;
  tree(oid: string): Promise<TreeEntry[]>;
  blob(oid: string): Promise<Uint8Array>;
  /** The object's bytes as git stores them (for a commit: what its signature covers, and the signature). */
  raw(oid: string): Promise<Buffer>;
  close(): void;
}

/** Settings for the git process: small pack windows and delta cache, no system or user config. */
const boundedGit = [
  '-c',
  'core.packedGitWindowSize=16m',
  '-c',
  'core.packedGitLimit=64m',
  '-c',
  'core.deltaBaseCacheLimit=16m',
];

/** Whether `git` runs here (checked once). */
let gitPresent: boolean | undefined;
export function systemGitPresent(): boolean {
  gitPresent ??= spawnSync('git', ['--version'], { stdio: 'ignore' }).status === 0;
  return gitPresent;
}

interface Pending {
  readonly oid: string;
  readonly resolve: (object: { type: string; content: Buffer }) => void;
  readonly reject: (error: Error) => void;
}

export class CatFileObjects implements GitObjects {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #pending: Pending[] = [];
  readonly #gitdir: string;
  #buffered: Buffer = Buffer.alloc(0);
  #failure: Error | undefined;
  #stderr = '';

  constructor(gitdir: string) {
    this.#gitdir = gitdir;
    this.#child = spawn('git', [...boundedGit, '--git-dir', gitdir, 'cat-file', '--batch'], {
      env: gitEnv(),
    });
    this.#child.stdout.on('data', (chunk: Buffer) => this.#take(chunk));
    this.#child.stderr.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-2000);
    });
    this.#child.on('error', (error) => this.#fail(error));
    this.#child.on('close', (code) =>
      this.#fail(
        new Error(
          `git cat-file over ${gitdir} ended (exit ${code})${this.#stderr ? `: ${this.#stderr.trim()}` : ''}`,
        ),
      ),
    );
    // A reader that stops early closes the pipe; git's EPIPE is not ours to report.
    this.#child.stdin.on('error', (error) => this.#fail(error));
  }

  async commit(oid: string): Promise<ParsedCommit> {
    return parseCommit(await this.#typed(oid, 'commit'), oid);
  }

  async tree(oid: string): Promise<TreeEntry[]> {
    return parseTree(await this.#typed(oid, 'tree'), oid);
  }

  async blob(oid: string): Promise<Uint8Array> {
    return this.#typed(oid, 'blob');
  }

  async raw(oid: string): Promise<Buffer> {
    return (await this.#read(oid)).content;
  }

  close(): void {
    this.#failure ??= new Error('git cat-file reader closed');
    this.#child.stdin.end();
    this.#child.kill();
  }

  async #typed(oid: string, type: string): Promise<Buffer> {
    const object = await this.#read(oid);
    if (object.type !== type)
      throw new Error(`git object ${oid} in ${this.#gitdir} is a ${object.type}, not a ${type}`);
    return object.content;
  }

  #read(oid: string): Promise<{ type: string; content: Buffer }> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (!/^[0-9a-f]{40}$/.test(oid))
      return Promise.reject(new Error(`not a full object id: ${JSON.stringify(oid)}`));
    return new Promise((resolve, reject) => {
      this.#pending.push({ oid, resolve, reject });
      this.#child.stdin.write(`${oid}\n`);
    });
  }

  /** Answers come in the order asked: `<oid> <type> <size>\n<content>\n` or `<oid> missing\n`. */
  #take(chunk: Buffer): void {
    this.#buffered = this.#buffered.length === 0 ? chunk : Buffer.concat([this.#buffered, chunk]);
    for (;;) {
      const newline = this.#buffered.indexOf(10);
      if (newline < 0) return;
      const header = this.#buffered.subarray(0, newline).toString('utf8').split(' ');
      const waiting = this.#pending[0];
      if (waiting === undefined) return this.#fail(new Error('git cat-file answered unasked'));
      if (header[1] === 'missing') {
        this.#pending.shift();
        this.#buffered = this.#buffered.subarray(newline + 1);
        waiting.reject(new Error(`git object ${waiting.oid} not found in ${this.#gitdir}`));
        continue;
      }
      const size = Number(header[2]);
      const end = newline + 1 + size;
      if (this.#buffered.length < end + 1) return;
      this.#pending.shift();
      // A copy: the rest of the buffer moves on, the answer must not hold it.
      const content = Buffer.from(this.#buffered.subarray(newline + 1, end));
      this.#buffered = this.#buffered.subarray(end + 1);
      waiting.resolve({ type: header[1] ?? '', content });
    }
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const waiting of this.#pending.splice(0)) waiting.reject(this.#failure);
  }
}

/** A commit's headers and message, read as isomorphic-git's readCommit reads them. */
export function parseCommit(content: Buffer, oid: string): ParsedCommit {
  const text = content.toString('utf8');
  const split = text.indexOf('\n\n');
  const headers: string[] = [];
  for (const line of (split < 0 ? text : text.slice(0, split)).split('\n')) {
    if (line.startsWith(' ') && headers.length > 0)
      headers[headers.length - 1] += `\n${line.slice(1)}`;
    else headers.push(line);
  }
  const keyOf = (h: string) => h.slice(0, h.indexOf(' '));
  const valueOf = (h: string) => h.slice(h.indexOf(' ') + 1);
  if (headers.length === 0 || keyOf(headers[0]!) !== 'tree')
    throw new Error(`git commit ${oid} does not start with its tree`);
  const parent: string[] = [];
  let index = 1;
  for (; index < headers.length && keyOf(headers[index]!) === 'parent'; index++)
    parent.push(valueOf(headers[index]!));
  const single = new Map<string, string>();
  for (; index < headers.length; index++) {
    const key = keyOf(headers[index]!);
    if (!single.has(key)) single.set(key, valueOf(headers[index]!));
  }
  const author = parsePerson(single.get('author'), 'author', oid);
  const committer = parsePerson(single.get('committer'), 'committer', oid);
  const gpgsig = single.get('gpgsig');
  const message = split < 0 ? '' : text.slice(split + 2);
  return {
    tree: valueOf(headers[0]!),
    parent,
    author,
    committer: { timestamp: committer.timestamp },
    message: `${message.replace(/\r/g, '').replace(/^\n+/, '').replace(/\n+$/, '')}\n`,
    ...(gpgsig === undefined ? {} : { gpgsig }),
  };
}

function parsePerson(
  value: string | undefined,
  field: string,
  oid: string,
): { name: string; email: string; timestamp: number } {
  const match = value?.match(/^(.*) <(.*)> (.*) (.*)$/);
  if (!match) throw new Error(`git commit ${oid} has no readable ${field}`);
  return { name: match[1]!, email: match[2]!, timestamp: Number(match[3]) };
}

/** A tree's entries as isomorphic-git's readTree gives them (a folder's mode is 040000). */
export function parseTree(content: Buffer, oid: string): TreeEntry[] {
  const entries: TreeEntry[] = [];
  let cursor = 0;
  while (cursor < content.length) {
    const space = content.indexOf(32, cursor);
    const nul = content.indexOf(0, cursor);
    if (space < 0 || nul < 0 || nul + 21 > content.length)
      throw new Error(`git tree ${oid} cannot be read at byte ${cursor}`);
    let mode = content.subarray(cursor, space).toString('utf8');
    if (mode === '40000') mode = '040000';
    const type = mode === '040000' ? 'tree' : mode === '160000' ? 'commit' : 'blob';
    entries.push({
      mode,
      path: content.subarray(space + 1, nul).toString('utf8'),
      oid: content.subarray(nul + 1, nul + 21).toString('hex'),
      type,
    });
    cursor = nul + 21;
  }
  return entries;
}

/**
 * Fetches `ref` of the http(s) `url` into the bare clone `gitdir` with the system git
 * (memory bounded by git's own limits, where isomorphic-git receives and indexes the
 * pack in memory); returns the fetched commit, no ref of the clone moved. Credentials go
 * to git as an Authorization header in its environment (GIT_CONFIG_*), never on its
 * command line; `redact` cleans what git said before it reaches an error.
 */
export function fetchOverHttp(
  gitdir: string,
  url: string,
  ref: string,
  credentials: { readonly username: string; readonly password: string } | undefined,
  redact: (text: string) => string,
): Promise<string> {
  const auth = credentials
    ? {
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'http.extraHeader',
        GIT_CONFIG_VALUE_0: `Authorization: Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`,
      }
    : {};
  const args = [...boundedGit, '--git-dir', gitdir, 'fetch', '--quiet', '--no-tags'];
  return new Promise((resolve, reject) => {
    const child = spawn('git', [...args, '--no-auto-gc', url, ref], {
      env: { ...gitEnv(), ...auth },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-4000);
    });
    child.on('error', (error) => reject(new Error(`git fetch of ${ref}: ${error.message}`)));
    child.on('close', (code) => {
      if (code !== 0) {
        const said = stderr.trim().split('\n').slice(-3).join(' / ');
        return reject(new Error(redact(`git fetch of ${ref} failed (exit ${code}): ${said}`)));
      }
      const head = fetchedHead(gitdir);
      if (head === undefined) reject(new Error(`git fetch of ${ref} left no FETCH_HEAD`));
      else resolve(head);
    });
  });
}
