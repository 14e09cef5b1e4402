/**
 * A push over git's smart HTTP protocol (receive-pack, protocol v1) of a pack the caller
 * built, with a known base. The audit writer knows exactly what a push must send: its
 * unpushed commits sit directly on the remote tip it fetched, and each adds one file, so
 * the objects are each commit, the trees along its file's path and the file's blob.
 * isomorphic-git's push instead works them out itself: a merge-base search that walks
 * from the remote tip to the root, and two walks of the whole tree (every hour folder
 * ever written), so its cost grows with the history. Here a push costs what it sends.
 *
 * The server still checks everything: the ref moves only if it still points at `old`
 * (another writer who pushed first makes it refuse), and it checks the pack connects.
 */
import { Errors, type HttpClient } from 'isomorphic-git';
import { packets, pktLine } from './http.ts';

const zeroOid = '0'.repeat(40);

export interface ReceivePackTarget {
  readonly http: HttpClient;
  /** The repository URL, without credentials. */
  readonly url: string;
  /** Authorization, when the server needs it. */
  readonly headers: Readonly<Record<string, string>>;
}

export interface Advertisement {
  /** Ref name -> commit, as the server has them now. */
  readonly refs: ReadonlyMap<string, string>;
  readonly capabilities: ReadonlySet<string>;
}

export interface RefUpdate {
  readonly ref: string;
  /** The commit the ref points at now (undefined: the ref is created). */
  readonly old: string | undefined;
  readonly new: string;
}

async function readBody(body: AsyncIterableIterator<Uint8Array> | undefined): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body ?? []) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function request(
  target: ReceivePackTarget,
  path: string,
  options: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: Buffer },
): Promise<Buffer> {
  const response = await target.http.request({
    url: `${target.url.replace(/\/$/, '')}/${path}`,
    method: options.method,
    headers: { 'User-Agent': 'git/tollgate', ...target.headers, ...options.headers },
    ...(options.body === undefined
      ? {}
      : {
          body: (async function* () {
            yield new Uint8Array(options.body as Buffer);
          })(),
        }),
  });
  const body = await readBody(response.body);
  if (response.statusCode !== 200)
    throw new Errors.HttpError(
      response.statusCode,
      response.statusMessage,
      body.toString('utf8').slice(0, 500),
    );
  return body;
}

/** The lines of a pkt-line stream (flush packets dropped); an error when it is not one. */
function lines(raw: Buffer, what: string): Buffer[] {
  const list = packets(raw);
  if (list.length === 0) throw new Error(`receive-pack: ${what} is not a pkt-line stream`);
  return list.filter((packet) => packet.length > 4).map((packet) => packet.subarray(4));
}

/** The refs and capabilities the server advertises for a push. */
export async function advertisedRefs(target: ReceivePackTarget): Promise<Advertisement> {
  const raw = await request(target, 'info/refs?service=git-receive-pack', { method: 'GET' });
  const refs = new Map<string, string>();
  let capabilities = new Set<string>();
  for (const line of lines(raw, 'the ref advertisement')) {
    const text = line.toString('utf8').replace(/\n$/, '');
    if (text.startsWith('#')) continue;
    const [head, caps] = text.split('\u0000');
    if (caps !== undefined) capabilities = new Set(caps.split(' ').filter(Boolean));
    const [oid, ref] = (head ?? '').split(' ');
    if (oid && ref && oid !== zeroOid && ref !== 'capabilities^{}') refs.set(ref, oid);
  }
  return { refs, capabilities };
}

/** The payload of band 1 of a side-band stream (band 3 is a fatal error from the server). */
function sideBandData(raw: Buffer): Buffer {
  const data: Buffer[] = [];
  for (const packet of lines(raw, 'the push result')) {
    const band = packet[0];
    if (band === 1) data.push(packet.subarray(1));
    if (band === 3) throw new Error(`receive-pack: ${packet.subarray(1).toString('utf8').trim()}`);
  }
  return Buffer.concat(data);
}

/** Throws unless the server's report says the pack was unpacked and every ref updated. */
function checkReport(report: Buffer, ref: string): void {
  const status = lines(report, 'the push report').map((line) => line.toString('utf8').trim());
  const unpack = status.find((line) => line.startsWith('unpack '));
  if (unpack !== 'unpack ok')
    throw new Error(`receive-pack: the server did not unpack the pack (${unpack ?? 'no report'})`);
  if (status.includes(`ok ${ref}`)) return;
  const refused = status.find((line) => line.startsWith(`ng ${ref} `)) ?? `no status for ${ref}`;
  throw new Errors.GitPushError(refused, {
    ok: false,
    error: refused,
    refs: { [ref]: { ok: false, error: refused.slice(`ng ${ref} `.length) } },
  });
}

/**
 * Sends `pack` and moves `update.ref` from `update.old` to `update.new` (the server
 * refuses when the ref no longer points at `old`). Throws isomorphic-git's errors
 * (HttpError, GitPushError), so callers classify failures the same way.
 */
export async function sendPack(
  target: ReceivePackTarget,
  advertised: Advertisement,
  update: RefUpdate,
  pack: Uint8Array,
): Promise<void> {
  const sideBand = advertised.capabilities.has('side-band-64k');
  const capabilities = ['report-status', ...(sideBand ? ['side-band-64k'] : []), 'agent=tollgate'];
  const command = `${update.old ?? zeroOid} ${update.new} ${update.ref}\u0000${capabilities.join(' ')}`;
  const raw = await request(target, 'git-receive-pack', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/x-git-receive-pack-request',
      Accept: 'application/x-git-receive-pack-result',
    },
    body: Buffer.concat([pktLine(command), Buffer.from('0000', 'utf8'), pack]),
  });
  checkReport(sideBand ? sideBandData(raw) : raw, update.ref);
}
