/**
 * What build of tollgate is running: the package version, the source revision (written
 * into build-info.json by scripts/build-image.sh; "unknown" when running from a
 * checkout) and the Node.js version. Read by `tollgate version` and exported as the
 * metric tollgate_build_info.
 */
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  readonly version: string;
  readonly revision: string;
  readonly node: string;
}

const root = new URL('../../', import.meta.url);

function readJson(name: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(new URL(name, root), 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

let cached: BuildInfo | undefined;
export function buildInfo(): BuildInfo {
  if (!cached) {
    const stamped = readJson('build-info.json');
    cached = {
      version: String(readJson('package.json')?.version ?? 'unknown'),
      revision: typeof stamped?.revision === 'string' ? stamped.revision : 'unknown',
      node: process.version,
    };
  }
  return cached;
}
