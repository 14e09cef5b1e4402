/**
 * The gate-release controller as its own process, so the e2e can SIGKILL it mid-release
 * and start another. Runs the real stack (test/support/gate-release-stack.ts): policy from
 * Git, the live ClusterView as the identity of the kubeconfig (tollgate, so RBAC from
 * deploy/ applies), the dispatcher (src/dispatch/queue.ts), the stale-guard, the event
 * recorder, the Git audit writer in strict mode with start-up recovery of open intents,
 * and the gate-release loop.
 *
 * Config: env TOLLGATE_E2E_CONTROLLER, JSON
 *   { kubeconfig, policyUrl, auditUrl, token, cacheDir, controller, debounceMs?, budgetRampMs? }
 * Prints one JSON line `{"ready":true}` to stdout once the view is synced and the loop runs;
 * exits 0 after SIGTERM once writes and the audit are flushed.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger } from '../../../src/observe/log.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { startGateReleaseStack } from '../../support/gate-release-stack.ts';

interface Config {
  kubeconfig: string;
  policyUrl: string;
  auditUrl: string;
  token: string;
  cacheDir: string;
  controller: string;
  debounceMs?: number;
  budgetRampMs?: number;
}

const config = JSON.parse(process.env.TOLLGATE_E2E_CONTROLLER ?? '') as Config;
const log = createLogger({
  name: config.controller,
  level: process.env.TOLLGATE_LOG_LEVEL ?? 'warn',
});

const kc = new KubeConfig();
kc.loadFromFile(config.kubeconfig);

const stack = await startGateReleaseStack({
  kubeConfig: kc,
  policyUrl: config.policyUrl,
  auditUrl: config.auditUrl,
  token: config.token,
  cacheDir: config.cacheDir,
  controller: config.controller,
  cluster: 'e2e',
  auditMode: 'strict',
  log,
  policyIntervalMs: 300,
  dispatcher: { capacity: 3000, concurrency: 16, qps: 300, burst: 300 },
  recoverIntents: true,
  ...(config.debounceMs !== undefined ? { debounceMs: config.debounceMs } : {}),
  ...(config.budgetRampMs !== undefined ? { budgetRampMs: config.budgetRampMs } : {}),
});
process.stdout.write(
  `${JSON.stringify({ ready: true, pid: process.pid, dispatcher: 'src/dispatch/queue.ts', recovered: stack.recovered })}\n`,
);

process.on('SIGTERM', () => {
  void (async () => {
    await stack.stop();
    // The loop's own metrics, for the test to compare with the audit trail and the cluster.
    process.stdout.write(
      `${JSON.stringify({ stopped: true, metrics: await registry.metrics() })}\n`,
    );
    process.exit(0);
  })();
});
