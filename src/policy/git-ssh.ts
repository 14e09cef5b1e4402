/**
 * Git over SSH with a deploy key. isomorphic-git speaks only http(s), so for `ssh://` and
 * `git@host:path` remotes the network steps alone (list the remote's refs, fetch into,
 * and push from, the same bare clone isomorphic-git reads and writes) are run by the
 * system `git`, which runs the system `ssh`:
 *
 *   ssh -F /dev/null -i <key> -o IdentitiesOnly=yes -o UserKnownHostsFile=<known_hosts>
 *       -o StrictHostKeyChecking=yes -o BatchMode=yes ... [-p port] [user@]host
 *       "git-upload-pack '<path>'"
 *
 * No shell anywhere (the image has none): git runs GIT_SSH_COMMAND through /bin/sh, and
 * GIT_SSH takes no options, so git is given the remote as git's own `ext::` transport
 * (git-remote-ext, enabled for these commands alone by `-c protocol.ext.allow=always`),
 * which runs the ssh command line above as an argument vector, word by word, with the
 * same remote command git's ssh transport sends.
 *
 * The key is the operator's (a mounted Secret), never the policy's; ssh reads the file at
 * each connection, so a rotated Secret is used from the next fetch or push on. The host
 * key is always checked against the operator's known_hosts file unless the operator sets
 * the insecure flag. Every error names the flag of the file involved and never carries
 * the key: ssh does not print it, and git's output is cut to its last lines.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** How tollgate reaches one SSH remote: the operator's run configuration. */
export interface SshAccess {
  /** The private key (deploy key) file. */
  readonly keyFile: string;
  /** The flag that names `keyFile`, for errors (e.g. `--git-ssh-key-file`). */
  readonly keyFlag: string;
  /** The known_hosts file the server's host key must be in (unless insecure). */
  readonly knownHostsFile?: string;
  /** Host key not checked at all (`--git-ssh-insecure-ignore-host-key`). */
  readonly insecureIgnoreHostKey?: boolean;
}

export type SshGitErrorKind = 'auth' | 'host-key' | 'network' | 'rejected' | 'not-found' | 'other';

/** A failed git/ssh step, classified from git's and ssh's own words. */
export class SshGitError extends Error {
  readonly kind: SshGitErrorKind;
  constructor(kind: SshGitErrorKind, message: string) {
    super(message);
    this.name = 'SshGitError';
    this.kind = kind;
  }
}

export const knownHostsFlag = '--git-ssh-known-hosts';
export const insecureHostKeyFlag = '--git-ssh-insecure-ignore-host-key';

/** `ssh://[user@]host[:port]/path` or scp-like `[user@]host:path` (no scheme, no slash before the colon). */
export function isSshUrl(url: string): boolean {
  if (/^ssh:\/\//i.test(url)) return true;
  return /^(?:[\w.-]+@)?[\w.-]+:(?!\/\/)[^\s]+$/.test(url) && !/^[a-z][a-z0-9+.-]*:\/\//i.test(url);
}

/** Where an SSH URL points, as git reads it. */
export interface SshRemote {
  /** `[user@]host` (an IPv6 address without its brackets). */
  readonly destination: string;
  readonly port?: string;
  /** The path git asks the server for: `/abs`, `rel` (scp-like), `~user/...`. */
  readonly path: string;
}

/**
 * `ssh://[user@]host[:port]/path` (`/~user/...` read as `~user/...`, as git does) or
 * `[user@]host:path`. A user or host starting with `-` is refused (it would be read as
 * an ssh option), as git refuses it.
 */
export function parseSshRemote(url: string): SshRemote {
  let user: string;
  let host: string;
  let port: string | undefined;
  let path: string;
  if (/^ssh:\/\//i.test(url)) {
    const parsed = new URL(url);
    user = decodeURIComponent(parsed.username);
    host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    port = parsed.port || undefined;
    path = decodeURIComponent(parsed.pathname);
    if (path.startsWith('/~')) path = path.slice(1);
  } else {
    const match = /^(?:([^@]+)@)?([^:]+):(.*)$/.exec(url);
    if (!match) throw new SshGitError('other', `${url} is not an SSH URL`);
    [user, host, path] = [match[1] ?? '', match[2] as string, match[3] as string];
  }
  if (!host || host.startsWith('-') || user.startsWith('-') || !path)
    throw new SshGitError('other', `${url}: refused (no host or path, or one starting with '-')`);
  return { destination: user ? `${user}@${host}` : host, ...(port ? { port } : {}), path };
}

/** The ssh options tollgate reaches a Git server with: the operator's key and known_hosts only. */
export function sshOptions(access: SshAccess): string[] {
  const hostKey = access.insecureIgnoreHostKey
    ? ['-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null']
    : [
        '-o',
        'StrictHostKeyChecking=yes',
        '-o',
        `UserKnownHostsFile=${access.knownHostsFile ?? '/dev/null'}`,
      ];
  return [
    '-F',
    '/dev/null',
    '-i',
    access.keyFile,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    'BatchMode=yes',
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    ...hostKey,
    '-o',
    'ConnectTimeout=30',
    '-o',
    'ServerAliveInterval=15',
    '-o',
    'ServerAliveCountMax=4',
    '-o',
    'LogLevel=ERROR',
  ];
}

/** A word for git-remote-ext, which splits its command at spaces: `%` and space escaped. */
function extWord(word: string): string {
  return word.replace(/%/g, '%%').replace(/ /g, '% ');
}

/**
 * The `ext::` address git is given for `url`: ssh with `sshOptions`, then the remote
 * command git's own ssh transport sends (`git-upload-pack '<path>'`, `%S` being the
 * service git asks for), one word.
 */
export function extTransportUrl(access: SshAccess, url: string): string {
  const remote = parseSshRemote(url);
  const quotedPath = `'${remote.path.replace(/'/g, `'\\''`)}'`;
  const words = [
    'ssh',
    ...sshOptions(access),
    ...(remote.port ? ['-p', remote.port] : []),
    remote.destination,
  ].map(extWord);
  return `ext::${words.join(' ')} %S% ${extWord(quotedPath)}`;
}

/**
 * Why `access` cannot be used, or undefined: the key file (and the known_hosts file,
 * unless insecure) must be readable. Checked before every network step, so a Secret
 * unmounted at run time is named, not reported as a refused connection.
 */
export function sshAccessProblem(access: SshAccess): string | undefined {
  const unreadable = (path: string): string | undefined => {
    try {
      accessSync(path, constants.R_OK);
      return undefined;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code ?? 'unreadable';
    }
  };
  const key = unreadable(access.keyFile);
  if (key) return `cannot read the SSH key file ${access.keyFile} (${access.keyFlag}): ${key}`;
  if (access.insecureIgnoreHostKey) return undefined;
  if (access.knownHostsFile === undefined)
    return `no known_hosts file for SSH remotes: set ${knownHostsFlag} (or, never in production, ${insecureHostKeyFlag})`;
  const hosts = unreadable(access.knownHostsFile);
  if (hosts)
    return `cannot read the known_hosts file ${access.knownHostsFile} (${knownHostsFlag}): ${hosts}`;
  return undefined;
}

/** What went wrong, from ssh's and git's words on stderr. */
export function classifySshGitFailure(stderr: string): SshGitErrorKind {
  if (/REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed/i.test(stderr))
    return 'host-key';
  if (
    /UNPROTECTED PRIVATE KEY FILE|Permission denied \(|Load key .*: |invalid format/i.test(stderr)
  )
    return 'auth';
  if (/\[rejected\]|\[remote rejected\]|non-fast-forward|fetch first|stale info/i.test(stderr))
    return 'rejected';
  if (/couldn't find remote ref|does not appear to be a git repository|not found/i.test(stderr))
    return 'not-found';
  if (
    /Could not resolve hostname|Connection refused|Connection timed out|Connection closed|Connection reset|No route to host|Broken pipe|Timeout/i.test(
      stderr,
    )
  )
    return 'network';
  return 'other';
}

/** The sentence an error leads with, naming the flag to look at. */
function explain(kind: SshGitErrorKind, access: SshAccess): string {
  switch (kind) {
    case 'host-key':
      return access.insecureIgnoreHostKey
        ? 'the server host key was refused'
        : `the server's host key is not the one in ${access.knownHostsFile} (${knownHostsFlag}); refused`;
    case 'auth':
      return `the server refused the SSH key ${access.keyFile} (${access.keyFlag}), or ssh could not use it (an unreadable, malformed or group/world-readable key)`;
    case 'rejected':
      return 'the push was rejected';
    case 'not-found':
      return 'no such repository or ref';
    case 'network':
      return 'the SSH server could not be reached';
    default:
      return 'git over ssh failed';
  }
}

/** The last lines of git's stderr: what it said, short (it never holds the key). */
function lastLines(stderr: string): string {
  return stderr
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !/^@+$/.test(line))
    .slice(-3)
    .join(' / ');
}

/** The environment git and ssh run with: no prompts, no user or system git config. */
export function gitEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
  };
}

/**
 * Settings for the clone isomorphic-git shares: no background maintenance, no files it
 * does not read (commit-graph, reverse indexes); what git fetches stays as packs and
 * loose objects.
 */
const cloneSettings = [
  '-c',
  'gc.auto=0',
  '-c',
  'maintenance.auto=false',
  '-c',
  'fetch.writeCommitGraph=false',
  '-c',
  'pack.writeReverseIndex=false',
  '-c',
  'core.hooksPath=/dev/null',
  // The ext:: transport (extTransportUrl) for these commands alone.
  '-c',
  'protocol.ext.allow=always',
];

/** Runs git; a failure becomes an SshGitError saying what went wrong and which flag to check. */
function runGit(access: SshAccess, what: string, args: readonly string[]): Promise<string> {
  const problem = sshAccessProblem(access);
  if (problem) return Promise.reject(new SshGitError('auth', `${what}: ${problem}`));
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      [...cloneSettings, ...args],
      { env: gitEnv(), encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (!error) return resolve(stdout);
        const kind = classifySshGitFailure(stderr);
        const said = lastLines(stderr) || error.message.split('\n')[0];
        reject(new SshGitError(kind, `${what}: ${explain(kind, access)} (git: ${said})`));
      },
    );
  });
}

/** A ref the remote advertises; `peeled` is the commit an annotated tag points at. */
export interface RemoteRef {
  readonly ref: string;
  readonly oid: string;
  readonly peeled?: string;
}

/** `git ls-remote` of the given refs (all, when none given). */
export async function listRemoteRefs(
  access: SshAccess,
  url: string,
  refs: readonly string[] = [],
): Promise<RemoteRef[]> {
  const out = await runGit(access, `cannot list refs of ${url}`, [
    'ls-remote',
    extTransportUrl(access, url),
    ...refs,
  ]);
  const byRef = new Map<string, { oid: string; peeled?: string }>();
  for (const line of out.split('\n')) {
    const [oid, name] = line.split('\t');
    if (!oid || !name) continue;
    if (name.endsWith('^{}')) {
      const base = byRef.get(name.slice(0, -3));
      if (base) base.peeled = oid;
    } else byRef.set(name, { oid });
  }
  return [...byRef].map(([ref, value]) => ({ ref, ...value }));
}

/**
 * Fetches `ref` (a full ref name) of `url` into the bare clone `gitdir`, no ref of the
 * clone moved (the caller writes its refs); returns the fetched commit (FETCH_HEAD).
 * `depth`: a shallow fetch of that many commits; `deepen`: that many more than the
 * shallow clone holds.
 */
export async function fetchRef(
  access: SshAccess,
  gitdir: string,
  url: string,
  ref: string,
  options: { depth?: number; deepen?: number } = {},
): Promise<string> {
  const shallow =
    options.deepen !== undefined
      ? [`--deepen=${options.deepen}`]
      : options.depth !== undefined
        ? [`--depth=${options.depth}`]
        : [];
  await runGit(access, `cannot fetch ${ref} of ${url}`, [
    '--git-dir',
    gitdir,
    'fetch',
    '--quiet',
    '--no-tags',
    '--no-auto-gc',
    ...shallow,
    extTransportUrl(access, url),
    ref,
  ]);
  const head = fetchedHead(gitdir);
  if (head === undefined)
    throw new SshGitError('other', `fetch of ${ref} from ${url} left no FETCH_HEAD`);
  return head;
}

/** The commit git's last fetch into `gitdir` brought (its FETCH_HEAD); undefined: none. */
export function fetchedHead(gitdir: string): string | undefined {
  const head = readFileSync(join(gitdir, 'FETCH_HEAD'), 'utf8').slice(0, 40);
  return /^[0-9a-f]{40}$/.test(head) ? head : undefined;
}

/** Pushes the clone's `ref` to the same ref of `url` (never forced). */
export async function pushRef(
  access: SshAccess,
  gitdir: string,
  url: string,
  ref: string,
): Promise<void> {
  await runGit(access, `cannot push ${ref} to ${url}`, [
    '--git-dir',
    gitdir,
    'push',
    '--quiet',
    extTransportUrl(access, url),
    `${ref}:${ref}`,
  ]);
}
