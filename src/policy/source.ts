/**
 * The policy in force, kept current from a local folder or a Git repository.
 *
 * Every poll reads the location; a commit (or folder content hash) seen before is not
 * evaluated again. A new commit is parsed, validated and compiled: when good it becomes
 * the policy in force and `onPolicy` listeners hear of it; when bad it is REJECTED with
 * its errors (logged, counted in `tollgate_policy_load_errors_total{reason="invalid"}`,
 * `onRejected` listeners told) and the last good policy stays in force. A fetch failure
 * (server down, token refused) is logged and counted with reason "fetch" and also
 * leaves the last good policy in force; the next poll tries again. A later good commit
 * is picked up as usual.
 *
 * The last good policy survives a restart: when the first commit a (Git) source sees
 * is rejected, it walks back the branch's history (at most `historyDepth` commits) and
 * puts the newest commit that validates in force, so a restarted tollgate runs on what
 * it ran before instead of exiting. `tollgate_policy_head_invalid` is 1 while the
 * newest commit is rejected (alert on it), 0 once it is in force. A folder source has
 * no history: it starts only from valid content.
 *
 * With `savedPolicyFile` (tollgate run: in the Git cache folder), every policy put in force
 * from Git is also saved there (last-good.ts: files, commit id, approval merge times, a
 * digest). A source that has no policy after its first poll (the server down, HEAD and
 * its searched history invalid) starts from the saved copy when it is one of this
 * location and its digest holds; `tollgate_policy_saved_in_force` is 1 until a commit
 * fetched from Git goes in force. `state()` says where the policy in force came from, or
 * why there is none.
 *
 * Polls never overlap: a poll that is still running when the timer fires is awaited,
 * not duplicated. Time comes from injected timers so tests drive the interval.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createHash } from 'node:crypto';
import type { Clock } from '../lib/clock.ts';
import { systemTimers, type Timers } from '../lib/timers.ts';
import { systemClock } from '../lib/clock.ts';
import { redactUrl, silentLogger, type Logger } from '../observe/log.ts';
import { tokenFromFile, type TokenSource } from './credentials.ts';
import { formatPolicyError, type PolicyError } from './errors.ts';
import { GitPolicyReader, isRemoteGitUrl, PolicyFetchError } from './git.ts';
import type { SshAccess } from './git-ssh.ts';
import {
  contentHash,
  loadPolicyFromFiles,
  loadPolicyFromFilesOffThread,
  readPolicyDirectory,
  type PolicyFile,
  type PolicyResult,
} from './load.ts';
import type { Policy } from './model.ts';
import { FirstSeen, withApprovalTimes } from './approval-times.ts';
import { decodeSavedPolicy, encodeSavedPolicy } from './last-good.ts';
import {
  policyHeadInvalid,
  policyLastLoadTimestamp,
  policyLoadErrorsTotal,
  policySavedInForce,
  setPolicyCommitInForce,
} from './metrics.ts';

export { PolicyFetchError } from './git.ts';

export interface PolicySourceOptions {
  /** A folder path, an http(s) Git URL, or an SSH one (with `ssh`). */
  readonly location: string;
  /** Branch or tag of a Git location (default "main"). */
  readonly ref?: string;
  /** Sub-folder of the repository (or folder) that holds the policy. */
  readonly path?: string;
  /** Git token, given directly (tests, the CLI after reading it). */
  readonly token?: string;
  /** Name of an environment variable holding the Git token. */
  readonly tokenEnv?: string;
  /** File holding the Git token (a mounted Secret); trailing whitespace is ignored. */
  readonly tokenFile?: string;
  readonly username?: string;
  /** The deploy key of an SSH location (the operator's, see git-ssh.ts). */
  readonly ssh?: SshAccess;
  /** Where the bare cache clone lives (default: a folder under the OS temp dir, per URL). */
  readonly cacheDir?: string;
  /** Poll interval (default 30 s). */
  readonly intervalMs?: number;
  /** Send the token over plain http to a non-loopback host (default false). */
  readonly allowInsecureHttp?: boolean;
  /** Commits walked back from an invalid HEAD at start-up (default 50). */
  readonly historyDepth?: number;
  /**
   * Where the last good policy of a Git location is saved, and read from at start when
   * no commit of the location can be put in force (see the module comment).
   */
  readonly savedPolicyFile?: string;
  /** Deadline of one off-thread parse (default 20 s, see parse-off-thread.ts). */
  readonly parseTimeoutMs?: number;
  /**
   * Where YAML is parsed: in a worker thread (default; a long-running process keeps its
   * event loop free for the lease and the informers) or on the calling thread (a one-shot
   * command such as `validate`, which has nothing to keep alive and saves a worker's start).
   */
  readonly parseOn?: 'worker' | 'caller';
  readonly clock?: Clock;
  readonly timers?: Timers;
  readonly logger?: Logger;
}

export type PollOutcome =
  | { readonly kind: 'applied'; readonly commit: string }
  | { readonly kind: 'unchanged'; readonly commit: string }
  | { readonly kind: 'rejected'; readonly commit: string; readonly errors: readonly PolicyError[] }
  | { readonly kind: 'fetch-failed'; readonly error: PolicyFetchError };

/**
 * Where the policy in force came from: `fetched` (the newest commit, or a later valid one
 * while a newer is rejected), `history` (HEAD invalid at start: its newest valid
 * ancestor), `saved` (read from `savedPolicyFile`: nothing in Git could be put in force);
 * or `none` yet. `why`: the reason behind `history`, `saved` and `none`.
 */
export type PolicyState =
  | { readonly kind: 'fetched'; readonly commit: string }
  | { readonly kind: 'history' | 'saved'; readonly commit: string; readonly why: string }
  | { readonly kind: 'none'; readonly why: string };

export type PolicyListener = (policy: Policy) => void;
export type RejectedListener = (commit: string, errors: readonly PolicyError[]) => void;

/**
 * The token source for a Git location: a token file becomes a function that reads the
 * file again at every fetch (Secret rotation without restart), checked once here so a
 * missing file is a start-up error; a variable or a given token is read once.
 */
export function tokenSourceOf(
  options: Pick<PolicySourceOptions, 'token' | 'tokenEnv' | 'tokenFile'>,
): TokenSource | undefined {
  if (options.token === undefined && options.tokenEnv === undefined && options.tokenFile) {
    resolveToken(options);
    return tokenFromFile(options.tokenFile);
  }
  return resolveToken(options);
}

/** Reads the token from the configured place; a missing variable or unreadable file is a usage error. */
export function resolveToken(
  options: Pick<PolicySourceOptions, 'token' | 'tokenEnv' | 'tokenFile'>,
): string | undefined {
  if (options.token !== undefined) return options.token;
  if (options.tokenEnv !== undefined) {
    const value = process.env[options.tokenEnv];
    if (value === undefined || value === '') {
      throw new PolicyFetchError(
        'auth',
        `environment variable ${options.tokenEnv} (the Git token) is not set`,
      );
    }
    return value.trim();
  }
  if (options.tokenFile !== undefined) {
    try {
      return readFileSync(options.tokenFile, 'utf8').trim();
    } catch (error) {
      throw new PolicyFetchError(
        'auth',
        `cannot read the Git token file ${options.tokenFile}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
      );
    }
  }
  return undefined;
}

export class PolicySource {
  readonly location: string;
  readonly #reader: GitPolicyReader | undefined;
  readonly #timers: Timers;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #parseTimeoutMs: number | undefined;
  readonly #parseOn: 'worker' | 'caller';
  readonly #historyDepth: number;
  readonly #savedPolicyFile: string | undefined;
  #savedTried = false;
  #state: PolicyState = { kind: 'none', why: 'the policy has not been read yet' };
  #current: Policy | undefined;
  /** Last commit evaluated (good or bad), so an unchanged location costs no parse. */
  #lastSeen: string | undefined;
  #lastOutcome: PollOutcome | undefined;
  #policyListeners = new Set<PolicyListener>();
  #rejectedListeners = new Set<RejectedListener>();
  #inFlight: Promise<PollOutcome> | undefined;
  readonly #firstSeen = new FirstSeen();
  #timer: unknown;
  #running = false;

  constructor(options: PolicySourceOptions) {
    this.#timers = options.timers ?? systemTimers;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#intervalMs = options.intervalMs ?? 30_000;
    this.#parseTimeoutMs = options.parseTimeoutMs;
    this.#parseOn = options.parseOn ?? 'worker';
    this.#historyDepth = options.historyDepth ?? 50;
    this.#savedPolicyFile = options.savedPolicyFile;
    if (isRemoteGitUrl(options.location)) {
      const token = tokenSourceOf(options);
      const cacheDir =
        options.cacheDir ??
        join(
          tmpdir(),
          'tollgate-policy-cache',
          createHash('sha256').update(redactUrl(options.location)).digest('hex').slice(0, 16),
        );
      this.#reader = new GitPolicyReader(
        {
          url: options.location,
          ...(options.ref ? { ref: options.ref } : {}),
          ...(options.path ? { path: options.path } : {}),
          ...(token !== undefined ? { token } : {}),
          ...(options.username ? { username: options.username } : {}),
          ...(options.ssh ? { ssh: options.ssh } : {}),
        },
        cacheDir,
        { allowInsecureHttp: options.allowInsecureHttp ?? false },
      );
      this.location = `${this.#reader.url}@${this.#reader.ref}${this.#reader.path ? `:${this.#reader.path}` : ''}`;
    } else {
      this.location = options.path ? join(options.location, options.path) : options.location;
    }
  }

  /** The policy in force, or undefined before the first good load. */
  current(): Policy | undefined {
    return this.#current;
  }

  /** Where the policy in force came from, or why there is none. */
  state(): PolicyState {
    return this.#state;
  }

  /**
   * Packs isomorphic-git holds in memory for the Git reader between polls (0 for a
   * folder): none, since each poll drops what it read. For tests and benches.
   */
  get gitPacksInMemory(): number {
    return this.#reader?.cachedPacks ?? 0;
  }

  /** The outcome of the last poll. */
  lastOutcome(): PollOutcome | undefined {
    return this.#lastOutcome;
  }

  onPolicy(listener: PolicyListener): () => void {
    this.#policyListeners.add(listener);
    return () => this.#policyListeners.delete(listener);
  }

  onRejected(listener: RejectedListener): () => void {
    this.#rejectedListeners.add(listener);
    return () => this.#rejectedListeners.delete(listener);
  }

  /** Polls once now; concurrent callers share one poll. */
  poll(): Promise<PollOutcome> {
    this.#inFlight ??= this.#pollOnce().finally(() => {
      // What the poll read from Git is not kept: memory must not grow with the history.
      this.#reader?.releaseCache();
      const maintenance = this.#reader?.takeMaintenanceError();
      if (maintenance)
        this.#logger.warn(
          { location: this.location, err: maintenance },
          "could not merge the policy cache clone's packs; it stays readable, and the next fetch tries again",
        );
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  /** Polls now, then every interval until `stop()`. Resolves with the first outcome. */
  async start(): Promise<PollOutcome> {
    this.#running = true;
    const first = await this.poll();
    this.#schedule();
    return first;
  }

  stop(): void {
    this.#running = false;
    if (this.#timer !== undefined) this.#timers.clear(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (!this.#running) return;
    this.#timer = this.#timers.set(() => {
      this.#timer = undefined;
      void this.poll().finally(() => this.#schedule());
    }, this.#intervalMs);
  }

  /**
   * The commit a poll need not read again: the last one seen, unless the last poll
   * failed to fetch (then it is read, and judged, again). #pollOnce's 'unchanged' test.
   */
  #unchangedIf(): string | undefined {
    return this.#lastOutcome && this.#lastOutcome.kind !== 'fetch-failed'
      ? this.#lastSeen
      : undefined;
  }

  async #read(): Promise<{
    commit: string;
    files: PolicyFile[];
    errors: PolicyError[];
  }> {
    if (this.#reader) return this.#reader.fetch({ unlessCommit: this.#unchangedIf() });
    const read = await readPolicyDirectory(this.location);
    if (read.errors.some((e) => e.file === '.' || /cannot read folder/.test(e.message))) {
      throw new PolicyFetchError(
        'not-found',
        `cannot read policy folder ${this.location}: ${read.errors.map((e) => e.message).join('; ')}`,
      );
    }
    return { commit: contentHash(read.files), files: read.files, errors: read.errors };
  }

  /**
   * The parse worker timed out or died: not a verdict on the commit, so it is tried
   * again on the next poll (a loaded machine must not turn a good commit into a bad one).
   */
  #parseFailed(commit: string, error: unknown): PollOutcome {
    this.#lastSeen = undefined;
    policyLoadErrorsTotal.inc({ reason: 'parse-timeout' });
    const message = error instanceof Error ? error.message : String(error);
    this.#logger.error(
      { location: this.location, commit, err: message },
      'policy parsing did not finish; the last good policy stays in force, the commit is tried again on the next poll',
    );
    return {
      kind: 'fetch-failed',
      error: new PolicyFetchError('other', `commit ${commit}: ${message}`),
    };
  }

  /** A throwing listener must not stop the others nor the poll loop. */
  #notify(call: () => void): void {
    try {
      call();
    } catch (error) {
      this.#logger.error(
        { err: error instanceof Error ? error.message : String(error) },
        'policy listener failed',
      );
    }
  }

  async #pollOnce(): Promise<PollOutcome> {
    let read;
    try {
      read = await this.#read();
    } catch (error) {
      const fetchError =
        error instanceof PolicyFetchError
          ? error
          : new PolicyFetchError(
              'other',
              `cannot read ${this.location}: ${error instanceof Error ? error.message : String(error)}`,
            );
      policyLoadErrorsTotal.inc({ reason: 'fetch' });
      policyLastLoadTimestamp.set(this.#clock.now() / 1000);
      this.#logger.warn(
        { location: this.location, kind: fetchError.kind, err: fetchError.message },
        'policy fetch failed; the last good policy stays in force',
      );
      if (this.#current === undefined)
        await this.#withoutPolicy(`the policy could not be fetched: ${fetchError.message}`);
      return (this.#lastOutcome = { kind: 'fetch-failed', error: fetchError });
    }
    policyLastLoadTimestamp.set(this.#clock.now() / 1000);
    if (read.commit === this.#unchangedIf()) {
      return (this.#lastOutcome = { kind: 'unchanged', commit: read.commit });
    }
    this.#lastSeen = read.commit;
    let result: PolicyResult;
    try {
      result = await this.#load(read.files, read.commit);
    } catch (error) {
      const outcome = (this.#lastOutcome = this.#parseFailed(read.commit, error));
      if (this.#current === undefined && outcome.kind === 'fetch-failed')
        await this.#withoutPolicy(`the policy could not be parsed: ${outcome.error.message}`);
      return outcome;
    }
    const errors = [...read.errors, ...(result.ok ? [] : result.errors)];
    if (!result.ok || errors.length > 0) {
      policyLoadErrorsTotal.inc({ reason: 'invalid' });
      policyHeadInvalid.set(1);
      this.#logger.error(
        {
          location: this.location,
          commit: read.commit,
          errors: errors.slice(0, 50).map(formatPolicyError),
          errorCount: errors.length,
        },
        'policy commit rejected; the last good policy stays in force',
      );
      for (const listener of this.#rejectedListeners)
        this.#notify(() => listener(read.commit, errors));
      if (this.#current === undefined) await this.#lastGoodFromHistory(read.commit);
      if (this.#current === undefined)
        await this.#withoutPolicy(rejectedWhy(read.commit, errors, this.#historyDepth));
      return (this.#lastOutcome = { kind: 'rejected', commit: read.commit, errors });
    }
    policyHeadInvalid.set(0);
    this.#apply(await this.#dated(result.policy, read.commit, read.files), read.commit, {
      kind: 'fetched',
      files: read.files,
    });
    return (this.#lastOutcome = { kind: 'applied', commit: read.commit });
  }

  /**
   * Nothing in Git could be put in force: the saved last good policy, once per process,
   * when there is one for this location that holds; else no policy, and why.
   */
  async #withoutPolicy(why: string): Promise<void> {
    const savedNote = await this.#fromSavedPolicy(why);
    if (this.#current !== undefined) return;
    this.#state = { kind: 'none', why: savedNote ? `${why}; ${savedNote}` : why };
  }

  #savedProblem: string | undefined;

  /** Puts the saved policy in force; returns why not (undefined without a saved file). */
  async #fromSavedPolicy(why: string): Promise<string | undefined> {
    const file = this.#savedPolicyFile;
    if (file === undefined || !this.#reader) return undefined;
    if (this.#savedTried) return this.#savedProblem;
    this.#savedTried = true;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'error';
      return (this.#savedProblem = `no saved policy to start from (${file}: ${code})`);
    }
    const saved = decodeSavedPolicy(text, this.location);
    const result = 'problem' in saved ? undefined : await this.#load(saved.files, saved.commit);
    if ('problem' in saved || !result?.ok) {
      const problem = 'problem' in saved ? saved.problem : 'it no longer validates';
      this.#savedProblem = `the saved policy ${file} is refused: ${problem}`;
      this.#logger.error({ location: this.location, file, problem }, this.#savedProblem);
      return this.#savedProblem;
    }
    const policy = await withApprovalTimes(result.policy, (approvalFile) =>
      Promise.resolve(saved.approvalsMergedAt[approvalFile]),
    );
    this.#logger.warn(
      { location: this.location, commit: saved.commit, file, why },
      'no commit of the policy location can be put in force; running the saved last good policy until one can',
    );
    this.#apply(policy, saved.commit, { kind: 'saved', why });
    return undefined;
  }

  /** Saves the policy in force (a Git commit) for the next start; a failure only warns. */
  #save(policy: Policy, commit: string, files: readonly PolicyFile[]): void {
    const file = this.#savedPolicyFile;
    if (file === undefined || !this.#reader) return;
    const approvalsMergedAt: Record<string, number> = {};
    for (const approval of policy.approvals)
      if (approval.mergedAt !== undefined)
        approvalsMergedAt[approval.source.file] = approval.mergedAt;
    try {
      mkdirSync(dirname(file), { recursive: true });
      const temporary = `${file}.${process.pid}.tmp`;
      writeFileSync(
        temporary,
        encodeSavedPolicy({ location: this.location, commit, files, approvalsMergedAt }),
      );
      renameSync(temporary, file);
    } catch (error) {
      this.#logger.warn(
        { file, err: error instanceof Error ? error.message : String(error) },
        'cannot save the policy in force; a restart while Git is unreachable will have no policy',
      );
    }
  }

  #load(files: readonly PolicyFile[], commit: string): Promise<PolicyResult> {
    if (this.#parseOn === 'caller') return Promise.resolve(loadPolicyFromFiles(files, { commit }));
    return loadPolicyFromFilesOffThread(files, {
      commit,
      timers: this.#timers,
      ...(this.#parseTimeoutMs !== undefined ? { timeoutMs: this.#parseTimeoutMs } : {}),
    });
  }

  /** The approvals' merge times (approval-times.ts): from Git, or when a folder's file was first read. */
  #dated(policy: Policy, commit: string, files: readonly PolicyFile[]): Promise<Policy> {
    const reader = this.#reader;
    if (reader)
      return withApprovalTimes(
        policy,
        async (file) =>
          (await reader.fileChangedAt(commit, file)) ?? (await reader.commitTime(commit)),
      );
    const now = this.#clock.now();
    return withApprovalTimes(policy, async (file) => {
      const content = files.find((f) => f.path === file)?.content;
      return content === undefined ? now : this.#firstSeen.at(file, content, now);
    });
  }

  #apply(
    policy: Policy,
    commit: string,
    origin:
      | { kind: 'fetched'; files: readonly PolicyFile[] }
      | { kind: 'history'; files: readonly PolicyFile[]; why: string }
      | { kind: 'saved'; why: string },
  ): void {
    this.#current = policy;
    this.#state =
      origin.kind === 'fetched'
        ? { kind: 'fetched', commit }
        : { kind: origin.kind, commit, why: origin.why };
    policySavedInForce.set(origin.kind === 'saved' ? 1 : 0);
    if (origin.kind !== 'saved') this.#save(policy, commit, origin.files);
    setPolicyCommitInForce(commit);
    this.#logger.info({ location: this.location, commit }, 'policy in force');
    for (const listener of this.#policyListeners) this.#notify(() => listener(policy));
  }

  /**
   * Start-up with an invalid HEAD: the newest ancestor that validates goes in force.
   * Errors while walking (a missing object, a parse timeout) end the walk: the source
   * then has no policy, as when history holds no valid commit.
   */
  async #lastGoodFromHistory(head: string): Promise<void> {
    if (!this.#reader) return;
    try {
      const ancestors = await this.#reader.ancestors(head, this.#historyDepth);
      for (const [index, commit] of ancestors.entries()) {
        const tree = await this.#reader.readTree(commit);
        if (tree.errors.length > 0) continue;
        const result = await this.#load(tree.files, commit);
        if (!result.ok) continue;
        this.#logger.warn(
          { location: this.location, head, commit, commitsBack: index + 1 },
          'policy HEAD is invalid; running the newest valid commit of its history until HEAD is fixed',
        );
        this.#apply(await this.#dated(result.policy, commit, tree.files), commit, {
          kind: 'history',
          files: tree.files,
          why: `HEAD ${head.slice(0, 12)} is invalid; its newest valid ancestor, ${index + 1} commits back, is in force`,
        });
        return;
      }
      this.#logger.error(
        { location: this.location, head, searched: ancestors.length },
        'no valid policy commit in the searched history',
      );
    } catch (error) {
      this.#logger.error(
        {
          location: this.location,
          head,
          err: error instanceof Error ? error.message : String(error),
        },
        'cannot search the policy history for a valid commit',
      );
    }
  }
}

/** Why a rejected HEAD left no policy: the commit, its first error, the history searched. */
function rejectedWhy(commit: string, errors: readonly PolicyError[], depth: number): string {
  const first = errors[0] ? `: ${formatPolicyError(errors[0])}` : '';
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  return `policy commit ${commit.slice(0, 12)} is invalid${first}${more}, and no valid commit was found in the ${depth} before it`;
}
