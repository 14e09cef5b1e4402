/**
 * A push's round trips to the Git server. With 300 ms of round trip to a hosted Git
 * server, a strict release waited 1.1 s at the median for its intent's push
 * (docs/BENCHMARKS.md, "With 300 ms of Git round trip"): each push asked the server for
 * its refs, then sent the pack. A writer that pushed last knows the remote's tip and the
 * server's capabilities: it sends the pack at once, and only when the server refuses
 * (another writer moved the branch, or an answer was lost) does it ask for the refs and
 * push as before. Counted on a real Git server, not timed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nodeFs from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { looseObjects, objectWrittenLately } from '../../../src/audit/loose-objects.ts';
import { AuditRepo } from '../../../src/audit/repo.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { gitServerPerFile } from '../../support/git-server.ts';

const server = gitServerPerFile();
const branch = 'tollgate/audit';

async function writer(url: string, clock: ManualClock, name: string): Promise<AuditRepo> {
  const repo = new AuditRepo({
    dir: mkdtempSync(join(tmpdir(), `tollgate-push-trips-${name}-`)),
    url,
    branch,
    token: server.token,
    author: { name, email: `${name}@t` },
    clock,
  });
  await repo.open();
  await repo.fetch();
  return repo;
}

/** The requests one push made. */
async function requestsOf(push: () => Promise<unknown>): Promise<string[]> {
  const before = server.requests.length;
  await push();
  return server.requests.slice(before).map((line) => line.replace(/^(\S+) \/[^/]+/, '$1 '));
}

/** A new repository and writer `a`, which has pushed two commits (its first push creates the branch). */
async function pushedTwice(
  name: string,
): Promise<{ url: string; clock: ManualClock; a: AuditRepo }> {
  const url = server.createRepo(name);
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 7));
  const a = await writer(url, clock, 'a');
  await a.commitFile('audit/prod/2026/01/01/07/T070000Z-a-000001.jsonl', '{"n":1}\n', 'one\n');
  await a.push();
  await a.commitFile('audit/prod/2026/01/01/07/T070001Z-a-000002.jsonl', '{"n":2}\n', 'two\n');
  await a.push();
  return { url, clock, a };
}

test('a writer that pushed last sends its next pack at once: one request, no ref advertisement', async () => {
  const { url, a } = await pushedTwice('trips-own');
  await a.commitFile('audit/prod/2026/01/01/07/T070002Z-a-000003.jsonl', '{"n":3}\n', 'three\n');
  assert.deepEqual(await requestsOf(() => a.push()), ['POST /git-receive-pack']);
  assert.equal(await a.trackingTip(), await a.localTip());
  const source = await openAuditSource(url, branch, { token: server.token });
  const files = (await readAuditHistory(source)).flatMap((c) => c.changes.map((x) => x.path));
  source.close();
  assert.equal(files.length, 3, JSON.stringify(files));
});

test('when another writer moved the branch, the pack sent at once is refused and the push lands as before, on the new tip', async () => {
  const { url, clock, a } = await pushedTwice('trips-moved');
  const b = await writer(url, clock, 'b');
  await b.commitFile('audit/prod/2026/01/01/07/T070002Z-b-000001.jsonl', '{"b":1}\n', 'b one\n');
  await b.push();
  await a.commitFile('audit/prod/2026/01/01/07/T070003Z-a-000003.jsonl', '{"n":3}\n', 'three\n');
  const trips = await requestsOf(() => a.push());
  assert.equal(trips[0], 'POST /git-receive-pack', 'the pack first, at once');
  assert.ok(
    trips.includes('GET /info/refs?service=git-receive-pack'),
    `then the refs, as before: ${trips.join(', ')}`,
  );
  const source = await openAuditSource(url, branch, { token: server.token });
  const history = await readAuditHistory(source);
  source.close();
  assert.deepEqual(
    history.flatMap((c) => c.changes.map((x) => x.path.split('/').at(-1))),
    [
      'T070000Z-a-000001.jsonl',
      'T070001Z-a-000002.jsonl',
      'T070002Z-b-000001.jsonl',
      'T070003Z-a-000003.jsonl',
    ],
  );
});

test('a push packs the blob and trees its commit just wrote without reading them back from disk', async () => {
  const url = server.createRepo('trips-written');
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 7));
  const read: string[] = [];
  const fs = {
    promises: {
      ...nodeFs.promises,
      readFile: ((path: nodeFs.PathLike, options?: unknown) => {
        const loose = /\/objects\/([0-9a-f]{2})\/([0-9a-f]{38})$/.exec(String(path));
        if (loose) read.push(`${loose[1]}${loose[2]}`);
        return nodeFs.promises.readFile(path, options as undefined);
      }) as typeof nodeFs.promises.readFile,
    },
  };
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-push-trips-written-'));
  const repo = new AuditRepo({
    dir,
    url,
    branch,
    token: server.token,
    author: { name: 'a', email: 'a@t' },
    clock,
    fs,
  });
  await repo.open();
  await repo.fetch();
  const first = 'audit/prod/2026/01/01/07/T070000Z-a-000001.jsonl';
  await repo.commitFile(first, '{"n":1}\n', 'one\n');
  await repo.push(); // the branch's first push (isomorphic-git's own)
  const before = new Set(looseObjects(repo.gitdir).keys());
  const path = 'audit/prod/2026/01/01/07/T070001Z-a-000002.jsonl';
  const { oid } = await repo.commitFile(path, '{"n":2}\n', 'two\n');
  const written = [...looseObjects(repo.gitdir).keys()].filter(
    (object) => !before.has(object) && object !== oid,
  );
  assert.equal(written.length, 8, 'a blob, the root tree and a tree per folder (6)');
  read.length = 0;
  await repo.push();
  const source = await openAuditSource(url, branch, { token: server.token });
  const files = (await readAuditHistory(source)).flatMap((c) => c.changes.map((x) => x.path));
  assert.deepEqual(files.sort(), [first, path], 'both commits landed whole');
  assert.deepEqual(
    read.filter((object) => written.includes(object)),
    [],
    'objects read back from disk',
  );
  repo.releaseCache(); // after a cycle: a quiet writer holds none of them
  for (const object of written) assert.equal(objectWrittenLately(repo.gitdir, object), undefined);
});
