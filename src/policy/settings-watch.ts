/**
 * Settings that take effect only when tollgate starts: the cluster name (audit paths and
 * trailers) and the audit settings (mode, batch, window) that the audit writer is opened with.
 * A later policy commit that changes one is not applied half-way; it is refused loudly:
 * a warning naming each setting, and `tollgate_policy_restart_required` at 1 until the
 * policy in force matches the start-up values again (a restart, or the change reverted),
 * and `announce` (a Kubernetes Event in `tollgate run`) with the same words, once per
 * refused commit.
 * The audit location (repo, branch) is never the policy's to choose (run/audit.ts).
 */
import type { Logger } from '../observe/log.ts';
import { policyRestartRequired } from './metrics.ts';
import type { Policy, Settings } from './model.ts';

type StartupSettings = Pick<Settings, 'cluster' | 'audit'>;

/** One line per start-up setting that differs: `path: <in force> in force, <in Git> in Git`. */
export function startupSettingChanges(
  inForce: StartupSettings & Partial<Settings>,
  next: StartupSettings & Partial<Settings>,
): string[] {
  const pairs: [string, unknown, unknown][] = [
    ['settings.cluster', inForce.cluster, next.cluster],
    ['settings.audit.mode', inForce.audit.mode, next.audit.mode],
    [
      'settings.audit.batch.maxDecisions',
      inForce.audit.batch.maxDecisions,
      next.audit.batch.maxDecisions,
    ],
    ['settings.audit.batch.maxDelay', inForce.audit.batch.maxDelayMs, next.audit.batch.maxDelayMs],
    ['settings.audit.window', `${inForce.audit.windowHours}h`, `${next.audit.windowHours}h`],
  ];
  return pairs
    .filter(([, a, b]) => a !== b)
    .map(([path, a, b]) => `${path}: ${String(a)} in force, ${String(b)} in Git`);
}

/** Watches each new policy against the start-up one; see the module comment. */
export function watchStartupSettings(
  policies: { onPolicy(listener: (policy: Policy) => void): unknown },
  first: Policy,
  log: Logger,
  announce: (note: string) => void = () => undefined,
): void {
  policyRestartRequired.set(0);
  policies.onPolicy((policy) => {
    const changes = startupSettingChanges(first.settings, policy.settings);
    policyRestartRequired.set(changes.length > 0 ? 1 : 0);
    if (changes.length > 0) {
      log.warn({ commit: policy.commit, settings: changes }, restartRequiredMessage);
      announce(restartRequiredNote(policy.commit, changes));
    }
  });
}

const restartRequiredMessage =
  'policy changes settings that take effect only at restart; the start-up values stay in force until tollgate restarts';

/** The Event note: the commit, each setting, what to do. */
export function restartRequiredNote(commit: string, changes: readonly string[]): string {
  return `policy commit ${commit.slice(0, 12)} changes settings that take effect only at restart (${changes.join('; ')}); the start-up values stay in force: restart tollgate to apply them, or revert the change`;
}
