/** The audit writer's clone as a real bare repository on disk, for unit tests: its remote is never contacted. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditRepo } from '../../src/audit/repo.ts';
import type { AuditStore } from '../../src/audit/writer.ts';
import { ManualClock } from '../../src/lib/clock.ts';

export interface LocalClone {
  readonly dir: string;
  readonly clock: ManualClock;
  readonly repo: AuditRepo;
  /** A writer store committing into `repo`, whose pushes succeed at once with nothing left unpushed. */
  readonly store: AuditStore;
}

/** A bare clone on disk with a manual clock. */
export async function localClone(): Promise<LocalClone> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-clone-'));
  const clock = new ManualClock(Date.UTC(2026, 10, 29, 7));
  const repo = new AuditRepo({
    dir,
    url: 'http://127.0.0.1:9/audit.git',
    branch: 'tollgate/audit',
    author: { name: 't', email: 't@t' },
    clock,
  });
  await repo.open();
  const store: AuditStore = {
    commitFile: (path, content, message) => repo.commitFile(path, content, message),
    push: async () => 0,
    unpushed: async () => [],
  };
  return { dir, clock, repo, store };
}
