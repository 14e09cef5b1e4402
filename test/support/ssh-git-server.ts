/**
 * A real Git server over SSH for tests: an SSH server (the ssh2 package) on a loopback
 * port that accepts only the deploy keys it was told about (public key authentication,
 * signatures verified) and runs the real `git-upload-pack` / `git-receive-pack` on bare
 * repositories under its root, as a forge's SSH endpoint does. Its host key and the
 * test's deploy keys are made by the real `ssh-keygen`; `knownHostsLine` is what an
 * operator puts in tollgate's known_hosts file.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import ssh2 from 'ssh2';

const { Server, utils } = ssh2;

export interface SshKeyPair {
  /** The private key file (mode 0600, as ssh requires of a key its user owns). */
  readonly privateFile: string;
  /** The public key line (`ssh-ed25519 AAAA... comment`). */
  readonly publicKey: string;
}

/** A new ed25519 key pair made by `ssh-keygen` in `dir`. */
export function makeSshKey(dir: string, name: string): SshKeyPair {
  const privateFile = join(dir, name);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', privateFile]);
  return { privateFile, publicKey: readFileSync(`${privateFile}.pub`, 'utf8').trim() };
}

export interface SshGitServer {
  readonly port: number;
  /** `ssh://git@127.0.0.1:<port>/<name>.git` for a new empty bare repository. */
  createRepo(name: string): string;
  /** The bare repository behind a URL this server made. */
  repoPath(url: string): string;
  /** The known_hosts line for this server's host key (`[127.0.0.1]:<port> ssh-ed25519 ...`). */
  readonly knownHostsLine: string;
  /** Authentications refused (a key not allowed, or a bad signature). */
  readonly refusedAuth: number;
  /** `git-receive-pack` runs (pushes) and `git-upload-pack` runs (fetches, ls-remote). */
  readonly receivePacks: number;
  readonly uploadPacks: number;
  close(): Promise<void>;
}

/** Starts the server; `allowedKeys`: public key lines accepted (deploy keys). */
export async function startSshGitServer(options: {
  allowedKeys: readonly string[];
}): Promise<SshGitServer> {
  const root = mkdtempSync(join(tmpdir(), 'tollgate-ssh-git-'));
  const hostKey = makeSshKey(root, 'host_key');
  const allowed = options.allowedKeys.map((line) => {
    const parsed = utils.parseKey(line);
    if (parsed instanceof Error) throw parsed;
    return parsed;
  });
  const counts = { refusedAuth: 0, receivePacks: 0, uploadPacks: 0 };
  const server = new Server({ hostKeys: [readFileSync(hostKey.privateFile)] }, (client) => {
    client.on('authentication', (ctx) => {
      const key =
        ctx.method === 'publickey'
          ? allowed.find((k) => k.type === ctx.key.algo && k.getPublicSSH().equals(ctx.key.data))
          : undefined;
      if (ctx.method !== 'publickey' || !key) {
        if (ctx.method === 'publickey') counts.refusedAuth += 1;
        return ctx.reject(['publickey']);
      }
      if (!ctx.signature) return ctx.accept(); // the client asks whether the key would do
      if (ctx.blob && key.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true)
        return ctx.accept();
      counts.refusedAuth += 1;
      return ctx.reject(['publickey']);
    });
    client.on('ready', () =>
      client.on('session', (accept) => {
        const session = accept();
        session.on('exec', (acceptExec, rejectExec, info) => {
          const match = /^(git-upload-pack|git-receive-pack) '?\/?([^']+?)'?$/.exec(info.command);
          const repo = match ? resolve(root, match[2] as string) : undefined;
          if (!match || !repo || !repo.startsWith(root + sep)) return rejectExec();
          const command = match[1] as 'git-upload-pack' | 'git-receive-pack';
          counts[command === 'git-upload-pack' ? 'uploadPacks' : 'receivePacks'] += 1;
          const stream = acceptExec();
          const child = spawn(command, [repo]);
          stream.pipe(child.stdin);
          child.stdout.pipe(stream, { end: false });
          child.stderr.pipe(stream.stderr, { end: false });
          child.stdin.on('error', () => undefined);
          child.on('close', (code) => {
            stream.exit(code ?? 1);
            stream.end();
          });
        });
      }),
    );
    client.on('error', () => undefined);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as AddressInfo).port;
  const hostPublic = hostKey.publicKey.split(' ').slice(0, 2).join(' ');
  return {
    port,
    knownHostsLine: `[127.0.0.1]:${port} ${hostPublic}`,
    createRepo(name) {
      const path = join(root, `${name}.git`);
      mkdirSync(path, { recursive: true });
      execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', path]);
      return `ssh://git@127.0.0.1:${port}/${name}.git`;
    },
    repoPath(url) {
      return join(root, new URL(url).pathname);
    },
    get refusedAuth() {
      return counts.refusedAuth;
    },
    get receivePacks() {
      return counts.receivePacks;
    },
    get uploadPacks() {
      return counts.uploadPacks;
    },
    close: () =>
      new Promise<void>((done) =>
        server.close(() => {
          rmSync(root, { recursive: true, force: true });
          done();
        }),
      ),
  };
}

/** Commits `files` (path -> content) on `branch` of a bare repository, by the git CLI. */
export function commitFiles(
  bareRepo: string,
  files: Record<string, string>,
  options: { branch?: string; message?: string } = {},
): string {
  const work = mkdtempSync(join(tmpdir(), 'tollgate-ssh-commit-'));
  const git = (...args: string[]): string =>
    execFileSync('git', ['-C', work, ...args], {
      encoding: 'utf8',
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 'policy author',
        GIT_AUTHOR_EMAIL: 'author@example.invalid',
        GIT_COMMITTER_NAME: 'policy author',
        GIT_COMMITTER_EMAIL: 'author@example.invalid',
      },
    }).trim();
  try {
    git('init', '--quiet', '--initial-branch', options.branch ?? 'main');
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(join(work, path, '..'), { recursive: true });
      writeFileSync(join(work, path), content);
    }
    git('add', '-A');
    git('commit', '--quiet', '-m', options.message ?? 'policy');
    git('push', '--quiet', '--force', bareRepo, `HEAD:refs/heads/${options.branch ?? 'main'}`);
    return git('rev-parse', 'HEAD');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
