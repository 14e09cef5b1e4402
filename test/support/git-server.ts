/**
 * A real Git server over HTTP for tests: git's own `git http-backend` (smart HTTP,
 * fetch and push) behind a small Node HTTP server that checks a token, so
 * authentication is exercised the way a forge does it (Basic auth with the token as
 * password, or a Bearer header). Repositories are bare repos under a temp folder.
 */
import { spawn, execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, mkdirSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';

export interface GitServer {
  /** Base URL, e.g. http://127.0.0.1:PORT; a repo is at `${url}/${name}.git`. */
  readonly url: string;
  readonly root: string;
  /** The one token the server accepts right now (see `rotateToken`). */
  readonly token: string;
  /** From now on only `next` is accepted: the previous token is refused (a rotated Secret). */
  rotateToken(next: string): void;
  /**
   * While set, every push (git-receive-pack) is answered with this HTTP status before
   * reaching git: a Git host refusing writes for a while. `undefined` lets pushes through.
   */
  refusePushes(status: number | undefined): void;
  /** Pushes refused by `refusePushes` so far. */
  readonly refusedPushes: number;
  /** Creates an empty bare repo and returns its URL. */
  createRepo(name: string): string;
  /** The server's process when it runs in one of its own (git-server-process.ts), for CPU figures. */
  readonly pid?: number;
  /** Number of requests answered 401 so far (tests assert bad tokens were refused). */
  readonly unauthorized: number;
  /** Every authorized request so far, as `METHOD /path?query` (tests count round trips). */
  readonly requests: readonly string[];
  close(): Promise<void>;
}

const run = promisify(execFile);

const backend = (() => {
  const execPath = execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim();
  return join(execPath, 'git-http-backend');
})();

/**
 * The Git server of a whole test file: started before its first test, closed after its
 * last. What it returns stands for that server (each property read reaches the one
 * started), so a file writes `const server = gitServerPerFile();` and uses it in tests.
 */
export function gitServerPerFile(): GitServer {
  let started: GitServer | undefined;
  before(async () => {
    started = await startGitServer();
  });
  after(async () => {
    await started?.close();
  });
  return new Proxy({} as GitServer, {
    get(_, key) {
      if (!started) throw new Error('the Git server starts before the first test, not before');
      const value: unknown = Reflect.get(started, key);
      return typeof value === 'function' ? value.bind(started) : value;
    },
  });
}

export async function startGitServer(options: { token?: string } = {}): Promise<GitServer> {
  let token = options.token ?? `tg-test-${Math.random().toString(36).slice(2)}`;
  const root = mkdtempSync(join(tmpdir(), 'tollgate-git-'));
  let unauthorized = 0;
  let pushRefusal: number | undefined;
  let refusedPushes = 0;
  const requests: string[] = [];

  const authorized = (request: IncomingMessage): boolean => {
    const header = request.headers.authorization ?? '';
    if (header.startsWith('Bearer ')) return header.slice(7) === token;
    if (header.startsWith('Basic ')) {
      const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
      const password = decoded.slice(decoded.indexOf(':') + 1);
      return password === token || decoded.slice(0, decoded.indexOf(':')) === token;
    }
    return false;
  };

  const handle = (request: IncomingMessage, response: ServerResponse): void => {
    if (!authorized(request)) {
      unauthorized += 1;
      response.writeHead(401, { 'WWW-Authenticate': 'Basic realm="tollgate-test"' });
      response.end('unauthorized\n');
      return;
    }
    const url = new URL(request.url ?? '/', 'http://localhost');
    requests.push(`${request.method ?? 'GET'} ${url.pathname}${url.search}`);
    if (pushRefusal !== undefined && url.pathname.endsWith('/git-receive-pack')) {
      refusedPushes += 1;
      request.resume();
      response.writeHead(pushRefusal);
      response.end('pushes refused for now\n');
      return;
    }
    const child = spawn(backend, [], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: request.method ?? 'GET',
        CONTENT_TYPE: request.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: String(request.headers['content-encoding'] ?? ''),
        GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
        REMOTE_USER: 'tollgate-test',
        REMOTE_ADDR: request.socket.remoteAddress ?? '127.0.0.1',
      },
    });
    request.pipe(child.stdin);
    let headerDone = false;
    let buffered = Buffer.alloc(0);
    child.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        response.write(chunk);
        return;
      }
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      headerDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of buffered.subarray(0, end).toString('utf8').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      response.writeHead(status, headers);
      response.write(buffered.subarray(end + 4));
    });
    child.stdout.on('end', () => response.end());
    child.on('error', (error) => {
      if (!response.headersSent) response.writeHead(500);
      response.end(String(error));
    });
  };

  const server: Server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    root,
    get token() {
      return token;
    },
    get requests() {
      return requests;
    },
    rotateToken(next: string): void {
      token = next;
    },
    refusePushes(status: number | undefined): void {
      pushRefusal = status;
    },
    get refusedPushes() {
      return refusedPushes;
    },
    get unauthorized() {
      return unauthorized;
    },
    createRepo(name: string): string {
      createBareRepo(root, name);
      return `${url}/${name}.git`;
    },
    async close(): Promise<void> {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Creates `<root>/<name>.git`, a bare repository taking pushes over HTTP, unless it exists. */
export function createBareRepo(root: string, name: string): void {
  const dir = join(root, `${name}.git`);
  if (existsSync(dir)) return;
  mkdirSync(dir, { recursive: true });
  execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', dir]);
  execFileSync('git', ['-C', dir, 'config', 'http.receivepack', 'true']);
}

/** Pushes files as one commit to a repo on the server, with the real git CLI (async: the server may run in this process). */
export async function pushTree(
  server: GitServer,
  repoUrl: string,
  files: Readonly<Record<string, string | null>>,
  options: { message?: string; branch?: string; replace?: boolean } = {},
): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'tollgate-push-'));
  const authed = repoUrl.replace('http://', `http://x:${server.token}@`);
  const git = async (...args: string[]): Promise<string> =>
    (
      await run(
        'git',
        ['-C', work, '-c', 'user.name=test', '-c', 'user.email=test@example.com', ...args],
        {
          encoding: 'utf8',
        },
      )
    ).stdout;
  const branch = options.branch ?? 'main';
  try {
    await git('init', '--quiet', `--initial-branch=${branch}`);
    await git('remote', 'add', 'origin', authed);
    const remoteHas = (await git('ls-remote', 'origin', `refs/heads/${branch}`)).trim() !== '';
    if (remoteHas) {
      await git('fetch', '--quiet', 'origin', branch);
      await git('checkout', '--quiet', '-B', branch, `origin/${branch}`);
      if (options.replace) await git('rm', '-r', '--quiet', '--ignore-unmatch', '.');
    }
    for (const [path, content] of Object.entries(files)) {
      const full = join(work, path);
      if (content === null) {
        rmSync(full, { force: true });
        continue;
      }
      mkdirSync(dirname(full), { recursive: true });
      writeFileSync(full, content);
    }
    await git('add', '-A');
    await git('commit', '--quiet', '--allow-empty', '-m', options.message ?? 'test commit');
    await git('push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`);
    return (await git('rev-parse', 'HEAD')).trim();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
