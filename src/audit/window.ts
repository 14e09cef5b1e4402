/**
 * The tip's window. Every commit of the audit branch adds one file under
 * `audit/<cluster>/YYYY/MM/DD/HH/` (writer.ts `auditFilePath`), and the history keeps
 * every file ever added: that is the record, and every reader reads it commit by commit
 * (reader.ts). The tip's tree does not need to: it keeps each cluster's hour folders of
 * the last `treeWindowHours` before the file a commit adds, and the commit drops the
 * older ones from its tree. So a shallow fetch (a new cache: a term start on a new pod)
 * receives the files of a bounded window, not of the whole history, and a commit's trees
 * stay as small. `audit verify` allows a commit to drop only folders older than the one
 * it adds to.
 */

/** Hours of each cluster's folders the tip's tree keeps, before the newest file's hour. */
export const defaultTreeWindowHours = 24;

/** Depth of the year folders in an audit path (`audit/<cluster>/YYYY`): pruning starts there. */
export const yearDepth = 2;

const hourFolder = /^audit\/([^/]+)\/(\d{4})\/(\d{2})\/(\d{2})\/(\d{2})\//;

/** The hour folder of an audit file's path, as path segments, or undefined for another path. */
export function hourFolderOf(path: string): string[] | undefined {
  const match = hourFolder.exec(path);
  return match ? ['audit', ...match.slice(1)] : undefined;
}

/** `audit/<cluster>/YYYY/MM/DD/HH` of a path (undefined for another path): it sorts as time. */
export function hourKey(path: string): string | undefined {
  return hourFolderOf(path)?.join('/');
}

const pad = (value: number): string => String(value).padStart(2, '0');

/**
 * The oldest hour folder the tip keeps once `path` is added, `hours` before the path's
 * own hour; undefined when the path is not an audit file's, or `hours` is 0 (keep all).
 */
export function windowCutoff(path: string, hours: number): string[] | undefined {
  const folder = hourFolderOf(path);
  if (folder === undefined || hours <= 0) return undefined;
  const [, cluster, year, month, day, hour] = folder.map((part, index) =>
    index < 2 ? part : Number(part),
  ) as [string, string, number, number, number, number];
  const cutoff = new Date(Date.UTC(year, month - 1, day, hour) - hours * 3_600_000);
  return [
    'audit',
    cluster,
    String(cutoff.getUTCFullYear()),
    pad(cutoff.getUTCMonth() + 1),
    pad(cutoff.getUTCDate()),
    pad(cutoff.getUTCHours()),
  ];
}
