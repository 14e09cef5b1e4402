/**
 * Policy YAML is parsed in a worker thread, so a poll never holds the process's event
 * loop: leader-lease renewal, the informers and /healthz keep running while a large or
 * hostile commit is read. The counted limits of `parse.ts` bound the worker's work; a
 * deadline bounds its time as a backstop. A worker past the deadline is terminated and
 * the parse reported as `ParseTimeout`, which the policy source treats as transient
 * (the commit is tried again on the next poll, not marked bad: a loaded machine must
 * not turn a good commit into a rejected one).
 */
import { Worker } from 'node:worker_threads';
import { systemTimers, type Timers } from '../lib/timers.ts';
import type { PolicyError } from './errors.ts';
import type { ParsedDocument } from './parse.ts';

export interface ParseJob {
  readonly files: readonly { readonly path: string; readonly content: string }[];
}

export interface ParseJobResult {
  documents: ParsedDocument[];
  errors: PolicyError[];
  /** YAML tokens read over all files. */
  tokens: number;
}

export class ParseTimeout extends Error {
  constructor(timeoutMs: number, files: number) {
    super(`parsing ${files} policy files did not finish within ${timeoutMs} ms; stopped`);
    this.name = 'ParseTimeout';
  }
}

export interface OffThreadOptions {
  /** Default 20 s: far beyond what the counted limits allow on a loaded machine. */
  readonly timeoutMs?: number;
  readonly timers?: Timers;
}

/** The worker's module beside this one: TypeScript in a checkout, JavaScript in the image (scripts/compile-js.sh). */
const workerUrl = new URL(
  import.meta.url.endsWith('.js') ? './parse-worker.js' : './parse-worker.ts',
  import.meta.url,
);

/** Parses `files` in a fresh worker thread; rejects with `ParseTimeout` past the deadline. */
export function parseFilesOffThread(
  job: ParseJob,
  options: OffThreadOptions = {},
): Promise<ParseJobResult> {
  const timers = options.timers ?? systemTimers;
  const timeoutMs = options.timeoutMs ?? 20_000;
  return new Promise((resolve, reject) => {
    const worker = new Worker(workerUrl, { workerData: job });
    let settled = false;
    const settle = (finish: () => void) => {
      if (settled) return;
      settled = true;
      timers.clear(deadline);
      finish();
      void worker.terminate();
    };
    const deadline = timers.set(
      () => settle(() => reject(new ParseTimeout(timeoutMs, job.files.length))),
      timeoutMs,
    );
    worker.once('message', (result: ParseJobResult) => settle(() => resolve(result)));
    worker.once('error', (error) => settle(() => reject(error)));
    worker.once('exit', (code) =>
      settle(() => reject(new Error(`policy parse worker exited with code ${code}`))),
    );
  });
}
