/**
 * The last good policy, saved on disk (the Git cache, /var/cache/tollgate) so a restarted
 * tollgate whose Git server is down, or whose branch holds no valid commit it can reach,
 * starts from what it ran before instead of crash-looping.
 *
 * What is saved: the location it came from, the commit id, the policy files as they were
 * validated, and when each Approval file was merged (its Git commit time: the clone may
 * be gone or unreachable at the next start). A SHA-256 over all of it, bound to the commit
 * id, is checked on reading: a file edited, truncated or copied from another location is
 * refused with the reason, never used. The files are validated and compiled again on use,
 * like any commit.
 *
 * Pure encoding and checking here; the policy source (source.ts) reads and writes the file.
 */
import { createHash } from 'node:crypto';
import type { PolicyFile } from './load.ts';

/** What a saved policy holds once checked. */
export interface SavedPolicy {
  readonly location: string;
  readonly commit: string;
  readonly files: readonly PolicyFile[];
  /** Approval file -> when it was merged (ms since the epoch). */
  readonly approvalsMergedAt: Readonly<Record<string, number>>;
}

const format = 'tollgate.io/last-good-policy/v1';

/** The digest over everything saved, bound to the commit id and the location. */
function digestOf(saved: SavedPolicy): string {
  const hash = createHash('sha256');
  hash.update(`${format}\u0000${saved.location}\u0000${saved.commit}\u0000`);
  for (const file of [...saved.files].sort((a, b) => (a.path < b.path ? -1 : 1)))
    hash.update(`${file.path}\u0000${Buffer.byteLength(file.content)}\u0000${file.content}`);
  for (const file of Object.keys(saved.approvalsMergedAt).sort())
    hash.update(`\u0000${file}\u0000${saved.approvalsMergedAt[file]}`);
  return `sha256:${hash.digest('hex')}`;
}

/** The saved policy as the file's text. */
export function encodeSavedPolicy(saved: SavedPolicy): string {
  return `${JSON.stringify({ format, ...saved, digest: digestOf(saved) })}\n`;
}

/**
 * The saved policy, when the text is one for `location` and its digest holds; otherwise
 * why it is refused.
 */
export function decodeSavedPolicy(
  text: string,
  location: string,
): SavedPolicy | { readonly problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { problem: 'not JSON (a truncated or foreign file)' };
  }
  const shape = savedShape(raw);
  if ('problem' in shape) return shape;
  if (shape.saved.location !== location)
    return { problem: `saved from ${shape.saved.location}, not ${location}` };
  if (digestOf(shape.saved) !== shape.digest)
    return {
      problem: `its digest does not match its content (commit ${shape.saved.commit.slice(0, 12)}): edited or corrupt`,
    };
  return shape.saved;
}

function savedShape(
  raw: unknown,
): { saved: SavedPolicy; digest: string } | { readonly problem: string } {
  if (typeof raw !== 'object' || raw === null) return { problem: 'not a saved policy' };
  const r = raw as Record<string, unknown>;
  if (r.format !== format) return { problem: `format ${String(r.format)}, not ${format}` };
  const files = r.files;
  const times = r.approvalsMergedAt;
  if (
    typeof r.location !== 'string' ||
    typeof r.commit !== 'string' ||
    typeof r.digest !== 'string' ||
    !Array.isArray(files) ||
    !files.every(isPolicyFile) ||
    typeof times !== 'object' ||
    times === null ||
    !Object.values(times).every((t) => typeof t === 'number')
  )
    return { problem: 'a field is missing or of the wrong type' };
  return {
    saved: {
      location: r.location,
      commit: r.commit,
      files: files.map((f) => ({ path: f.path, content: f.content })),
      approvalsMergedAt: times as Record<string, number>,
    },
    digest: r.digest,
  };
}

function isPolicyFile(value: unknown): value is PolicyFile {
  if (typeof value !== 'object' || value === null) return false;
  const f = value as Record<string, unknown>;
  return typeof f.path === 'string' && typeof f.content === 'string';
}
