/**
 * The gate-release controller as its own process, so the e2e can SIGKILL it mid-release
 * and start another. Wires the real parts: the live ClusterView (tollgate identity, so
 * RBAC from deploy/ applies), the real write executor, the Git audit writer in strict
 * mode against the real Git server, the gate-release loop; plus the stand-ins from
 * stand-ins.ts for pieces not yet landed.
 *
 * Config: env TOLLGATE_E2E_CONTROLLER, JSON
 *   { kubeconfig, policyUrl, auditUrl, token, cacheDir, controller, debounceMs?, budgetRampMs? }
 * Prints one JSON line `{"ready":true}` to stdout once the view is synced and the loop runs;
 * exits 0 after SIGTERM once writes and the audit are flushed.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { createClusterView } from '../../../src/cluster/view.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import type { ObjectReference } from '../../../src/cluster/types.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { ownWriteGuard } from '../../../src/loops/resize.ts';
import { createLogger } from '../../../src/observe/log.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { ApiEventSink, GitPolicySource, SimpleDispatcher } from './stand-ins.ts';

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

const policies = new GitPolicySource(config.policyUrl, config.token, (error) =>
  log.error({ err: error.message }, 'policy'),
);
if (!(await policies.refresh())) throw new Error(`no policy.json at ${config.policyUrl}`);
policies.start(300);

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
  const policy = policies.current;
  if (policy && policy.commit !== watchedCommit) {
    watchedCommit = policy.commit;
    view.watchObjects(objectRefs(policy));
  }
  return policy;
};
currentPolicy();
view.start();
await view.whenSynced();

const dispatcher = new SimpleDispatcher(createWriteExecutor(kc), { workers: 16, capacity: 2000 });
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
const events = new ApiEventSink(kc);

const loop = startGateReleaseLoop({
  view,
  dispatcher,
  audit,
  policy: currentPolicy,
  staleGuard: ownWriteGuard(),
  events: events.emit,
  log,
  ...(config.debounceMs !== undefined ? { debounceMs: config.debounceMs } : {}),
  ...(config.budgetRampMs !== undefined ? { budgetRampMs: config.budgetRampMs } : {}),
});
process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid })}\n`);

process.on('SIGTERM', () => {
  void (async () => {
    await loop.stop();
    await dispatcher.close({ cancelQueued: false });
    await audit.flush();
    await audit.close();
    policies.stop();
    await view.stop();
    process.stdout.write(
      `${JSON.stringify({ stopped: true, events: { created: events.created, dropped: events.dropped } })}\n`,
    );
    process.exit(0);
  })();
});
