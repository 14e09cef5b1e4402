/**
 * The isomorphic-git HTTP client, with one repair for fetching from a repository
 * whose HEAD is unborn (a separate audit repo that only ever had `tollgate/audit`,
 * while HEAD still names `main`). isomorphic-git's fetch (1.44) then fails with
 * "Could not find HEAD" while computing the remote's default branch, and it has
 * already moved the remote-tracking ref to a commit whose objects it never stored.
 *
 * The repair: in the upload-pack ref advertisement, when no HEAD line is present,
 * add one pointing at the audit branch's commit, so the default-branch lookup
 * succeeds. Nothing else in the response changes; pushes are not touched. The
 * writer also restores the tracking ref when a fetch fails, in case another failure
 * of the same kind appears.
 */
import http from 'isomorphic-git/http/node';
import type { GitHttpRequest, GitHttpResponse, HttpClient } from 'isomorphic-git';

export function pktLine(text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  return Buffer.concat([
    Buffer.from((body.length + 4).toString(16).padStart(4, '0'), 'utf8'),
    body,
  ]);
}

/** Splits a pkt-line stream into raw packets (flush packets kept as "0000"). */
export function packets(buffer: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let offset = 0;
  while (offset + 4 <= buffer.length) {
    const length = Number.parseInt(buffer.subarray(offset, offset + 4).toString('utf8'), 16);
    const size = length === 0 ? 4 : length;
    if (!Number.isFinite(size) || size < 4 || offset + size > buffer.length) return [];
    out.push(buffer.subarray(offset, offset + size));
    offset += size;
  }
  return offset === buffer.length ? out : [];
}

export function withUnbornHeadRepair(branch: string): HttpClient {
  const fullRef = `refs/heads/${branch}`;
  return {
    async request(request: GitHttpRequest): Promise<GitHttpResponse> {
      const response = await http.request(request);
      if (
        request.method !== 'GET' ||
        !request.url.includes('info/refs?service=git-upload-pack') ||
        response.statusCode !== 200
      ) {
        return response;
      }
      const chunks: Uint8Array[] = [];
      for await (const chunk of response.body ?? []) chunks.push(chunk);
      const raw = Buffer.concat(chunks);
      const list = packets(raw);
      const text = list.map((packet) => packet.subarray(4).toString('utf8'));
      const hasHead = text.some((line) => line.split('\u0000')[0]?.trim().endsWith(' HEAD'));
      const branchLine = text.find((line) =>
        line.split('\u0000')[0]?.trim().endsWith(` ${fullRef}`),
      );
      let body = raw;
      const firstRefIndex = text.findIndex((line) => line.includes('\u0000'));
      if (!hasHead && branchLine && firstRefIndex >= 0) {
        const oid = branchLine.slice(0, 40);
        body = Buffer.concat([
          ...list.slice(0, firstRefIndex + 1),
          pktLine(`${oid} HEAD\n`),
          ...list.slice(firstRefIndex + 1),
        ]);
      }
      return {
        ...response,
        body: (async function* () {
          yield new Uint8Array(body);
        })(),
      };
    },
  };
}
