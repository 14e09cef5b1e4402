import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseRunConfig,
  type RawRunSettings,
  type RunConfigContext,
} from '../../../src/cli/run-config.ts';

const files = new Set([
  '/home/me/.kube/config',
  '/var/run/secrets/kubernetes.io/serviceaccount/token',
  '/secrets/git-token',
]);
const dirs = new Set(['/policy']);
const context = (env: Record<string, string> = {}): RunConfigContext => ({
  env,
  hostname: 'tollgate-7d9f-abcde',
  isFile: (path) => files.has(path),
  isDirectory: (path) => dirs.has(path),
});
const minimal: RawRunSettings = {
  kubeconfig: '/home/me/.kube/config',
  policyRepo: 'https://git.example/platform/policy.git',
};

function problemsOf(flags: RawRunSettings, env: Record<string, string> = {}): string[] {
  const result = parseRunConfig(flags, context(env));
  return result.ok ? [] : [...result.problems];
}

describe('tollgate run configuration', () => {
  it('a kubeconfig and a policy repository are enough; everything else has a default', () => {
    const result = parseRunConfig(minimal, context());
    assert.ok(result.ok);
    assert.deepEqual(result.config, {
      cluster: {
        source: {
          kind: 'files',
          files: ['/home/me/.kube/config'],
          origin: 'kubeconfig /home/me/.kube/config',
        },
        context: undefined,
      },
      policy: {
        source: 'git',
        url: 'https://git.example/platform/policy.git',
        ref: 'main',
        path: '',
      },
      git: { allowInsecureHttp: false, cacheDir: '/var/cache/tollgate' },
      audit: { repo: undefined, branch: undefined },
      identity: 'tollgate-7d9f-abcde',
      metricsAddress: ':9090',
      lease: {
        namespace: 'tollgate-system',
        name: 'tollgate',
        timings: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
      },
      schedules: {
        expirySweep: '*/15 * * * * *',
        policyResync: '*/30 * * * * *',
        auditFlush: '*/10 * * * * *',
      },
      api: { qps: 50, concurrency: 8 },
      writes: {
        mode: 'queue',
        capacity: 1000,
        safetyReserve: 64,
        concurrency: 8,
        qps: 50,
        burst: 100,
        agingMs: 5_000,
        retry: {
          baseMs: 200,
          maxMs: 10_000,
          maxAttempts: 6,
          maxElapsedMs: 60_000,
          maxForbiddenAttempts: 5,
        },
        writeDeadlineMs: 60_000,
        attemptTimeoutMs: 4_000,
        fenceMarginMs: 5_000,
        fallback: {
          enabled: true,
          maxQueueAgeMs: 300_000,
          maxFailureRatio: 0.5,
          windowAttempts: 20,
          maxConsecutiveTimeouts: 5,
          minDegradedMs: 30_000,
          recoverySuccesses: 10,
        },
      },
      stale: { liveReadAfterSkips: 5, skipRollback: true },
      resize: { intervalMs: 30_000 },
      shutdownTimeoutMs: 20_000,
      logLevel: 'info',
    });
  });

  it('environment variables configure what flags do not, and flags win', () => {
    const result = parseRunConfig(
      { ...minimal, leaseName: 'from-flag' },
      context({
        TOLLGATE_LEASE_NAME: 'from-env',
        TOLLGATE_IDENTITY: 'replica-1',
        TOLLGATE_POLICY_REF: 'release',
        TOLLGATE_LEASE_DURATION: '6s',
        TOLLGATE_RENEW_DEADLINE: '4s',
        TOLLGATE_RETRY_PERIOD: '1s',
        POD_NAMESPACE: 'platform',
      }),
    );
    assert.ok(result.ok);
    assert.equal(result.config.lease.name, 'from-flag');
    assert.equal(result.config.lease.namespace, 'platform');
    assert.equal(result.config.identity, 'replica-1');
    assert.deepEqual(result.config.policy, {
      source: 'git',
      url: minimal.policyRepo,
      ref: 'release',
      path: '',
    });
    assert.deepEqual(result.config.lease.timings, {
      leaseDurationMs: 6000,
      renewDeadlineMs: 4000,
      retryPeriodMs: 1000,
    });
  });

  it('a Prometheus URL and a resize interval may be given for the resize loop', () => {
    const result = parseRunConfig(
      { ...minimal, resizeInterval: '5s' },
      context({ TOLLGATE_PROMETHEUS_URL: 'http://127.0.0.1:9091' }),
    );
    assert.ok(result.ok);
    assert.deepEqual(result.config.resize, {
      prometheusUrl: 'http://127.0.0.1:9091',
      intervalMs: 5000,
    });
  });

  it('$KUBECONFIG, like kubectl, when neither --kubeconfig nor TOLLGATE_KUBECONFIG is given', () => {
    const result = parseRunConfig(
      { policyDir: '/policy', kubeContext: 'staging' },
      context({ KUBECONFIG: '/home/me/.kube/config', KUBERNETES_SERVICE_HOST: '10.0.0.1' }),
    );
    assert.ok(result.ok);
    assert.deepEqual(result.config.cluster, {
      source: {
        kind: 'files',
        files: ['/home/me/.kube/config'],
        origin: 'KUBECONFIG=/home/me/.kube/config',
      },
      context: 'staging',
    });
  });

  it('inside a pod no kubeconfig is needed', () => {
    const result = parseRunConfig(
      { policyDir: '/policy' },
      context({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }),
    );
    assert.ok(result.ok);
    assert.deepEqual(result.config.cluster, { source: { kind: 'in-cluster' } });
  });

  const refused: {
    name: string;
    flags: RawRunSettings;
    env?: Record<string, string>;
    problem: RegExp;
  }[] = [
    {
      name: 'no kubeconfig outside a pod',
      flags: { policyDir: '/policy' },
      problem: /^--kubeconfig \/ TOLLGATE_KUBECONFIG: not set, and this is not a pod/,
    },
    {
      name: 'a kubeconfig that is not a file',
      flags: { ...minimal, kubeconfig: '/nope' },
      problem: /--kubeconfig .*"\/nope" is not a readable file/,
    },
    {
      name: 'no policy source',
      flags: { kubeconfig: minimal.kubeconfig },
      problem: /--policy-repo .* or --policy-dir .*: a policy source is required/,
    },
    {
      name: 'two policy sources',
      flags: { ...minimal, policyDir: '/policy' },
      problem: /give one policy source, not both/,
    },
    {
      name: 'a policy repository that is neither http nor SSH',
      flags: { ...minimal, policyRepo: 'ftp://host/x.git' },
      problem: /--policy-repo .* is not an http\(s\) or SSH URL/,
    },
    {
      name: 'a token inside the repository URL',
      flags: { ...minimal, policyRepo: 'https://x:secret@git.example/p.git' },
      problem: /must not carry credentials/,
    },
    {
      name: 'a sub-path leaving the repository',
      flags: { ...minimal, policyPath: '../etc' },
      problem: /--policy-path .* must be a relative path/,
    },
    {
      name: 'a token variable that is not set',
      flags: { ...minimal, gitTokenEnv: 'GIT_TOKEN' },
      problem: /--git-token-env .*: the variable GIT_TOKEN is not set or empty/,
    },
    {
      name: 'a token file that does not exist',
      flags: { ...minimal, gitTokenFile: '/secrets/nope' },
      problem: /--git-token-file .* is not a readable file/,
    },
    {
      name: 'two token sources',
      flags: { ...minimal, gitTokenEnv: 'T', gitTokenFile: '/secrets/git-token' },
      env: { T: 'x' },
      problem: /give one token source, not both/,
    },
    {
      name: 'a bad metrics address',
      flags: { ...minimal, metricsAddress: '9090' },
      problem: /--metrics-address .* is not a listen address/,
    },
    {
      name: 'a lease name with capitals',
      flags: { ...minimal, leaseName: 'Tollgate' },
      problem: /--lease-name .* is not a valid object name/,
    },
    {
      name: 'a lease duration that is not a duration',
      flags: { ...minimal, leaseDuration: 'soon' },
      problem: /--lease-duration .* "soon" is not a duration/,
    },
    {
      name: 'a renew deadline not under the lease duration',
      flags: { ...minimal, renewDeadline: '20s' },
      problem: /leaseDuration \(15000ms\) must be greater than renewDeadline/,
    },
    {
      name: 'a cron schedule that does not parse',
      flags: { ...minimal, expirySweep: 'every minute' },
      problem: /--expiry-sweep .* is not a cron expression/,
    },
    {
      name: 'a fractional write concurrency',
      flags: { ...minimal, apiConcurrency: '2.5' },
      problem: /--api-concurrency .* "2\.5" must be a positive integer/,
    },
    {
      name: 'a negative write rate',
      flags: { ...minimal, apiQps: '-1' },
      problem: /--api-qps .* "-1" must be a positive number/,
    },
    {
      name: 'a Prometheus URL that is not http',
      flags: { ...minimal, prometheusUrl: 'prometheus:9090' },
      problem:
        /--prometheus-url \/ TOLLGATE_PROMETHEUS_URL: "prometheus:9090" is not an http\(s\) URL/,
    },
    {
      name: 'a resize interval under a second',
      flags: { ...minimal, resizeInterval: '200ms' },
      problem: /--resize-interval .* "200ms" must be at least 1s/,
    },
    {
      name: 'a resize state key file that is not there',
      flags: { ...minimal, resizeStateKeyFile: '/nope/keys' },
      problem: /--resize-state-key-file .* "\/nope\/keys" is not a readable file/,
    },
    {
      name: 'an unknown log level',
      flags: { ...minimal, logLevel: 'loud' },
      problem: /--log-level .* "loud" is not one of trace/,
    },
    {
      name: 'a $KUBECONFIG that lists no file that exists',
      flags: { policyDir: '/policy' },
      env: { KUBECONFIG: '/nope:/other' },
      problem: /--kubeconfig .*: not set, and KUBECONFIG=\/nope:\/other: no such file/,
    },
    {
      name: 'a context without a kubeconfig',
      flags: { policyDir: '/policy', kubeContext: 'x' },
      env: { KUBERNETES_SERVICE_HOST: 'h' },
      problem: /--kube-context .* only applies with --kubeconfig/,
    },
  ];
  for (const { name, flags, env, problem } of refused) {
    it(`refuses ${name}, naming the flag and the variable`, () => {
      const problems = problemsOf(flags, env);
      assert.ok(
        problems.some((p) => problem.test(p)),
        `expected a problem matching ${problem}, got:\n${problems.join('\n')}`,
      );
    });
  }

  it('reports every problem at once, not only the first', () => {
    const problems = problemsOf({
      kubeconfig: '/nope',
      policyRepo: 'ftp://x',
      logLevel: 'loud',
      metricsAddress: 'x',
    });
    assert.equal(problems.length, 4, problems.join('\n'));
  });

  it('never prints a token found in a repository URL', () => {
    const problems = problemsOf({ ...minimal, auditRepo: 'ssh://user:hunter2@git.example/a.git' });
    assert.ok(problems.length > 0);
    assert.ok(
      problems.every((p) => !p.includes('hunter2')),
      problems.join('\n'),
    );
  });
});
