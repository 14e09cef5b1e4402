/**
 * History that pushes a record far back on an audit branch, written in one
 * `git fast-import` run: 1,500 commits through isomorphic-git take most of a minute on a
 * loaded machine, this takes a moment. Each commit adds one file of one Hold record of
 * another pod, at the path and with the message layout the writer uses, one second
 * apart on the clock, so readers walk it as they walk the writer's commits.
 */
import { execFileSync } from 'node:child_process';
import type { AuditRepo } from '../../src/audit/repo.ts';
import { serializeBatch } from '../../src/audit/record.ts';
import { auditFilePath } from '../../src/audit/writer.ts';
import type { ManualClock } from '../../src/lib/clock.ts';
import { aDecision } from '../builders/decision.ts';

/** `count` commits of other pods' Holds on the clone's local branch, the clock moved 1 s each. */
export async function fillerCommits(
  repo: AuditRepo,
  clock: ManualClock,
  count: number,
  cluster = 'prod',
): Promise<void> {
  const parent = await repo.localTip();
  const ref = `refs/heads/${repo.branch}`;
  const parts: string[] = [];
  for (let index = 0; index < count; index += 1) {
    clock.advance(1_000);
    const at = clock.now();
    const content = serializeBatch([aDecision('Hold', `filler-${at}`).at(at).recorded().obj()]);
    const message = 'records: 1 decision\n';
    const seconds = Math.floor(at / 1000);
    const path = auditFilePath(cluster, 'filler', at, index + 1);
    parts.push(
      `commit ${ref}`,
      `committer t <t@t> ${seconds} +0000`,
      `data ${Buffer.byteLength(message)}`,
      message,
      ...(index === 0 && parent ? [`from ${parent}`] : []),
      `M 100644 inline ${path}`,
      `data ${Buffer.byteLength(content)}`,
      content,
    );
  }
  execFileSync('git', ['--git-dir', repo.gitdir, 'fast-import', '--quiet', '--force'], {
    input: `${parts.join('\n')}\n`,
  });
}
