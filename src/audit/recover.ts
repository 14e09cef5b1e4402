/**
 * Recovery after a crash between an intent and its outcome: read the audit branch,
 * find this cluster's intents that have no outcome (by decision id), and record the
 * outcome the cluster's current state implies. The state lookup is injected (the
 * gate-release loop wires it to the live view); `podStateLookup` is the default for
 * pods.
 *
 *   applied     -> succeeded, reason "recovered: ..."        (the write went through)
 *   not-applied -> cancelled "not sent before restart"       (the loop re-decides)
 *   gone        -> unknown "pod gone before recovery: whether the write was applied cannot be known"
 *   unknown     -> unknown "not confirmed after restart: ... cannot be told from the pod" (the loop re-decides)
 *
 * Resize intents are judged by `resizeIntentState` (a target on the spec, the pause
 * annotation); the rest of them (a Hold's unreadable time, a Defer check, an Infeasible
 * mark) are `unknown` when the pod changed since the decision.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { Decision } from '../decide/decision.ts';
import type { Clock } from '../lib/clock.ts';
import { resizeIntentState } from '../decide/resize-recover.ts';
import { shortDigest, type AuditRecord } from './record.ts';
import { walkAuditHistory, type AuditCommit, type AuditSource } from './reader.ts';
import type { AuditSink } from './types.ts';

export type IntentState =
  | { readonly state: 'applied'; readonly resourceVersion?: string; readonly detail?: string }
  | { readonly state: 'not-applied'; readonly detail?: string }
  | { readonly state: 'gone'; readonly detail?: string }
  | { readonly state: 'unknown'; readonly detail?: string };

export type IntentStateLookup = (intent: AuditRecord) => IntentState | Promise<IntentState>;

/** Intents without an outcome, oldest first; only those under `audit/<cluster>/` when a cluster is given. */
export function intentsWithoutOutcome(
  history: readonly AuditCommit[],
  cluster?: string,
): AuditRecord[] {
  const prefix = cluster === undefined ? 'audit/' : `audit/${cluster}/`;
  const intents = new Map<string, AuditRecord>();
  const finished = new Set<string>();
  for (const commit of history) {
    for (const record of commit.records) {
      if (!record.file.startsWith(prefix)) continue;
      if (record.phase === 'intent') intents.set(record.id, record);
      else if (record.phase === 'outcome') finished.add(record.id);
    }
  }
  return [...intents.values()].filter((intent) => !finished.has(intent.id));
}

/**
 * The same answer as `intentsWithoutOutcome`, streamed from the tip back to the
 * cluster's last checkpoint (checkpoint.ts), or to the root when there is none: memory
 * holds the open intents and a digest per outcome id met, never the history's records,
 * and the commits read are those since the last checkpoint, so a term start does not
 * grow with the length of the trail. `stats.commits` counts the commits read.
 */
export async function openIntents(
  source: AuditSource,
  cluster: string,
  options: { readonly since?: number; readonly stats?: { commits: number } } = {},
): Promise<AuditRecord[]> {
  const prefix = `audit/${cluster}/`;
  const closed = new Set<string>();
  const seen = new Set<string>();
  const open: AuditRecord[] = [];
  const note = (record: AuditRecord): void => {
    const key = shortDigest(record.id);
    if (record.phase === 'outcome') closed.add(key);
    else if (record.phase === 'intent' && !closed.has(key) && !seen.has(key)) {
      seen.add(key);
      open.push(record);
    }
  };
  const walk = {
    pathPrefix: prefix,
    ...(options.since === undefined ? {} : { since: options.since }),
  };
  for await (const commit of walkAuditHistory(source, walk)) {
    if (options.stats) options.stats.commits += 1;
    for (let index = commit.records.length - 1; index >= 0; index -= 1) {
      const record = commit.records[index] as AuditCommit['records'][number];
      if (record.file.startsWith(prefix)) note(record);
    }
    if (commit.checkpoint?.file.startsWith(prefix)) {
      for (const intent of [...commit.checkpoint.open].reverse()) note(intent);
      break;
    }
  }
  return open.reverse();
}

export function recoveredOutcome(intent: AuditRecord, state: IntentState, now: number): Decision {
  const { v: _v, phase: _phase, ...decision } = intent as AuditRecord & { file?: string };
  delete (decision as { file?: string }).file;
  const detail = state.detail ? ` (${state.detail})` : '';
  switch (state.state) {
    case 'applied':
      return {
        ...decision,
        at: now,
        reason: `recovered: applied before restart${detail}; ${intent.reason}`,
        outcome: state.resourceVersion
          ? { result: 'succeeded', resourceVersion: state.resourceVersion }
          : { result: 'succeeded' },
      };
    case 'not-applied':
      return {
        ...decision,
        at: now,
        reason: intent.reason,
        outcome: { result: 'cancelled', message: `not sent before restart${detail}` },
      };
    case 'gone':
      // A pod that is gone cannot be read: the write may or may not have been applied
      // before it went, and "cancelled" would claim it was not.
      return {
        ...decision,
        at: now,
        reason: intent.reason,
        outcome: {
          result: 'unknown',
          message: `pod gone before recovery: whether the write was applied cannot be known${detail}`,
        },
      };
    case 'unknown':
      // The pod changed since the decision (an unchanged one is `not-applied`), and what it
      // shows cannot tell whether this write was one of the changes: "cancelled" would
      // claim it was not sent.
      return {
        ...decision,
        at: now,
        reason: intent.reason,
        outcome: {
          result: 'unknown',
          message: `not confirmed after restart: whether the write was applied cannot be told from the pod${detail}; re-decided from current state`,
        },
      };
  }
}

/** Kinds whose write happens once per pod: a gate is removed once, a pod deleted once. */
const oncePerPod = new Set<Decision['kind']>(['Release', 'Expire', 'Cancel']);

/**
 * At most one `succeeded` per pod and kind among recovered outcomes. A killed leader can
 * leave two open intents for one pod (a write answered 422, then the one it decided
 * again); the pod shows the gate gone for both, but a gate is removed once. The newest
 * intent (the leader decided it after the older write's answer) keeps `succeeded`; an
 * older one becomes `unknown`, naming the one recorded instead. `outcomes` are in the
 * intents' order, oldest first.
 */
export function oneSuccessPerPod(outcomes: readonly Decision[]): Decision[] {
  const newest = new Map<string, string>();
  for (const d of outcomes)
    if (oncePerPod.has(d.kind) && d.outcome.result === 'succeeded')
      newest.set(`${d.kind}/${d.target.uid}`, d.id);
  return outcomes.map((d) => {
    const kept = newest.get(`${d.kind}/${d.target.uid}`);
    if (d.outcome.result !== 'succeeded' || kept === undefined || kept === d.id) return d;
    return {
      ...d,
      outcome: {
        result: 'unknown',
        message: `a later ${d.kind} intent for the same pod (${kept}) is recorded as the write that removed its gate or deleted it; whether this earlier write was applied cannot be known`,
      },
    };
  });
}

/** The recovered outcome of each open intent (oldest first), at most one success per pod. */
export async function recoveredOutcomes(
  open: readonly AuditRecord[],
  lookup: IntentStateLookup,
  now: number,
): Promise<Decision[]> {
  const outcomes: Decision[] = [];
  for (const intent of open) outcomes.push(recoveredOutcome(intent, await lookup(intent), now));
  return oneSuccessPerPod(outcomes);
}

/**
 * The default lookup for pod intents. `ownsGate` says which scheduling gates are
 * tollgate's: its policy's gate names and its tenants' gate prefixes, so a gate renamed
 * in the policy since the intent still counts as tollgate's.
 */
export function podStateLookup(
  getPod: (namespace: string, name: string) => V1Pod | undefined | Promise<V1Pod | undefined>,
  ownsGate: (gate: string) => boolean,
): IntentStateLookup {
  return async (intent) => {
    const pod = await getPod(intent.target.namespace, intent.target.name);
    if (!pod || pod.metadata?.uid !== intent.target.uid) return { state: 'gone' };
    const resourceVersion = pod.metadata?.resourceVersion;
    // Every write tollgate sends changes the pod, so an unchanged resourceVersion proves
    // the write did not happen, whatever the policy now says (a renamed gate is no longer
    // "owned", and judging by owned gates alone would call it succeeded).
    if (resourceVersion !== undefined && resourceVersion === intent.target.resourceVersion)
      return {
        state: 'not-applied',
        detail: `resourceVersion ${resourceVersion} unchanged since the decision`,
      };
    switch (intent.kind) {
      case 'Release':
      case 'Expire': {
        const owned = (pod.spec?.schedulingGates ?? []).filter((gate) => ownsGate(gate.name));
        if (owned.length === 0)
          return {
            state: 'applied',
            ...(resourceVersion ? { resourceVersion } : {}),
            detail: 'gate removed',
          };
        return {
          state: 'not-applied',
          detail: `still gated by ${owned.map((gate) => gate.name).join(', ')}`,
        };
      }
      case 'Cancel':
        return pod.metadata?.deletionTimestamp
          ? { state: 'applied', detail: 'pod deleting' }
          : { state: 'not-applied', detail: 'pod not deleted' };
      default:
        if (intent.loop === 'resize') return resizeIntentState(intent, pod);
        return {
          state: 'unknown',
          detail: `${intent.kind} cannot be confirmed from the pod alone`,
        };
    }
  };
}

export interface RecoverOptions {
  readonly source: AuditSource;
  readonly cluster: string;
  readonly lookup: IntentStateLookup;
  readonly sink: AuditSink;
  readonly clock: Clock;
  /** Only intents committed after this (epoch ms); older ones are left to `audit verify`. */
  readonly since?: number;
  /** Wait until the outcomes are pushed (default true); a term start does not (they go behind its backlog). */
  readonly awaitPush?: boolean;
}

/** Records outcomes for intents left without one and pushes them (see awaitPush); returns what was recorded. */
export async function recover(options: RecoverOptions): Promise<Decision[]> {
  const open = await openIntents(
    options.source,
    options.cluster,
    options.since === undefined ? {} : { since: options.since },
  );
  if (open.length === 0) return [];
  const outcomes = await recoveredOutcomes(open, options.lookup, options.clock.now());
  options.sink.record(outcomes);
  if (options.awaitPush !== false) await options.sink.flush();
  return outcomes;
}
