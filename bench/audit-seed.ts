/**
 * A long audit trail synthesized fast, in exactly the writer's layout: the real
 * GitAuditWriter (its batching, file paths, sequence numbers, commit messages, record
 * serialization, checkpoints of open intents and carried state every
 * `checkpointEvery` commits) writes into a FastImportStore, which streams each commit
 * into `git fast-import` instead of building it with the Git library and pushing it.
 * Nothing about the content is re-implemented here: only where a commit goes.
 *
 * Why: through AuditRepo and a push per cycle, 1,000,000 records take about 14 hours on
 * the bench machine; through fast-import, minutes. The long-trail bench
 * (bench/audit-history.ts --seed-records N) writes its first N records this way, pushes
 * them to the test Git server in one push, then writes a tail through the real writer.
 * test/unit/audit/seeded-trail.test.ts shows the two ways give the same commits.
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { promisify } from 'node:util';
import type { AuditStore, Timers } from '../src/audit/writer.ts';
import { GitAuditWriter } from '../src/audit/writer.ts';
import type { Decision } from '../src/decide/decision.ts';
import { ManualClock } from '../src/lib/clock.ts';
import {
  defaultTreeWindowHours,
  hourFolderOf,
  hourKey,
  windowCutoff,
} from '../src/audit/window.ts';

const run = promisify(execFile);

/** The trail the benches write: cluster, writer, pace and commit author. */
export interface TrailShape {
  readonly cluster: string;
  readonly controller: string;
  /** Records per commit (the writer's batch.maxDecisions). */
  readonly perCommit: number;
  /** Simulated time between two commits. */
  readonly everyMs: number;
  readonly maxDelayMs: number;
  readonly checkpointEvery: number;
  readonly author: { readonly name: string; readonly email: string };
}

export const benchTrail: TrailShape = {
  cluster: 'bench',
  controller: 'bench-0',
  perCommit: 20,
  everyMs: 10_000,
  maxDelayMs: 1_000,
  checkpointEvery: 200,
  author: { name: 'tollgate bench', email: 'bench@tollgate.invalid' },
};

/** Timers that never fire: a bench drives every cycle itself (recordIntents, flush). */
export const inertTimers: Timers = { set: () => 0, clear: () => undefined };

/** The writer of a bench trail over `store` (timers that never fire unless given). */
export function trailWriter(
  store: AuditStore,
  shape: TrailShape,
  clock: ManualClock,
  timers: Timers = inertTimers,
): GitAuditWriter {
  return new GitAuditWriter({
    store,
    cluster: shape.cluster,
    controller: shape.controller,
    batch: { maxDecisions: shape.perCommit, maxDelayMs: shape.maxDelayMs },
    checkpointEvery: shape.checkpointEvery,
    clock,
    timers,
  });
}

/** The `index`-th Release intent of a bench trail, decided at `at`. */
export function trailDecision(index: number, at: number): Decision {
  const name = `p${index}`;
  return {
    id: `gate-release:Release:uid-${name}:${1000 + index}:${at}`,
    at,
    loop: 'gate-release',
    kind: 'Release',
    tenant: `team-${index % 4}`,
    target: {
      namespace: `team-${index % 4}`,
      name,
      uid: `uid-${name}`,
      resourceVersion: String(1000 + index),
    },
    policy: { commit: 'f'.repeat(40), file: `tenants/team-${index % 4}.yaml`, name: 'batch-jobs' },
    inputs: [
      {
        condition: 'Budget',
        met: true,
        value: { cpuUsed: 1000 + (index % 5000), cpuLimit: 64_000, podsUsed: index % 50 },
      },
    ],
    reason: 'all conditions met',
    outcome: { result: 'pending' },
  };
}

/**
 * One round of a bench trail: `perCommit` intents from record `first` on, committed (and,
 * in a real writer, pushed) `everyMs` later, then their succeeded outcomes another
 * `everyMs` later: two commits.
 */
export async function writeRound(
  writer: GitAuditWriter,
  clock: ManualClock,
  first: number,
  shape: Pick<TrailShape, 'perCommit' | 'everyMs'>,
): Promise<void> {
  const intents = Array.from({ length: shape.perCommit }, (_, index) =>
    trailDecision(first + index, clock.now()),
  );
  clock.advance(shape.everyMs);
  await writer.recordIntents(intents);
  clock.advance(shape.everyMs);
  writer.record(
    intents.map((item) => ({ ...item, at: clock.now(), outcome: { result: 'succeeded' } })),
  );
  await writer.flush();
}

/**
 * An AuditStore whose commits go into a running `git fast-import` on one branch of a
 * bare repository: each commit adds one file (inline), on top of the branch's last one,
 * and drops the hour folders the tip's window leaves behind (as AuditRepo does),
 * with the author, committer and time AuditRepo.commitFile gives it (the clock's second,
 * UTC) and the message as isomorphic-git stores it, so the objects are the ones the
 * writer's clone would hold. Nothing is ever unpushed: the branch is pushed whole after
 * (pushSeeded). Writes wait for the pipe to drain, so memory stays bounded.
 */
export class FastImportStore implements AuditStore {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #exited: Promise<unknown>;
  readonly #ref: string;
  readonly #author: TrailShape['author'];
  readonly #clock: ManualClock;
  #stderr = '';
  /** The hour folders on the branch's tip (`audit/<cluster>/YYYY/MM/DD/HH`). */
  readonly #hours = new Set<string>();
  commits = 0;

  constructor(gitdir: string, branch: string, author: TrailShape['author'], clock: ManualClock) {
    this.#ref = `refs/heads/${branch}`;
    this.#author = author;
    this.#clock = clock;
    this.#child = spawn('git', ['--git-dir', gitdir, 'fast-import', '--quiet', '--done']);
    this.#child.stderr.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString()));
    this.#exited = once(this.#child, 'exit');
  }

  async commitFile(
    path: string,
    content: string,
    message: string,
  ): Promise<{ oid: string; path: string }> {
    const dropped = this.#dropOutOfWindow(path);
    const person = `${this.#author.name} <${this.#author.email}> ${Math.floor(this.#clock.now() / 1000)} +0000`;
    const text = isomorphicGitMessage(message);
    const body = Buffer.from(content, 'utf8');
    this.commits += 1;
    const head = [
      `commit ${this.#ref}`,
      `mark :${this.commits}`,
      `author ${person}`,
      `committer ${person}`,
      `data ${Buffer.byteLength(text)}`,
      text,
      ...dropped.map((folder) => `D ${folder}`),
      `M 100644 inline ${path}`,
      `data ${body.length}`,
      '',
    ].join('\n');
    await this.#write(Buffer.concat([Buffer.from(head), body, Buffer.from('\n')]));
    return { oid: `:${this.commits}`, path };
  }

  /**
   * The hour folders of `path`'s cluster older than the tip's window before it
   * (src/audit/window.ts), which AuditRepo drops from the tree of the commit adding
   * `path`; fast-import drops the folders they leave empty, as AuditRepo does.
   */
  #dropOutOfWindow(path: string): string[] {
    const cutoff = windowCutoff(path, defaultTreeWindowHours)?.join('/');
    const cluster = hourFolderOf(path)?.[1];
    const dropped: string[] = [];
    for (const folder of this.#hours)
      if (cutoff !== undefined && folder.split('/')[1] === cluster && folder < cutoff) {
        dropped.push(folder);
        this.#hours.delete(folder);
      }
    const own = hourKey(path);
    if (own !== undefined) this.#hours.add(own);
    return dropped;
  }

  push(): Promise<number> {
    return Promise.resolve(0);
  }

  unpushed(): Promise<readonly { readonly decisions: number }[]> {
    return Promise.resolve([]);
  }

  async #write(chunk: Buffer): Promise<void> {
    if (!this.#child.stdin.write(chunk)) await once(this.#child.stdin, 'drain');
  }

  /** Ends the stream; rejects when fast-import did not take all of it. */
  async finish(): Promise<void> {
    this.#child.stdin.end('done\n');
    await this.#exited;
    if (this.#child.exitCode !== 0)
      throw new Error(`git fast-import exited ${this.#child.exitCode}: ${this.#stderr}`);
  }
}

/**
 * isomorphic-git stores a commit message without carriage returns or leading newlines
 * and with exactly one trailing newline (its normalizeNewlines); fast-import stores
 * bytes as given, so they are given the same way.
 */
function isomorphicGitMessage(message: string): string {
  return `${message.replace(/\r/g, '').replace(/^\n+/, '').replace(/\n+$/, '')}\n`;
}

/**
 * The first `records` records of a bench trail (rounds of writeRound from a clock at
 * `start`) on `branch` of the bare repository `gitdir` (created when missing), written by
 * the real writer into git fast-import. Returns the commits made and the clock after the
 * last, where a tail written on top goes on.
 */
export async function seedTrail(
  options: TrailShape & {
    readonly gitdir: string;
    readonly branch: string;
    readonly records: number;
    readonly start: number;
    /** Told after each round (records written so far): progress for long runs. */
    readonly progress?: (written: number) => void;
  },
): Promise<{ commits: number; clock: ManualClock }> {
  await run('git', ['init', '-q', '--bare', `--initial-branch=${options.branch}`, options.gitdir]);
  const clock = new ManualClock(options.start);
  const store = new FastImportStore(options.gitdir, options.branch, options.author, clock);
  const writer = trailWriter(store, options, clock);
  writer.seedOpenIntents([]); // a new branch: nothing open, checkpoints from here on
  try {
    for (let done = 0; done < options.records; done += 2 * options.perCommit) {
      await writeRound(writer, clock, done, options);
      options.progress?.(done + 2 * options.perCommit);
    }
    await writer.close();
  } finally {
    await store.finish();
  }
  return { commits: store.commits, clock };
}

/** Pushes the seeded branch to `url` (credentials in it) in one push. */
export async function pushSeeded(gitdir: string, branch: string, url: string): Promise<void> {
  const ref = `refs/heads/${branch}`;
  await run('git', ['--git-dir', gitdir, 'push', '-q', url, `${ref}:${ref}`], {
    maxBuffer: 16 * 1024 * 1024,
  });
}
