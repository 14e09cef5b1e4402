/**
 * Who released a pod, from the audit: the replica (the commit's Tollgate-Controller
 * trailer) that recorded the intent of the gate removal, and when it decided it.
 */
import type { Decision } from '../../src/decide/decision.ts';

export interface AttributedCommit {
  readonly message: string;
  readonly records: readonly Pick<Decision, 'id' | 'kind' | 'at' | 'target' | 'outcome'>[];
}

export interface ReleaseIntent {
  readonly controller: string;
  /** When the intent was decided (its record's `at`). */
  readonly at: number;
  readonly id: string;
}

/**
 * `namespace/name` → the intent of its release, over a history oldest commit first: the
 * intent whose Release outcome succeeded (an outcome carries its intent's id, whichever
 * replica recorded it: a leader's recovery closes another replica's intents), else the
 * pod's last intent. Not simply the last intent: a stopped leader's intents that never
 * reached Git are pushed later by it as a standby, closed as cancelled, after the new
 * leader's intent for the same pod has succeeded.
 */
export function releaseIntents(history: readonly AttributedCommit[]): Map<string, ReleaseIntent> {
  const intents = new Map<string, ReleaseIntent>();
  const lastIntent = new Map<string, ReleaseIntent>();
  const succeeded = new Map<string, ReleaseIntent>();
  for (const commit of history) {
    const controller = /Tollgate-Controller: (\S+)/.exec(commit.message)?.[1] ?? '?';
    for (const record of commit.records) {
      if (record.kind !== 'Release') continue;
      const pod = `${record.target.namespace}/${record.target.name}`;
      if (record.outcome.result === 'pending') {
        const intent = { controller, at: record.at, id: record.id };
        intents.set(record.id, intent);
        lastIntent.set(pod, intent);
      } else if (record.outcome.result === 'succeeded') {
        const intent = intents.get(record.id);
        if (intent) succeeded.set(pod, intent);
      }
    }
  }
  return new Map([...lastIntent, ...succeeded]);
}
