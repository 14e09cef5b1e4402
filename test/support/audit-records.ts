/** Every record on an audit branch, oldest commit last, read through tollgate's own reader. */
import { openAuditSource, readAuditHistory } from '../../src/audit/reader.ts';
import type { AuditCommit } from '../../src/audit/reader.ts';

export type ReadRecord = AuditCommit['records'][number];

export async function auditRecords(
  url: string,
  token: string,
  branch = 'tollgate/audit',
): Promise<ReadRecord[]> {
  const source = await openAuditSource(url, branch, { token });
  try {
    return (await readAuditHistory(source)).flatMap((c) => c.records);
  } finally {
    source.close();
  }
}
