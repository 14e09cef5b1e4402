/**
 * Where tollgate's Git credentials may go. The operator decides (run configuration);
 * nothing a policy author writes can send a token elsewhere. Two rules live here:
 *
 * - plain `http://` carries no credential, except to a loopback host (the traffic never
 *   leaves the machine) or when the operator sets `--allow-insecure-http`;
 * - a token file is read again at every authentication, so a rotated Secret (the
 *   kubelet swaps the mounted file) is used from the next request on, no restart.
 */
import { readFileSync } from 'node:fs';
import { redactUrl } from '../observe/log.ts';

/** A token, or a function that reads the current one (a mounted Secret file). */
export type TokenSource = string | (() => string | undefined);

export function currentToken(source: TokenSource | undefined): string | undefined {
  return typeof source === 'function' ? source() : source;
}

/** True for URLs whose host is loopback: 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackUrl(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '[::1]' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
  );
}

/**
 * Why a credential must not be sent to `url`, or undefined when it may: refused for
 * `http://` to a non-loopback host unless `allowInsecureHttp`.
 */
export function plainHttpProblem(url: string, allowInsecureHttp: boolean): string | undefined {
  if (allowInsecureHttp || !/^http:\/\//i.test(url) || isLoopbackUrl(url)) return undefined;
  return `refusing to send a Git credential over plain http to ${redactUrl(url)}; use https, or set --allow-insecure-http`;
}

/**
 * A token read from `path` at every call, trailing whitespace removed. An unreadable
 * or empty file throws (a Secret mounted without its key is an error, not anonymous
 * access); the message names the file, never its content.
 */
export function tokenFromFile(path: string): () => string {
  return () => {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new Error(
        `cannot read the Git token file ${path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
        { cause: error },
      );
    }
    const token = text.trim();
    if (!token) throw new Error(`the Git token file ${path} is empty`);
    return token;
  };
}
