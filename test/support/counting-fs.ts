/** node:fs for isomorphic-git, counting every read of a git object (it tries the loose file first, packed or not). */
import * as fs from 'node:fs';
import type { FsClient } from 'isomorphic-git';

export interface CountingFs {
  readonly fs: FsClient;
  /** Git objects read so far. */
  objectReads(): number;
}

export function countingFs(): CountingFs {
  let reads = 0;
  const promises = {
    ...fs.promises,
    readFile: ((path: fs.PathLike, options?: unknown) => {
      if (/\/objects\/[0-9a-f]{2}\/[0-9a-f]{38}$/.test(String(path))) reads += 1;
      return fs.promises.readFile(path, options as undefined);
    }) as typeof fs.promises.readFile,
  };
  return { fs: { promises }, objectReads: () => reads };
}
