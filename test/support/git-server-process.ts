/**
 * The test Git server (git-server.ts) in a process of its own, for benchmarks: each
 * request spawns `git http-backend`, and spawning from the process that runs tollgate's
 * loop blocks that event loop for every push (4.7% of a 1,000-pod strict run's CPU
 * profile), a cost no deployment pays (its Git host is elsewhere). Same server, same
 * token check; the repositories live in a folder both processes see, so `createRepo`
 * runs here. Rotating the token and refusing pushes are for tests, which run the server
 * in their own process: here they throw.
 *
 * Run as a script, it starts the server and prints `{url, root, token}` as one JSON line.
 */
import { fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createBareRepo, startGitServer, type GitServer } from './git-server.ts';

const self = fileURLToPath(import.meta.url);

export async function startGitServerProcess(): Promise<GitServer> {
  const child = fork(self, ['--serve'], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const lines = createInterface({ input: child.stdout! });
  const started = await new Promise<{ url: string; root: string; token: string }>(
    (resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`git server process exited (${code})`)));
      lines.once('line', (line) => resolve(JSON.parse(line) as never));
    },
  );
  const { url, root, token } = started;
  const testOnly = (what: string): never => {
    throw new Error(`${what}: not available when the Git server runs in its own process`);
  };
  return {
    url,
    root,
    token,
    pid: child.pid,
    rotateToken: () => testOnly('rotateToken'),
    refusePushes: () => testOnly('refusePushes'),
    get refusedPushes(): number {
      return testOnly('refusedPushes');
    },
    get unauthorized(): number {
      return testOnly('unauthorized');
    },
    get requests(): readonly string[] {
      return testOnly('requests');
    },
    createRepo(name: string): string {
      createBareRepo(root, name);
      return `${url}/${name}.git`;
    },
    async close(): Promise<void> {
      child.removeAllListeners('exit');
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
      rmSync(root, { recursive: true, force: true });
    },
  };
}

if (process.argv[1] === self && process.argv.includes('--serve')) {
  const server = await startGitServer();
  process.stdout.write(
    `${JSON.stringify({ url: server.url, root: server.root, token: server.token })}\n`,
  );
  process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
  process.once('disconnect', () => void server.close().then(() => process.exit(0)));
}
