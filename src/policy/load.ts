/**
 * Loads a policy repository from files: a folder on disk, or files already read (the
 * Git source reads blobs straight from the object store). Never throws for bad input:
 * every problem, from an oversized file to a dangling reference, comes back as a
 * PolicyError. I/O errors (a folder that does not exist) are reported as errors too,
 * on the pseudo-file "." so callers can tell them apart only if they need to.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { compilePolicy, type PolicyResult } from './compile.ts';
import type { PolicyError } from './errors.ts';
import { locateErrors } from './locate.ts';
import { limits, parsePolicyFile, type ParsedDocument } from './parse.ts';
import { parseFilesOffThread, type OffThreadOptions } from './parse-off-thread.ts';

export type { PolicyResult } from './compile.ts';
export type { PolicyError } from './errors.ts';

export interface PolicyFile {
  /** Path inside the policy folder, with `/` separators. */
  readonly path: string;
  readonly content: string;
}

export function isPolicyFile(path: string): boolean {
  return /\.ya?ml$/i.test(path);
}

/** A stable hash of the files, used as the "commit" of a plain folder. */
export function contentHash(files: readonly PolicyFile[]): string {
  const hash = createHash('sha256');
  for (const f of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    hash.update(`${f.path}\u0000${Buffer.byteLength(f.content)}\u0000${f.content}`);
  }
  return `sha256:${hash.digest('hex')}`;
}

/** Parses, validates and compiles files already in memory (sizes already capped by the reader). */
export function loadPolicyFromFiles(
  files: readonly PolicyFile[],
  options: { commit?: string } = {},
): PolicyResult {
  const errors: PolicyError[] = [];
  const documents: ParsedDocument[] = [];
  for (const file of files) {
    if (!isPolicyFile(file.path)) continue;
    const parsed = parsePolicyFile(file.path, file.content);
    errors.push(...parsed.errors);
    documents.push(...parsed.documents);
  }
  return compileParsed(files, documents, errors, options);
}

/**
 * `loadPolicyFromFiles` with the YAML parsing in a worker thread (see
 * `parse-off-thread.ts`); what a long-running process uses so a poll never blocks its
 * event loop. Rejects with `ParseTimeout` when the worker passes its deadline.
 */
export async function loadPolicyFromFilesOffThread(
  files: readonly PolicyFile[],
  options: { commit?: string } & OffThreadOptions = {},
): Promise<PolicyResult> {
  const parsed = await parseFilesOffThread(
    { files: files.filter((f) => isPolicyFile(f.path)) },
    options,
  );
  return compileParsed(files, parsed.documents, parsed.errors, options);
}

function compileParsed(
  files: readonly PolicyFile[],
  documents: readonly ParsedDocument[],
  errors: readonly PolicyError[],
  options: { commit?: string },
): PolicyResult {
  const compiled = compilePolicy(documents, options.commit ?? contentHash(files));
  if (errors.length === 0 && compiled.ok) return compiled;
  const all = [...errors, ...(compiled.ok ? [] : compiled.errors)];
  return { ok: false, errors: locateErrors(all, files) };
}

/**
 * Reads the policy files (*.yaml, *.yml) under `dir`, skipping dot-folders such as
 * `.git`. Symbolic links are refused: a link could point outside the repository.
 * Sizes are checked from `lstat` before a byte is read, so a 20 MB file costs nothing.
 */
export async function readPolicyDirectory(
  dir: string,
): Promise<{ files: PolicyFile[]; errors: PolicyError[] }> {
  const files: PolicyFile[] = [];
  const errors: PolicyError[] = [];
  let totalBytes = 0;
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop() as string;
    let entries;
    try {
      entries = await readdir(current, { withFileTypes: true });
    } catch (error) {
      errors.push({
        file: relative(dir, current).split(sep).join('/') || '.',
        path: '',
        message: `cannot read folder: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      });
      continue;
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const full = join(current, entry.name);
      const path = relative(dir, full).split(sep).join('/');
      if (entry.name.startsWith('.')) continue;
      if (entry.isDirectory()) {
        pending.push(full);
        continue;
      }
      if (!isPolicyFile(entry.name)) continue;
      if (entry.isSymbolicLink()) {
        errors.push({
          file: path,
          path: '',
          message: 'symbolic links are not followed in a policy folder',
        });
        continue;
      }
      if (!entry.isFile()) continue;
      if (files.length >= limits.maxFiles) {
        errors.push({
          file: path,
          path: '',
          message: `more than ${limits.maxFiles} policy files in the repository`,
        });
        return { files: [], errors };
      }
      const { size } = await lstat(full);
      if (size > limits.maxFileBytes) {
        errors.push({
          file: path,
          path: '',
          message: `file is ${size} bytes, over the ${limits.maxFileBytes} byte limit`,
        });
        continue;
      }
      totalBytes += size;
      if (totalBytes > limits.maxRepoBytes) {
        errors.push({
          file: path,
          path: '',
          message: `policy files exceed ${limits.maxRepoBytes} bytes in total`,
        });
        return { files: [], errors };
      }
      files.push({ path, content: await readFile(full, 'utf8') });
    }
  }
  return { files, errors };
}

/** Loads and compiles the policy under `dir`; `commit` defaults to a content hash. */
export async function loadPolicyFromDirectory(
  dir: string,
  options: { commit?: string } = {},
): Promise<PolicyResult> {
  let read;
  try {
    read = await readPolicyDirectory(dir);
  } catch (error) {
    return {
      ok: false,
      errors: [{ file: '.', path: '', message: `cannot read ${dir}: ${(error as Error).message}` }],
    };
  }
  const result = loadPolicyFromFiles(read.files, options);
  if (read.errors.length === 0) return result;
  return { ok: false, errors: [...read.errors, ...(result.ok ? [] : result.errors)] };
}
