/**
 * Structured JSON logs (pino). Secrets never reach a log line: fields that commonly
 * carry them are redacted, and URLs are stripped of credentials by `redactUrl`.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino({
    name: options.name ?? 'tollgate',
    level: options.level ?? process.env.TOLLGATE_LOG_LEVEL ?? 'info',
    redact: {
      paths: [
        'token',
        'password',
        'authorization',
        '*.token',
        '*.password',
        '*.authorization',
        'headers.authorization',
      ],
      censor: '[redacted]',
    },
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

/** A silent logger for tests. */
export const silentLogger: Logger = pino({ level: 'silent' });

/** Removes user info from a URL so it can be printed. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username || parsed.password) {
      parsed.username = '';
      parsed.password = '';
    }
    return parsed.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//');
  }
}
