/**
 * The gate-release controller as its own process, so the e2e can SIGKILL it mid-release
 * and start another. Wires the real parts: the policy source (Git), the live ClusterView
 * (tollgate identity, so RBAC from deploy/ applies), the write executor, the dispatcher
 * (src/dispatch/queue.ts),
 * the stale-guard, the event recorder, the Git audit writer in strict mode with start-up
 * recovery of open intents, and the gate-release loop.
 *
 * Config: env TOLLGATE_E2E_CONTROLLER, JSON
 *   { kubeconfig, policyUrl, auditUrl, token, cacheDir, controller, debounceMs?, budgetRampMs? }
 * Prints one JSON line `{"ready":true}` to stdout once the view is synced and the loop runs;
 * exits 0 after SIGTERM once writes and the audit are flushed.
 */
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { createClusterView } from '../../../src/cluster/view.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import type { ObjectReference } from '../../../src/cluster/types.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { createLogger } from '../../../src/observe/log.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { createEventRecorder } from '../../../src/cluster/events.ts';
import { PolicySource } from '../../../src/policy/source.ts';
import type { Dispatcher } from '../../../src/dispatch/types.ts';
import { openAuditSource } from '../../../src/audit/reader.ts';
import { recoverGateReleaseIntents } from '../../../src/loops/gate-release-recovery.ts';
import { systemClock } from '../../../src/lib/clock.ts';
import { createDispatcher } from '../../../src/dispatch/queue.ts';

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

const policies = new PolicySource({
  location: config.policyUrl,
  token: config.token,
  cacheDir: `${config.cacheDir}/policy`,
  intervalMs: 300,
  logger: log,
});
const first = await policies.start();
if (first.kind !== 'applied')
  throw new Error(`policy at ${config.policyUrl}: ${JSON.stringify(first)}`);

function objectRefs(policy: Policy): ObjectReference[] {
  const refs: ObjectReference[] = [];
  for (const gp of policy.gatePolicies) {
    const tenant = policy.tenants.get(gp.tenant);
    for (const c of gp.conditions) {
      if (c.type !== 'ObjectCondition') continue;
      const namespaces = c.object.namespace ? [c.object.namespace] : (tenant?.namespaces ?? []);
      for (const namespace of namespaces) refs.push({ ...c.object, namespace });
    }
  }
  return refs;
}

const view = createClusterView({ kubeConfig: kc, logger: log });
let watchedCommit = '';
const currentPolicy = (): Policy | undefined => {
  const policy = policies.current();
  if (policy && policy.commit !== watchedCommit) {
    watchedCommit = policy.commit;
    view.watchObjects(objectRefs(policy));
  }
  return policy;
};
currentPolicy();
view.start();
await view.whenSynced();

const executor = createWriteExecutor(kc);
const dispatcherKind = 'src/dispatch/queue.ts';
const dispatcher: Dispatcher = createDispatcher({
  executor,
  capacity: 3000,
  concurrency: 16,
  qps: 300,
  burst: 300,
});
const { writer: audit } = await GitAuditWriter.open({
  url: config.auditUrl,
  token: config.token,
  cacheDir: config.cacheDir,
  cluster: 'e2e',
  controller: config.controller,
  mode: 'strict',
  batch: { maxDecisions: 1000, maxDelayMs: 200 },
  logger: log,
});
const recorder = createEventRecorder(kc, {
  ratePerSecond: 50,
  burst: 100,
  logger: log,
  reportingInstance: config.controller,
});

// Intents a killed predecessor left without outcomes get the outcome the cluster shows.
const auditSource = await openAuditSource(config.auditUrl, 'tollgate/audit', {
  token: config.token,
});
const recovered = await recoverGateReleaseIntents({
  source: auditSource,
  cluster: 'e2e',
  view,
  policy: policies.current()!,
  audit,
  clock: systemClock,
  log,
});
auditSource.close();

const staleGuard = new StaleGuard({ policy: policies.current()!.staleness, loop: 'gate-release' });
staleGuard.markSynced();
const core = kc.makeApiClient(CoreV1Api);
const readPod = async (namespace: string, name: string): Promise<V1Pod | undefined> => {
  try {
    return await core.readNamespacedPod({ namespace, name });
  } catch (error) {
    if ((error as { code?: number }).code === 404) return undefined;
    throw error;
  }
};

const loop = startGateReleaseLoop({
  view,
  dispatcher,
  audit,
  policy: currentPolicy,
  staleGuard,
  readPod,
  events: (pod, e) =>
    recorder.record(
      {
        namespace: pod.metadata?.namespace ?? '',
        name: pod.metadata?.name ?? '',
        uid: pod.metadata?.uid ?? '',
      },
      { type: e.type, reason: e.reason, action: e.action, note: e.message },
    ),
  log,
  ...(config.debounceMs !== undefined ? { debounceMs: config.debounceMs } : {}),
  ...(config.budgetRampMs !== undefined ? { budgetRampMs: config.budgetRampMs } : {}),
});
process.stdout.write(
  `${JSON.stringify({ ready: true, pid: process.pid, dispatcher: dispatcherKind, recovered: recovered.length })}\n`,
);

process.on('SIGTERM', () => {
  void (async () => {
    await loop.stop();
    await dispatcher.close({ cancelQueued: false });
    await audit.flush();
    await audit.close();
    await recorder.close();
    policies.stop();
    await view.stop();
    // The loop's own metrics, for the test to compare with the audit trail and the cluster.
    process.stdout.write(
      `${JSON.stringify({ stopped: true, metrics: await registry.metrics() })}\n`,
    );
    process.exit(0);
  })();
});
