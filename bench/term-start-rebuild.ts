/**
 * A term start's rebuild of the commits an earlier term left unpushed, on a remote that
 * moved past their base (soak seed 3: 770 leftovers of 9,225 records in an hour folder
 * of 667 files):
 *
 *   node bench/term-start-rebuild.ts [--leftovers 770] [--records-per-commit 12] [--folder 667] [--max-decisions 500] [--before <checkout>]
 *
 * Builds the writer's clone once with `git fast-import` (a base commit, `--folder - 1`
 * commits of another writer on the remote in one hour folder, `--leftovers` commits of
 * `--records-per-commit` records, intents then their outcomes, in the same folder), then
 * on a fresh copy of it runs GitAuditWriter.reconcile (the term start's fetch, plan and
 * rebuild; the remote is the clone's tracking ref, nothing goes over a network) and
 * reports its wall time and the commits the rebuild produced. With `--before <checkout>`
 * (a tree holding another version's src/, e.g. `git archive main src package.json`), the
 * same runs with that version's writer on another copy, in the same process, and the
 * ratio of the two times is reported: both share the machine's load at that moment.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { checkpointMessage, checkpointPath, serializeCheckpoint } from '../src/audit/checkpoint.ts';
import { commitMessage } from '../src/audit/message.ts';
import { serializeBatch } from '../src/audit/record.ts';
import type * as RepoModule from '../src/audit/repo.ts';
import type * as WriterModule from '../src/audit/writer.ts';
import { auditFilePath } from '../src/audit/writer.ts';
import type { Decision } from '../src/decide/decision.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { aDecision, outcomeOf } from '../test/builders/decision.ts';

const { values } = parseArgs({
  options: {
    leftovers: { type: 'string', default: '770' },
    'records-per-commit': { type: 'string', default: '12' },
    folder: { type: 'string', default: '667' },
    'max-decisions': { type: 'string', default: '500' },
    before: { type: 'string' },
  },
});
const leftovers = Number(values.leftovers);
const perCommit = Number(values['records-per-commit']);
const folder = Number(values.folder);
const maxDecisions = Number(values['max-decisions']);
const cluster = 'prod';
const branch = 'tollgate/audit';
const hour = Date.UTC(2026, 11, 2, 4);

/** One commit of the fast-import stream: `decisions` in one new file on `ref`. */
function commitOf(
  ref: string,
  mark: number,
  parent: number | undefined,
  controller: string,
  sequence: number,
  decisions: readonly Decision[],
  batch: 'intents' | 'outcomes' | 'records',
): string {
  const at = hour + sequence * 1_000;
  const path = auditFilePath(cluster, controller, at, sequence);
  const message = commitMessage(decisions, { batch, controller, cluster });
  const content = serializeBatch(decisions);
  const who = `t <t@t> ${Math.floor(at / 1000)} +0000`;
  return [
    `commit ${ref}`,
    `mark :${mark}`,
    `author ${who}`,
    `committer ${who}`,
    `data ${Buffer.byteLength(message)}`,
    message,
    ...(parent === undefined ? [] : [`from :${parent}`]),
    `M 100644 inline ${path}`,
    `data ${Buffer.byteLength(content)}`,
    content,
  ].join('\n');
}

/** A checkpoint of no open intents (the remote writer's records are Holds) on the remote. */
function checkpointOf(mark: number, parent: number, sequence: number): string {
  const at = hour + sequence * 1_000;
  const path = checkpointPath(auditFilePath(cluster, 'other', at, sequence));
  const message = checkpointMessage(0, { controller: 'other', cluster });
  const content = serializeCheckpoint(cluster, []);
  const who = `t <t@t> ${Math.floor(at / 1000)} +0000`;
  return [
    `commit refs/remotes/origin/${branch}`,
    `mark :${mark}`,
    `author ${who}`,
    `committer ${who}`,
    `data ${Buffer.byteLength(message)}`,
    message,
    `from :${parent}`,
    `M 100644 inline ${path}`,
    `data ${Buffer.byteLength(content)}`,
    content,
  ].join('\n');
}

/** The writer's clone at the term start, as a bare repository built by git fast-import. */
function buildFixture(dir: string): void {
  execFileSync('git', ['init', '-q', '--bare', `--initial-branch=${branch}`, dir]);
  const stream: string[] = [];
  let mark = 1;
  stream.push(
    commitOf(
      `refs/heads/${branch}`,
      mark,
      undefined,
      'base',
      0,
      [aDecision('Hold', 'base').obj()],
      'records',
    ),
  );
  const base = mark;
  let parent = base;
  for (let index = 1; index < folder; index += 1) {
    mark += 1;
    const hold = aDecision('Hold', `other-${index}`).obj();
    stream.push(
      commitOf(`refs/remotes/origin/${branch}`, mark, parent, 'other', index, [hold], 'records'),
    );
    parent = mark;
  }
  // The remote writer's checkpoint (every 200 commits in production): recovery at the
  // term start reads back to it, not to the root, as it would on a real trail.
  mark += 1;
  stream.push(checkpointOf(mark, parent, folder));
  parent = base;
  let open: Decision[] = [];
  for (let index = 1; index <= leftovers; index += 1) {
    mark += 1;
    const intents = index % 2 === 1;
    const decisions = intents
      ? Array.from({ length: perCommit }, (_, i) =>
          aDecision('Release', `left-${index}-${i}`).obj(),
        )
      : open.map((intent) => outcomeOf(intent));
    if (intents) open = decisions;
    const batch = intents ? 'intents' : 'outcomes';
    stream.push(
      commitOf(`refs/heads/${branch}`, mark, parent, 'left', folder + index, decisions, batch),
    );
    parent = mark;
  }
  execFileSync('git', ['-C', dir, 'fast-import', '--quiet'], { input: `${stream.join('\n')}\n` });
}

interface Run {
  /** reconcile: fetch, plan against the remote, rebuild, recovery's read back to the checkpoint. */
  readonly seconds: number;
  /** The walk that finds the leftovers (before reconcile, which reuses its answer). */
  readonly walkSeconds: number;
  readonly leftoverCommits: number;
  readonly rebuiltCommits: number;
}

/** reconcile with the writer of the checkout at `root`, on its own copy of the fixture. */
async function run(root: string, fixture: string): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-rebuild-run-'));
  cpSync(fixture, dir, { recursive: true });
  const { AuditRepo } = (await import(join(root, 'src/audit/repo.ts'))) as typeof RepoModule;
  const { GitAuditWriter } = (await import(
    join(root, 'src/audit/writer.ts')
  )) as typeof WriterModule;
  class OfflineRepo extends AuditRepo {
    override fetch(): Promise<string | undefined> {
      return this.trackingTip();
    }
    override push(): Promise<number> {
      return Promise.reject(new Error('bench clone: nothing is pushed'));
    }
  }
  const clock = new ManualClock(hour + 3_000_000);
  const repo = new OfflineRepo({
    dir,
    url: 'http://127.0.0.1:9/audit.git',
    branch,
    author: { name: 't', email: 't@t' },
    clock,
  });
  await repo.open();
  const walkStarted = performance.now();
  const leftoverCommits = (await repo.unpushed()).length;
  const walkSeconds = (performance.now() - walkStarted) / 1000;
  const writer = new GitAuditWriter({
    store: repo,
    cluster,
    controller: 'new',
    batch: { maxDecisions, maxDelayMs: 1_000 },
    clock,
    retryIntervalMs: 3_600_000,
    timers: { set: () => 0, clear: () => undefined },
  });
  const started = performance.now();
  await writer.reconcile();
  const seconds = (performance.now() - started) / 1000;
  const rebuiltCommits = (await repo.unpushed()).length;
  await writer.close({ flush: false });
  rmSync(dir, { recursive: true, force: true });
  return { seconds, walkSeconds, leftoverCommits, rebuiltCommits };
}

const fixture = mkdtempSync(join(tmpdir(), 'tollgate-rebuild-fixture-'));
const built = performance.now();
buildFixture(fixture);
console.log(
  `fixture: ${leftovers} leftover commits of ${perCommit} records on a remote of ${folder} files in their hour folder, built in ${((performance.now() - built) / 1000).toFixed(1)} s`,
);
const load = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
const here = resolve(import.meta.dirname, '..');
const versions =
  values.before === undefined
    ? [['this', here]]
    : [
        ['before', resolve(values.before)],
        ['this', here],
      ];
const results = new Map<string, Run>();
for (const [name, root] of versions as [string, string][]) {
  console.log(`${name} (${root}): ${load()}`);
  const result = await run(root, fixture);
  results.set(name, result);
  console.log(
    `${name}: leftovers found in ${result.walkSeconds.toFixed(1)} s; reconcile ${result.seconds.toFixed(1)} s, ${result.leftoverCommits} leftover commits rebuilt as ${result.rebuiltCommits}`,
  );
}
const before = results.get('before');
const after = results.get('this');
if (before && after)
  console.log(
    `ratio before/this: ${(before.seconds / after.seconds).toFixed(1)}x time, ${before.rebuiltCommits}/${after.rebuiltCommits} commits; ${load()}`,
  );
rmSync(fixture, { recursive: true, force: true });
