/**
 * The configuration of `tollgate run`, from flags and TOLLGATE_* environment variables
 * (a flag wins over its variable, a variable over the default). Parsing is pure: the
 * file system and host name come in through `RunConfigContext`, so every rule is unit
 * tested. Every problem is collected and reported at once, naming the flag and the
 * variable, BEFORE anything starts: a replica that would fail half-way through start-up
 * (after taking the lease, say) is worse than one that refuses to start.
 *
 * Secrets never travel as flags or plain variables that show in `ps` or a pod spec
 * diff: the Git token is read from a named environment variable (fed from a Secret) or a
 * file (a mounted Secret).
 */
import { sweepScheduleProblem } from '../run/sweep-schedule.ts';
import { parseDuration } from '../lib/clock.ts';
import { leaderTimingProblems, type LeaderTimings } from '../cluster/leader-timing.ts';
import { parseListenAddress } from '../observe/http.ts';
import { dispatchSettings, type DispatchSettings } from '../dispatch/settings.ts';
import { plainHttpProblem } from '../policy/credentials.ts';
import { isSshUrl } from '../policy/git-ssh.ts';
import { kubeconfigSource, type LoadableSource } from '../cluster/kubeconfig.ts';
import { liveReadAfterSkipsProblem } from '../cluster/stale-guard.ts';

export interface RunSetting {
  /** camelCase key, also commander's option key. */
  readonly key: string;
  /** Flag name without the dashes. */
  readonly flag: string;
  readonly env: string;
  readonly description: string;
  readonly defaultValue?: string;
}

export const runSettings = [
  {
    key: 'kubeconfig',
    flag: 'kubeconfig',
    env: 'TOLLGATE_KUBECONFIG',
    description:
      'kubeconfig file (default: the files $KUBECONFIG lists, else ~/.kube/config, else the pod service account)',
  },
  {
    key: 'kubeContext',
    flag: 'kube-context',
    env: 'TOLLGATE_KUBE_CONTEXT',
    description: 'context in the kubeconfig (default: its current-context)',
  },
  {
    key: 'policyRepo',
    flag: 'policy-repo',
    env: 'TOLLGATE_POLICY_REPO',
    description:
      'policy Git repository URL: http(s), or ssh:// / git@host:path with --git-ssh-key-file',
  },
  {
    key: 'policyDir',
    flag: 'policy-dir',
    env: 'TOLLGATE_POLICY_DIR',
    description:
      'a local policy folder instead of a repository (no audit push unless --audit-repo)',
  },
  {
    key: 'policyRef',
    flag: 'policy-ref',
    env: 'TOLLGATE_POLICY_REF',
    description: 'branch or tag of the policy repository',
    defaultValue: 'main',
  },
  {
    key: 'policyPath',
    flag: 'policy-path',
    env: 'TOLLGATE_POLICY_PATH',
    description: 'sub-folder of the repository that holds the policy',
    defaultValue: '',
  },
  {
    key: 'gitTokenEnv',
    flag: 'git-token-env',
    env: 'TOLLGATE_GIT_TOKEN_ENV',
    description: 'name of the environment variable holding the Git token',
  },
  {
    key: 'gitTokenFile',
    flag: 'git-token-file',
    env: 'TOLLGATE_GIT_TOKEN_FILE',
    description: 'file holding the Git token (a mounted Secret)',
  },
  {
    key: 'auditTokenEnv',
    flag: 'audit-token-env',
    env: 'TOLLGATE_AUDIT_TOKEN_ENV',
    description:
      'name of the environment variable holding the audit (write) token (default: the Git token)',
  },
  {
    key: 'auditTokenFile',
    flag: 'audit-token-file',
    env: 'TOLLGATE_AUDIT_TOKEN_FILE',
    description: 'file holding the audit (write) token, a mounted Secret (default: the Git token)',
  },
  {
    key: 'gitSshKeyFile',
    flag: 'git-ssh-key-file',
    env: 'TOLLGATE_GIT_SSH_KEY_FILE',
    description:
      'SSH private key (deploy key, a mounted Secret) for an ssh:// or git@host:path policy repository (and the audit one without --audit-ssh-key-file)',
  },
  {
    key: 'auditSshKeyFile',
    flag: 'audit-ssh-key-file',
    env: 'TOLLGATE_AUDIT_SSH_KEY_FILE',
    description:
      'SSH private key (write deploy key, a mounted Secret) for an SSH audit repository (default: --git-ssh-key-file)',
  },
  {
    key: 'gitSshKnownHosts',
    flag: 'git-ssh-known-hosts',
    env: 'TOLLGATE_GIT_SSH_KNOWN_HOSTS',
    description:
      'known_hosts file holding the SSH Git servers host keys (required for SSH remotes)',
  },
  {
    key: 'gitSshInsecureIgnoreHostKey',
    flag: 'git-ssh-insecure-ignore-host-key',
    env: 'TOLLGATE_GIT_SSH_INSECURE_IGNORE_HOST_KEY',
    description: 'true: do not check SSH Git servers host keys at all (never in production)',
    defaultValue: 'false',
  },
  {
    key: 'allowInsecureHttp',
    flag: 'allow-insecure-http',
    env: 'TOLLGATE_ALLOW_INSECURE_HTTP',
    description:
      'true: send Git tokens over plain http to non-loopback hosts too (never in production)',
    defaultValue: 'false',
  },
  {
    key: 'gitCacheDir',
    flag: 'git-cache-dir',
    env: 'TOLLGATE_GIT_CACHE_DIR',
    description: 'writable folder for Git clones',
    defaultValue: '/var/cache/tollgate',
  },
  {
    key: 'auditRepo',
    flag: 'audit-repo',
    env: 'TOLLGATE_AUDIT_REPO',
    description:
      'audit Git repository URL (default: the policy repository; the policy settings never choose it)',
  },
  {
    key: 'auditBranch',
    flag: 'audit-branch',
    env: 'TOLLGATE_AUDIT_BRANCH',
    description: 'audit branch (default: tollgate/audit; the policy settings never choose it)',
  },
  {
    key: 'auditSigningKeyFile',
    flag: 'audit-signing-key-file',
    env: 'TOLLGATE_AUDIT_SIGNING_KEY_FILE',
    description:
      'unencrypted SSH ed25519 private key (a mounted Secret) that signs every audit commit; verify with tollgate audit verify --allowed-signers',
  },
  {
    key: 'identity',
    flag: 'identity',
    env: 'TOLLGATE_IDENTITY',
    description:
      'this replica in the lease and audit trailers (default: host name, i.e. the pod name)',
  },
  {
    key: 'metricsAddress',
    flag: 'metrics-address',
    env: 'TOLLGATE_METRICS_ADDRESS',
    description: 'listen address of /metrics, /healthz, /readyz',
    defaultValue: ':9090',
  },
  {
    key: 'leaseNamespace',
    flag: 'lease-namespace',
    env: 'TOLLGATE_LEASE_NAMESPACE',
    description: 'namespace of the leader Lease (default: POD_NAMESPACE, else tollgate-system)',
  },
  {
    key: 'leaseName',
    flag: 'lease-name',
    env: 'TOLLGATE_LEASE_NAME',
    description: 'name of the leader Lease',
    defaultValue: 'tollgate',
  },
  {
    key: 'leaseDuration',
    flag: 'lease-duration',
    env: 'TOLLGATE_LEASE_DURATION',
    description: 'lease duration (whole seconds)',
    defaultValue: '15s',
  },
  {
    key: 'renewDeadline',
    flag: 'renew-deadline',
    env: 'TOLLGATE_RENEW_DEADLINE',
    description: 'renew deadline',
    defaultValue: '10s',
  },
  {
    key: 'retryPeriod',
    flag: 'retry-period',
    env: 'TOLLGATE_RETRY_PERIOD',
    description: 'retry period',
    defaultValue: '2s',
  },
  {
    key: 'expirySweep',
    flag: 'expiry-sweep',
    env: 'TOLLGATE_EXPIRY_SWEEP',
    description: 'cron schedule (with seconds, UTC) of gate expiry sweeps',
    defaultValue: '*/15 * * * * *',
  },
  {
    key: 'policyResync',
    flag: 'policy-resync',
    env: 'TOLLGATE_POLICY_RESYNC',
    description: 'cron schedule (with seconds, UTC) of policy fetches',
    defaultValue: '*/30 * * * * *',
  },
  {
    key: 'auditFlush',
    flag: 'audit-flush',
    env: 'TOLLGATE_AUDIT_FLUSH',
    description: 'cron schedule (with seconds, UTC) of audit flushes',
    defaultValue: '*/10 * * * * *',
  },
  {
    key: 'shutdownTimeout',
    flag: 'shutdown-timeout',
    env: 'TOLLGATE_SHUTDOWN_TIMEOUT',
    description: 'longest a graceful shutdown may take before in-flight writes are cancelled',
    defaultValue: '20s',
  },
  {
    key: 'apiQps',
    flag: 'api-qps',
    env: 'TOLLGATE_API_QPS',
    description: 'API writes per second at most (dispatcher token bucket; burst is twice this)',
    defaultValue: '50',
  },
  {
    key: 'apiConcurrency',
    flag: 'api-concurrency',
    env: 'TOLLGATE_API_CONCURRENCY',
    description: 'API writes in flight at once',
    defaultValue: '8',
  },
  {
    key: 'writeMode',
    flag: 'write-mode',
    env: 'TOLLGATE_WRITE_MODE',
    description:
      'queue (the bounded priority queue) or sync (one write at a time, no backlog: the rollout switch)',
    defaultValue: 'queue',
  },
  {
    key: 'writeQueueCapacity',
    flag: 'write-queue-capacity',
    env: 'TOLLGATE_WRITE_QUEUE_CAPACITY',
    description:
      'writes queued plus in flight at most (the last 64, or a tenth, are kept for safety writes)',
    defaultValue: '1000',
  },
  {
    key: 'writeAging',
    flag: 'write-aging',
    env: 'TOLLGATE_WRITE_AGING',
    description: 'waiting this long raises a queued write one priority step (inside its band)',
    defaultValue: '5s',
  },
  {
    key: 'writeDeadline',
    flag: 'write-deadline',
    env: 'TOLLGATE_WRITE_DEADLINE',
    description:
      'a release waiting longer than this in the queue is dropped as expired (its loop decides again)',
    defaultValue: '60s',
  },
  {
    key: 'writeAttemptTimeout',
    flag: 'write-attempt-timeout',
    env: 'TOLLGATE_WRITE_ATTEMPT_TIMEOUT',
    description:
      'one API write attempt is aborted (read back, then retried) after this; must be shorter than --lease-duration minus --renew-deadline (the default shrinks to 80% of that margin when the lease is short)',
    defaultValue: '4s',
  },
  {
    key: 'writeRetryBase',
    flag: 'write-retry-base',
    env: 'TOLLGATE_WRITE_RETRY_BASE',
    description: 'first retry backoff of a write (doubling, jittered)',
    defaultValue: '200ms',
  },
  {
    key: 'writeRetryMax',
    flag: 'write-retry-max',
    env: 'TOLLGATE_WRITE_RETRY_MAX',
    description: 'longest retry backoff of a write',
    defaultValue: '10s',
  },
  {
    key: 'writeRetryAttempts',
    flag: 'write-retry-attempts',
    env: 'TOLLGATE_WRITE_RETRY_ATTEMPTS',
    description:
      'sends of one write at most, the first included (throttling, 429 or 503 with Retry-After, is not counted)',
    defaultValue: '6',
  },
  {
    key: 'writeRetryElapsed',
    flag: 'write-retry-elapsed',
    env: 'TOLLGATE_WRITE_RETRY_ELAPSED',
    description:
      'no retry later than this after the first send (throttled writes wait until their deadline instead)',
    defaultValue: '60s',
  },
  {
    key: 'writeFallback',
    flag: 'write-fallback',
    env: 'TOLLGATE_WRITE_FALLBACK',
    description:
      'on: fall back to synchronous writes when the API server looks unhealthy, and return by itself; off: never',
    defaultValue: 'on',
  },
  {
    key: 'writeFallbackQueueAge',
    flag: 'write-fallback-queue-age',
    env: 'TOLLGATE_WRITE_FALLBACK_QUEUE_AGE',
    description: 'fall back when the oldest unsent write has waited this long',
    defaultValue: '5m',
  },
  {
    key: 'writeFallbackFailureRatio',
    flag: 'write-fallback-failure-ratio',
    env: 'TOLLGATE_WRITE_FALLBACK_FAILURE_RATIO',
    description:
      'fall back when this share of the last 20 write attempts failed (429, 5xx, timeout, reset)',
    defaultValue: '0.5',
  },
  {
    key: 'writeFallbackTimeouts',
    flag: 'write-fallback-timeouts',
    env: 'TOLLGATE_WRITE_FALLBACK_TIMEOUTS',
    description: 'fall back after this many write attempts in a row without an answer',
    defaultValue: '5',
  },
  {
    key: 'staleLiveReadAfter',
    flag: 'stale-live-read-after',
    env: 'TOLLGATE_STALE_LIVE_READ_AFTER',
    description:
      'a pod the view stays behind on is skipped (each time after its own backoff) this many times in a row, then one live read decides',
    defaultValue: '5',
  },
  {
    key: 'rollbackStaleSkip',
    flag: 'rollback-stale-skip',
    env: 'TOLLGATE_ROLLBACK_STALE_SKIP',
    description:
      'on: a Rollback on a pod the view is behind on waits like any decision; off: it goes on one live read at once (stale skips still counted)',
    defaultValue: 'on',
  },
  {
    key: 'prometheusUrl',
    flag: 'prometheus-url',
    env: 'TOLLGATE_PROMETHEUS_URL',
    description:
      'Prometheus HTTP API for resize signals (default: the policy settings prometheus.url)',
  },
  {
    key: 'resizeInterval',
    flag: 'resize-interval',
    env: 'TOLLGATE_RESIZE_INTERVAL',
    description: 'time between two resize passes',
    defaultValue: '30s',
  },
  {
    key: 'resizeStateKeyFile',
    flag: 'resize-state-key-file',
    env: 'TOLLGATE_RESIZE_STATE_KEY_FILE',
    description:
      'secret keys (one per line, at least 32 characters; the first seals, all verify) that seal the resize state tollgate keeps on pods; without it state survives no restart',
  },
  {
    key: 'logLevel',
    flag: 'log-level',
    env: 'TOLLGATE_LOG_LEVEL',
    description: 'trace, debug, info, warn, error, fatal',
    defaultValue: 'info',
  },
] as const satisfies readonly RunSetting[];

export type RunSettingKey = (typeof runSettings)[number]['key'];
export type RawRunSettings = Partial<Record<RunSettingKey, string | undefined>>;

export type TokenLocation =
  | { readonly from: 'env'; readonly name: string }
  | { readonly from: 'file'; readonly path: string };

export interface RunConfig {
  /** Where the kubeconfig comes from (kubectl's order) and the context to use in it. */
  readonly cluster: { readonly source: LoadableSource; readonly context?: string };
  readonly policy:
    | { readonly source: 'git'; readonly url: string; readonly ref: string; readonly path: string }
    | { readonly source: 'dir'; readonly dir: string; readonly path: string };
  readonly git: {
    /** The read credential of the policy repository (and the audit's, without `auditToken`). */
    readonly token?: TokenLocation;
    /** The write credential of the audit repository, when separate. */
    readonly auditToken?: TokenLocation;
    /** Tokens may travel over plain http to non-loopback hosts (tests, trusted networks). */
    readonly allowInsecureHttp?: boolean;
    /** The deploy key of an SSH policy repository (and the audit's, without `auditSshKeyFile`). */
    readonly sshKeyFile?: string;
    /** The write deploy key of an SSH audit repository, when separate. */
    readonly auditSshKeyFile?: string;
    /** The known_hosts file SSH servers' host keys are checked against. */
    readonly sshKnownHostsFile?: string;
    /** SSH host keys not checked (the explicit insecure flag). */
    readonly sshInsecureIgnoreHostKey?: boolean;
    readonly cacheDir: string;
  };
  readonly audit: {
    readonly repo?: string;
    readonly branch?: string;
    /** Signs audit commits when set (src/audit/sign.ts). */
    readonly signingKeyFile?: string;
  };
  readonly identity: string;
  readonly metricsAddress: string;
  readonly lease: {
    readonly namespace: string;
    readonly name: string;
    readonly timings: LeaderTimings;
  };
  readonly schedules: {
    readonly expirySweep: string;
    readonly policyResync: string;
    readonly auditFlush: string;
  };
  readonly api: { readonly qps: number; readonly concurrency: number };
  /** The write dispatcher's knobs, validated together (src/dispatch/settings.ts). */
  readonly writes: DispatchSettings;
  /** The stale-guard's run knobs (the StalenessPolicy in Git holds the others). */
  readonly stale: {
    /** Consecutive stale skips of a pod before one live read decides. */
    readonly liveReadAfterSkips: number;
    /** False: a stale Rollback goes on one live read instead of waiting. */
    readonly skipRollback: boolean;
  };
  /** `prometheusUrl` overrides the policy settings' prometheus.url when set. */
  readonly resize: {
    readonly prometheusUrl?: string;
    readonly intervalMs: number;
    /** The file of keys that seal resize state (read at each leader term's start). */
    readonly stateKeyFile?: string;
  };
  readonly shutdownTimeoutMs: number;
  readonly logLevel: string;
}

export interface RunConfigContext {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly hostname: string;
  readonly isFile: (path: string) => boolean;
  readonly isDirectory: (path: string) => boolean;
}

export type RunConfigResult =
  | { readonly ok: true; readonly config: RunConfig }
  | { readonly ok: false; readonly problems: readonly string[] };

const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
/** RFC 1123 subdomain, what a Lease name and a namespace must be (namespaces: a label). */
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const dnsSubdomain =
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Reads one setting from its flag, else its variable, else its default, and collects
 * the problems found, each named by flag and variable.
 */
class SettingReader {
  readonly problems: string[] = [];
  readonly #flags: RawRunSettings;
  readonly #env: RunConfigContext['env'];
  readonly #settings = new Map<string, RunSetting>(runSettings.map((s) => [s.key, s]));

  constructor(flags: RawRunSettings, env: RunConfigContext['env']) {
    this.#flags = flags;
    this.#env = env;
  }

  /** `--flag / TOLLGATE_VARIABLE`, how every problem names its setting. */
  label(key: RunSettingKey): string {
    const setting = this.#settings.get(key)!;
    return `--${setting.flag} / ${setting.env}`;
  }

  /** The value given (trimmed), or undefined when neither flag nor variable is set. */
  raw(key: RunSettingKey): string | undefined {
    const setting = this.#settings.get(key)!;
    const value = this.#flags[key] ?? this.#env[setting.env];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  /** The value given, else the default. */
  value(key: RunSettingKey): string {
    return this.raw(key) ?? this.#settings.get(key)!.defaultValue ?? '';
  }

  problem(key: RunSettingKey, reason: string): void {
    this.problems.push(`${this.label(key)}: ${reason}`);
  }

  /** A duration in ms; NaN (and a problem) when it does not parse. */
  duration(key: RunSettingKey): number {
    try {
      return parseDuration(this.value(key));
    } catch (error) {
      this.problem(key, (error as Error).message);
      return Number.NaN;
    }
  }
}

/**
 * The whole configuration, one concern after the other; every problem of every concern
 * is reported together (in this order), and a config is returned only when there is none.
 */
export function parseRunConfig(flags: RawRunSettings, context: RunConfigContext): RunConfigResult {
  const read = new SettingReader(flags, context.env);
  const cluster = parseClusterAccess(read, context);
  const policy = parsePolicySource(read, context);
  const git = parseGitAccess(read, context, policy);
  const audit = parseAuditTarget(read, context);
  checkCredentialTransport(read, policy, git, audit);
  checkSshRemotes(read, policy, git, audit);
  const identity = parseIdentity(read, context);
  const metricsAddress = parseMetricsAddress(read);
  const lease = parseLease(read, context);
  const schedules = parseSchedules(read);
  const shutdownTimeoutMs = read.duration('shutdownTimeout');
  const api = parseApiLimits(read);
  const writes = parseWrites(read, api, lease.timings);
  const stale = parseStale(read);
  const resize = parseResize(read, context);
  const logLevel = parseLogLevel(read);
  if (read.problems.length > 0 || policy === undefined) {
    return { ok: false, problems: read.problems };
  }
  return {
    ok: true,
    config: {
      cluster,
      policy,
      git,
      audit,
      identity,
      metricsAddress,
      lease,
      schedules,
      api,
      writes,
      stale,
      resize,
      shutdownTimeoutMs,
      logLevel,
    },
  };
}

/**
 * The cluster, found as kubectl finds it (src/cluster/kubeconfig.ts): --kubeconfig, else
 * the files $KUBECONFIG lists, else ~/.kube/config, else the pod's service account; the
 * context from --kube-context (or --context), looked up when the files are loaded.
 */
function parseClusterAccess(read: SettingReader, context: RunConfigContext): RunConfig['cluster'] {
  const kubeconfig = read.raw('kubeconfig');
  const kubeContext = read.raw('kubeContext');
  const inCluster: RunConfig['cluster'] = { source: { kind: 'in-cluster' } };
  if (kubeconfig !== undefined && !context.isFile(kubeconfig)) {
    read.problem('kubeconfig', `"${kubeconfig}" is not a readable file`);
    return inCluster;
  }
  const source = kubeconfigSource({ kubeconfig }, context.env, context.isFile);
  switch (source.kind) {
    case 'files':
      return { source, context: kubeContext };
    case 'in-cluster':
      if (kubeContext !== undefined)
        read.problem(
          'kubeContext',
          'only applies with --kubeconfig, $KUBECONFIG or ~/.kube/config',
        );
      return inCluster;
    case 'missing':
      read.problem('kubeconfig', `not set, and ${source.reason}`);
      return inCluster;
    case 'absent':
      read.problem(
        'kubeconfig',
        'not set, and this is not a pod (KUBERNETES_SERVICE_HOST or the service account token is missing), with no $KUBECONFIG and no ~/.kube/config: give a kubeconfig path (or set KUBECONFIG)',
      );
      return inCluster;
  }
}

/** Exactly one of a repository and a folder; undefined when neither or both. */
function parsePolicySource(
  read: SettingReader,
  context: RunConfigContext,
): RunConfig['policy'] | undefined {
  const policyRepo = read.raw('policyRepo');
  const policyDir = read.raw('policyDir');
  const policyPath = read.value('policyPath');
  if (policyPath.startsWith('/') || policyPath.split('/').includes('..')) {
    read.problem(
      'policyPath',
      `"${policyPath}" must be a relative path inside the repository, without ".."`,
    );
  }
  if (policyRepo !== undefined && policyDir !== undefined) {
    read.problems.push(
      `${read.label('policyRepo')} and ${read.label('policyDir')}: give one policy source, not both`,
    );
    return undefined;
  }
  if (policyRepo !== undefined) {
    if (!isHttpUrl(policyRepo) && !isSshUrl(policyRepo))
      read.problem('policyRepo', `"${redact(policyRepo)}" is not an http(s) or SSH URL`);
    else if (hasCredentials(policyRepo))
      read.problem(
        'policyRepo',
        'must not carry credentials in the URL; use --git-token-env or --git-token-file',
      );
    const ref = read.value('policyRef');
    if (!/^[\w./-]+$/.test(ref) || ref.includes('..'))
      read.problem('policyRef', `"${ref}" is not a branch or tag name`);
    return { source: 'git', url: policyRepo, ref, path: policyPath };
  }
  if (policyDir !== undefined) {
    if (!context.isDirectory(policyDir))
      read.problem('policyDir', `"${policyDir}" is not a folder`);
    return { source: 'dir', dir: policyDir, path: policyPath };
  }
  read.problems.push(
    `${read.label('policyRepo')} or ${read.label('policyDir')}: a policy source is required`,
  );
  return undefined;
}

/** The Git tokens (each a variable or a file, not both) and the clone cache folder. */
function parseGitAccess(
  read: SettingReader,
  context: RunConfigContext,
  policy: RunConfig['policy'] | undefined,
): RunConfig['git'] {
  const token = parseTokenLocation(read, context, 'gitTokenEnv', 'gitTokenFile');
  const auditToken = parseTokenLocation(read, context, 'auditTokenEnv', 'auditTokenFile');
  const insecure = read.value('allowInsecureHttp');
  if (insecure !== 'true' && insecure !== 'false')
    read.problem('allowInsecureHttp', `"${insecure}" is not true or false`);
  const usesGit = policy?.source === 'git' || read.raw('auditRepo') !== undefined;
  const cacheDir = read.value('gitCacheDir');
  if (usesGit && !cacheDir.startsWith('/'))
    read.problem('gitCacheDir', `"${cacheDir}" must be an absolute path`);
  return {
    ...(token ? { token } : {}),
    ...(auditToken ? { auditToken } : {}),
    allowInsecureHttp: insecure === 'true',
    ...parseSshAccess(read, context),
    cacheDir,
  };
}

/** The SSH deploy keys and known_hosts file, each a readable file when given. */
function parseSshAccess(
  read: SettingReader,
  context: RunConfigContext,
): Pick<
  RunConfig['git'],
  'sshKeyFile' | 'auditSshKeyFile' | 'sshKnownHostsFile' | 'sshInsecureIgnoreHostKey'
> {
  const files = {
    sshKeyFile: read.raw('gitSshKeyFile'),
    auditSshKeyFile: read.raw('auditSshKeyFile'),
    sshKnownHostsFile: read.raw('gitSshKnownHosts'),
  };
  const keys = {
    sshKeyFile: 'gitSshKeyFile',
    auditSshKeyFile: 'auditSshKeyFile',
    sshKnownHostsFile: 'gitSshKnownHosts',
  } as const;
  for (const [name, path] of Object.entries(files) as [keyof typeof keys, string | undefined][])
    if (path !== undefined && !context.isFile(path))
      read.problem(keys[name], `"${path}" is not a readable file`);
  const insecure = read.value('gitSshInsecureIgnoreHostKey');
  if (insecure !== 'true' && insecure !== 'false')
    read.problem('gitSshInsecureIgnoreHostKey', `"${insecure}" is not true or false`);
  return {
    ...Object.fromEntries(Object.entries(files).filter(([, path]) => path !== undefined)),
    ...(insecure === 'true' ? { sshInsecureIgnoreHostKey: true } : {}),
  };
}

/**
 * An SSH policy or audit repository needs its deploy key, and a known_hosts file unless
 * the operator turned host key checking off by the explicit insecure flag.
 */
function checkSshRemotes(
  read: SettingReader,
  policy: RunConfig['policy'] | undefined,
  git: RunConfig['git'],
  audit: RunConfig['audit'],
): void {
  const policySsh = policy?.source === 'git' && isSshUrl(policy.url);
  const auditSsh = audit.repo === undefined ? policySsh : isSshUrl(audit.repo);
  if (policySsh && git.sshKeyFile === undefined)
    read.problem('policyRepo', 'an SSH URL needs a deploy key: set --git-ssh-key-file');
  if (auditSsh && audit.repo !== undefined && (git.auditSshKeyFile ?? git.sshKeyFile) === undefined)
    read.problem(
      'auditRepo',
      'an SSH URL needs a deploy key: set --audit-ssh-key-file or --git-ssh-key-file',
    );
  if ((policySsh || auditSsh) && !git.sshKnownHostsFile && !git.sshInsecureIgnoreHostKey)
    read.problem(
      'gitSshKnownHosts',
      'SSH remotes need a known_hosts file with the servers host keys (or, never in production, --git-ssh-insecure-ignore-host-key true)',
    );
}

function parseTokenLocation(
  read: SettingReader,
  context: RunConfigContext,
  envKey: 'gitTokenEnv' | 'auditTokenEnv',
  fileKey: 'gitTokenFile' | 'auditTokenFile',
): TokenLocation | undefined {
  const tokenEnv = read.raw(envKey);
  const tokenFile = read.raw(fileKey);
  if (tokenEnv !== undefined && tokenFile !== undefined) {
    read.problems.push(
      `${read.label(envKey)} and ${read.label(fileKey)}: give one token source, not both`,
    );
    return undefined;
  }
  if (tokenEnv !== undefined) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(tokenEnv))
      read.problem(envKey, `"${tokenEnv}" is not an environment variable name`);
    else if (!context.env[tokenEnv])
      read.problem(envKey, `the variable ${tokenEnv} is not set or empty`);
    return { from: 'env', name: tokenEnv };
  }
  if (tokenFile !== undefined) {
    if (!context.isFile(tokenFile)) read.problem(fileKey, `"${tokenFile}" is not a readable file`);
    return { from: 'file', path: tokenFile };
  }
  return undefined;
}

/**
 * Credentials never travel over plain http to a host off this machine unless the
 * operator says so: the policy repository with the Git token, the audit repository
 * with the audit token (or the Git token when there is no separate one).
 */
function checkCredentialTransport(
  read: SettingReader,
  policy: RunConfig['policy'] | undefined,
  git: RunConfig['git'],
  audit: RunConfig['audit'],
): void {
  if (policy?.source === 'git' && git.token) {
    const problem = plainHttpProblem(policy.url, git.allowInsecureHttp === true);
    if (problem) read.problem('policyRepo', problem);
  }
  const auditUrl = audit.repo ?? (policy?.source === 'git' ? policy.url : undefined);
  if (auditUrl !== undefined && (git.auditToken ?? git.token) && audit.repo !== undefined) {
    const problem = plainHttpProblem(auditUrl, git.allowInsecureHttp === true);
    if (problem) read.problem('auditRepo', problem);
  }
}

/** The audit repository and branch, when given here rather than in the policy settings. */
function parseAuditTarget(read: SettingReader, context: RunConfigContext): RunConfig['audit'] {
  const auditRepo = read.raw('auditRepo');
  if (auditRepo !== undefined) {
    if (!isHttpUrl(auditRepo) && !isSshUrl(auditRepo))
      read.problem('auditRepo', `"${redact(auditRepo)}" is not an http(s) or SSH URL`);
    else if (hasCredentials(auditRepo))
      read.problem(
        'auditRepo',
        'must not carry credentials in the URL; use --audit-token-env or --audit-token-file',
      );
  }
  const auditBranch = read.raw('auditBranch');
  if (
    auditBranch !== undefined &&
    (!/^[\w./-]+$/.test(auditBranch) || auditBranch.includes('..') || auditBranch.endsWith('/'))
  ) {
    read.problem('auditBranch', `"${auditBranch}" is not a branch name`);
  }
  const signingKeyFile = read.raw('auditSigningKeyFile');
  if (signingKeyFile !== undefined && !context.isFile(signingKeyFile))
    read.problem('auditSigningKeyFile', `"${signingKeyFile}" is not a readable file`);
  return {
    repo: auditRepo,
    branch: auditBranch,
    ...(signingKeyFile === undefined ? {} : { signingKeyFile }),
  };
}

/** This replica's name in the lease and the audit trailers: the flag, else the host name. */
function parseIdentity(read: SettingReader, context: RunConfigContext): string {
  const identity = read.raw('identity') ?? context.hostname;
  if (!identity) read.problem('identity', 'not set and the host name is empty');
  else if (identity.length > 253 || /\s/.test(identity))
    read.problem('identity', `"${identity}" must be at most 253 characters without spaces`);
  return identity;
}

function parseMetricsAddress(read: SettingReader): string {
  const metricsAddress = read.value('metricsAddress');
  try {
    parseListenAddress(metricsAddress);
  } catch (error) {
    read.problem('metricsAddress', (error as Error).message);
  }
  return metricsAddress;
}

/** The leader Lease's place and name, and timings that hold together. */
function parseLease(read: SettingReader, context: RunConfigContext): RunConfig['lease'] {
  const namespace = read.raw('leaseNamespace') ?? context.env.POD_NAMESPACE ?? 'tollgate-system';
  if (!dnsLabel.test(namespace))
    read.problem('leaseNamespace', `"${namespace}" is not a namespace name`);
  const name = read.value('leaseName');
  if (!dnsSubdomain.test(name)) read.problem('leaseName', `"${name}" is not a valid object name`);
  const timings: LeaderTimings = {
    leaseDurationMs: read.duration('leaseDuration'),
    renewDeadlineMs: read.duration('renewDeadline'),
    retryPeriodMs: read.duration('retryPeriod'),
  };
  if (Object.values(timings).every(Number.isFinite)) {
    for (const reason of leaderTimingProblems(timings)) {
      read.problems.push(
        `${read.label('leaseDuration')}, ${read.label('renewDeadline')}, ${read.label('retryPeriod')}: ${reason}`,
      );
    }
  }
  return { namespace, name, timings };
}

/** The cron sweeps, each a valid expression (with seconds), read in UTC. */
function parseSchedules(read: SettingReader): RunConfig['schedules'] {
  const schedule = (key: 'expirySweep' | 'policyResync' | 'auditFlush'): string => {
    const expression = read.value(key);
    const problem = sweepScheduleProblem(expression);
    if (problem !== undefined)
      read.problem(key, `"${expression}" is not a cron expression (${problem})`);
    return expression;
  };
  return {
    expirySweep: schedule('expirySweep'),
    policyResync: schedule('policyResync'),
    auditFlush: schedule('auditFlush'),
  };
}

/** The dispatcher's write rate and concurrency, both positive. */
function parseApiLimits(read: SettingReader): RunConfig['api'] {
  const positive = (key: 'apiQps' | 'apiConcurrency', integer: boolean): number => {
    const text = read.value(key);
    const number = Number(text);
    if (!Number.isFinite(number) || number <= 0 || (integer && !Number.isInteger(number))) {
      read.problem(key, `"${text}" must be a positive ${integer ? 'integer' : 'number'}`);
    }
    return number;
  };
  return { qps: positive('apiQps', false), concurrency: positive('apiConcurrency', true) };
}

/** The value at a dotted path ("retry.baseMs") of the dispatcher input. */
function valueAt(input: object, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>((at, part) => (at as Record<string, unknown> | undefined)?.[part], input);
}

/** Which run setting each dispatcher field comes from, so its problems name the flag. */
const writeSettingOf: Readonly<Record<string, RunSettingKey>> = {
  mode: 'writeMode',
  capacity: 'writeQueueCapacity',
  safetyReserve: 'writeQueueCapacity',
  agingMs: 'writeAging',
  writeDeadlineMs: 'writeDeadline',
  attemptTimeoutMs: 'writeAttemptTimeout',
  'retry.baseMs': 'writeRetryBase',
  'retry.maxMs': 'writeRetryMax',
  'retry.maxAttempts': 'writeRetryAttempts',
  'retry.maxElapsedMs': 'writeRetryElapsed',
  'fallback.enabled': 'writeFallback',
  'fallback.maxQueueAgeMs': 'writeFallbackQueueAge',
  'fallback.maxFailureRatio': 'writeFallbackFailureRatio',
  'fallback.maxConsecutiveTimeouts': 'writeFallbackTimeouts',
};

/**
 * The write dispatcher's knobs, checked by the dispatcher's own validation
 * (dispatchSettings) so the two never disagree; each problem names its flag. The fence
 * margin comes from the lease timings: an attempt must end before another replica can
 * lead (lease duration minus renew deadline).
 */
function parseWrites(
  read: SettingReader,
  api: RunConfig['api'],
  timings: LeaderTimings,
): DispatchSettings {
  const number = (key: RunSettingKey): number => Number(read.value(key));
  const fenceMarginMs = Math.max(0, timings.leaseDurationMs - timings.renewDeadlineMs) || 0;
  const fallback = read.value('writeFallback');
  if (fallback !== 'on' && fallback !== 'off')
    read.problem('writeFallback', `"${fallback}" must be on or off`);
  const input = {
    mode: read.value('writeMode') as DispatchSettings['mode'],
    capacity: number('writeQueueCapacity'),
    concurrency: api.concurrency,
    qps: api.qps,
    burst: api.qps * 2,
    agingMs: read.duration('writeAging'),
    writeDeadlineMs: read.duration('writeDeadline'),
    attemptTimeoutMs:
      read.raw('writeAttemptTimeout') === undefined && fenceMarginMs > 0
        ? Math.min(read.duration('writeAttemptTimeout'), Math.floor(fenceMarginMs * 0.8))
        : read.duration('writeAttemptTimeout'),
    fenceMarginMs,
    retry: {
      baseMs: read.duration('writeRetryBase'),
      maxMs: read.duration('writeRetryMax'),
      maxAttempts: number('writeRetryAttempts'),
      maxElapsedMs: read.duration('writeRetryElapsed'),
    },
    fallback: {
      enabled: fallback === 'on',
      maxQueueAgeMs: read.duration('writeFallbackQueueAge'),
      maxFailureRatio: number('writeFallbackFailureRatio'),
      maxConsecutiveTimeouts: number('writeFallbackTimeouts'),
    },
  };
  try {
    return dispatchSettings(input);
  } catch (error) {
    for (const line of (error as Error).message.split('\n').slice(1)) {
      const [field = '', ...reason] = line.trim().split(': ');
      const key = writeSettingOf[field];
      // A duration that did not parse was reported already, by read.duration.
      const durationAlreadyReported = field.endsWith('Ms') && Number.isNaN(valueAt(input, field));
      if (key && !durationAlreadyReported)
        read.problem(key, reason.join(': ').replace(/got null$/, `got "${read.value(key)}"`));
      else if (!['qps', 'burst', 'concurrency', 'fenceMarginMs'].includes(field))
        read.problems.push(line.trim());
    }
    return dispatchSettings();
  }
}

/** The stale-guard's run knobs, checked by the guard's own rule. */
function parseStale(read: SettingReader): RunConfig['stale'] {
  const text = read.value('staleLiveReadAfter');
  const liveReadAfterSkips = Number(text);
  const problem = liveReadAfterSkipsProblem(liveReadAfterSkips);
  if (problem) read.problem('staleLiveReadAfter', `"${text}": ${problem.replace(/, got .*$/, '')}`);
  const skip = read.value('rollbackStaleSkip');
  if (skip !== 'on' && skip !== 'off')
    read.problem('rollbackStaleSkip', `"${skip}" must be on or off`);
  return { liveReadAfterSkips, skipRollback: skip !== 'off' };
}

/**
 * A Prometheus that is not an http(s) URL would only fail at the first pass, after the
 * lease is taken; a pass interval under a second would hammer Prometheus.
 */
function parseResize(read: SettingReader, context: RunConfigContext): RunConfig['resize'] {
  const prometheusUrl = read.raw('prometheusUrl');
  if (prometheusUrl !== undefined && !isHttpUrl(prometheusUrl))
    read.problem('prometheusUrl', `"${redact(prometheusUrl)}" is not an http(s) URL`);
  const intervalMs = read.duration('resizeInterval');
  if (Number.isFinite(intervalMs) && intervalMs < 1000)
    read.problem('resizeInterval', `"${read.value('resizeInterval')}" must be at least 1s`);
  const stateKeyFile = read.raw('resizeStateKeyFile');
  if (stateKeyFile !== undefined && !context.isFile(stateKeyFile))
    read.problem('resizeStateKeyFile', `"${stateKeyFile}" is not a readable file`);
  return {
    ...(prometheusUrl === undefined ? {} : { prometheusUrl }),
    intervalMs,
    ...(stateKeyFile === undefined ? {} : { stateKeyFile }),
  };
}

function parseLogLevel(read: SettingReader): string {
  const logLevel = read.value('logLevel');
  if (!logLevels.includes(logLevel))
    read.problem('logLevel', `"${logLevel}" is not one of ${logLevels.join(', ')}`);
  return logLevel;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** A password or token in an http(s) URL (an SSH URL's user, e.g. "git", is no secret). */
function hasCredentials(text: string): boolean {
  if (isSshUrl(text)) return false;
  const url = new URL(text);
  return url.username !== '' || url.password !== '';
}

function redact(text: string): string {
  if (isSshUrl(text)) return text;
  return text.replace(/\/\/[^@/]*@/, '//[redacted]@');
}
