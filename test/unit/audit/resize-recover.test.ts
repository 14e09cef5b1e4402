/**
 * Open resize intents are recovered at term start from the pod: a Resize or Rollback
 * whose target the pod's spec shows went through (succeeded), one the spec does not
 * show did not (cancelled, decided again); a Pause or Resume by the pause annotation.
 * A write the pod cannot confirm (a Hold's unreadable time, a Defer check) on a pod that
 * changed since the decision may or may not have been applied: unknown, never cancelled
 * (which says it was not sent).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podStateLookup, recoveredOutcome } from '../../../src/audit/recover.ts';
import { phaseOf, recordSchemaVersion, type AuditRecord } from '../../../src/audit/record.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { pausedAnnotation } from '../../../src/decide/resize-state.ts';
import { aRunningPod } from '../../builders/resize.ts';

const target = { containers: { app: { requests: { cpu: '750m', memory: '256Mi' } } } };

function intent(kind: Decision['kind'], withTarget = true): AuditRecord {
  const decision: Decision = {
    id: `resize:${kind}:uid-web-0:100`,
    at: 1,
    loop: 'resize',
    kind,
    target: { namespace: 'team-a', name: 'web-0', uid: 'uid-web-0', resourceVersion: '99' },
    policy: { commit: 'c0ffee', file: 'resize/web.yaml', name: 'web-resize' },
    inputs: withTarget ? [{ condition: 'target', met: true, value: target }] : [],
    reason: 'signals ask for more',
    outcome: { result: 'pending' },
  };
  return { ...decision, v: recordSchemaVersion, phase: phaseOf(decision) };
}

const running = (cpu: string) =>
  aRunningPod('web-0', 'team-a').container('app', { cpu, memory: '256Mi' });

test('open resize intents are closed by what the pod shows', async () => {
  const cases: {
    name: string;
    intent: AuditRecord;
    pod: ReturnType<typeof running>;
    result: string;
    text: RegExp;
  }[] = [
    {
      name: 'a Resize whose target is on the spec went through',
      intent: intent('Resize'),
      pod: running('750m'),
      result: 'succeeded',
      text: /recovered: applied before restart \(the pod's spec shows the target\)/,
    },
    {
      name: 'a Rollback whose target is not on the spec did not',
      intent: intent('Rollback'),
      pod: running('500m'),
      result: 'cancelled',
      text: /not sent before restart \(the pod's spec does not show the target\)/,
    },
    {
      name: 'a Pause with the pause annotation on the pod went through',
      intent: intent('Pause', false),
      pod: running('500m').annotation(pausedAnnotation, 'v1.x.y.{}'),
      result: 'succeeded',
      text: /applied before restart \(the pod is paused\)/,
    },
    {
      name: 'a Resume with the pause annotation still there did not',
      intent: intent('Resume', false),
      pod: running('500m').annotation(pausedAnnotation, 'v1.x.y.{}'),
      result: 'cancelled',
      text: /not sent before restart \(the pod is still paused\)/,
    },
    {
      name: 'a Defer check the pod cannot confirm: whether it was applied is unknown, not cancelled',
      intent: intent('Defer', false),
      pod: running('500m'),
      result: 'unknown',
      text: /not confirmed after restart: whether the write was applied cannot be told from the pod/,
    },
    {
      name: 'a Hold (its write of the unreadable time) on a pod changed since: unknown, not cancelled',
      intent: intent('Hold', false),
      pod: running('500m'),
      result: 'unknown',
      text: /cannot be told from the pod \(Hold cannot be confirmed from the pod alone\)/,
    },
  ];
  for (const c of cases) {
    const lookup = podStateLookup(
      () => c.pod.obj(),
      () => false,
    );
    const outcome = recoveredOutcome(c.intent, await lookup(c.intent), 42);
    assert.equal(outcome.outcome.result, c.result, c.name);
    assert.match(
      'message' in outcome.outcome ? outcome.outcome.message : outcome.reason,
      c.text,
      c.name,
    );
  }
});
