/**
 * What the security e2e files share: the example policy as files, and a real Git server
 * plus temporary folders that live for one test file.
 */
import { after, before } from 'node:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { startGitServer, type GitServer } from '../../support/git-server.ts';

const examplesDir = resolve(import.meta.dirname, '../../../policy-examples');

/** policy-examples/ as `path -> content`. */
export function exampleFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else files[relative(examplesDir, full)] = readFileSync(full, 'utf8');
    }
  };
  walk(examplesDir);
  return files;
}

/** Registers before/after hooks: a Git server and temp folders, removed after the file. */
export function gitServerForFile(prefix: string): {
  server: () => GitServer;
  tempDir: () => string;
} {
  let server: GitServer | undefined;
  const dirs: string[] = [];
  before(async () => {
    server = await startGitServer();
  });
  after(async () => {
    await server?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    server: () => {
      if (!server) throw new Error('the Git server starts in before()');
      return server;
    },
    tempDir: () => {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
  };
}
