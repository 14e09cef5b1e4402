/**
 * An audit sink that keeps what the loops record, in memory, for tests whose subject is
 * not the audit (the audit's own tests use the Git writer).
 */
import type { AuditSink } from '../../src/audit/types.ts';
import type { Decision } from '../../src/decide/decision.ts';

export function recordingAudit(): { audit: AuditSink; recorded: Decision[] } {
  const recorded: Decision[] = [];
  const audit: AuditSink = {
    recordIntents: async () => undefined,
    record: (decisions) => void recorded.push(...decisions),
    flush: async () => undefined,
    backlog: 0,
    close: async () => undefined,
  };
  return { audit, recorded };
}
