/**
 * The tamper matrix: a signed trail written by the real writer to the real git server,
 * then changed with the real git CLI the ways a person could (an edited old record, a
 * deleted record, a rewritten and force-pushed history, a reordered pair, a duplicated
 * outcome, an unsigned commit), each pushed to its own repository. `tollgate audit
 * verify` (the CLI, in its own process) must fail each one (exit 1) and name the commit
 * and the record. The writer itself refuses to build on a rewritten branch.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gitServerPerFile } from '../../support/git-server.ts';
import { sshSigner } from '../../../src/audit/sign.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import type { VerifyProblem, VerifyReport } from '../../../src/audit/verify.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import { freshClone, gitCli } from './support.ts';

const root = new URL('../../../', import.meta.url).pathname;
const branch = 'tollgate/audit';
const server = gitServerPerFile();

function verify(...args: string[]): Promise<{ code: number; report: VerifyReport; raw: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['src/cli/main.ts', 'audit', 'verify', '-o', 'json', ...args],
      { cwd: root, env: { ...process.env, TOLLGATE_GIT_TOKEN: server.token } },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: number }).code ?? 2) : 0;
        let report = { ok: false, problems: [] } as unknown as VerifyReport;
        try {
          report = JSON.parse(stdout) as VerifyReport;
        } catch {
          // left empty: the assertion on the code shows stdout and stderr
        }
        resolve({ code, report, raw: stdout + stderr });
      },
    );
  });
}

const key = sshSigner(
  generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
);
const keys = mkdtempSync(join(tmpdir(), 'tollgate-tamper-keys-'));
const allowedSigners = join(keys, 'allowed_signers');
writeFileSync(allowedSigners, `tollgate@audit.invalid namespaces="git" ${key.publicKey}\n`);

const r1 = aDecision('Release', 'r1', 'tamper').obj();
const r2 = aDecision('Release', 'r2', 'tamper').obj();
const hold = aDecision('Hold', 'h1', 'tamper').obj();

/** A clone of the base trail, tampered by `change` (git commands in the clone), pushed to a new repo. */
async function tampered(
  baseUrl: string,
  name: string,
  change: (dir: string) => Promise<void>,
): Promise<{ url: string; dir: string }> {
  const dir = await freshClone(server, baseUrl, branch);
  await gitCli(dir, 'config', 'user.name', 'someone');
  await gitCli(dir, 'config', 'user.email', 'someone@example.invalid');
  await change(dir);
  const url = server.createRepo(name);
  await gitCli(
    dir,
    'push',
    '--quiet',
    url.replace('http://', `http://x:${server.token}@`),
    `HEAD:refs/heads/${branch}`,
  );
  return { url, dir };
}

const head = async (dir: string): Promise<string> =>
  (await gitCli(dir, 'rev-parse', 'HEAD')).trim();
/** Files added by the base trail, oldest first: intent r1, outcome r1, intent r2, outcome r2, hold. */
async function files(dir: string): Promise<string[]> {
  const out = await gitCli(dir, 'log', '--reverse', '--name-only', '--format=');
  return out.split('\n').filter((line) => line.endsWith('.jsonl'));
}

function expectProblem(
  report: VerifyReport,
  check: VerifyProblem['check'],
  match: RegExp,
  commit?: string,
): void {
  const found = report.problems.find(
    (problem) =>
      problem.check === check &&
      match.test(problem.message) &&
      (commit === undefined || problem.commit === commit),
  );
  assert.ok(
    found,
    `no ${check} problem ${match} at ${commit}: ${JSON.stringify(report.problems, null, 2)}`,
  );
}

describe('audit verify on a tampered trail', () => {
  it('fails every tampering, naming the commit and record, and the writer refuses a rewritten branch', async () => {
    const baseUrl = server.createRepo('base');
    const cacheDir = mkdtempSync(join(tmpdir(), 'tollgate-tamper-cache-'));
    const open = () =>
      GitAuditWriter.open({
        url: baseUrl,
        token: server.token,
        cacheDir,
        cluster: 'tamper',
        controller: 'tollgate-0',
        batch: { maxDecisions: 10, maxDelayMs: 10 },
        signer: key,
      });
    const { writer } = await open();
    for (const intent of [r1, r2]) {
      await writer.recordIntents([intent]);
      writer.record([outcomeOf(intent)]);
      await writer.flush();
    }
    writer.record([hold]);
    await writer.close();

    const clean = await verify('--repo', baseUrl, '--allowed-signers', allowedSigners);
    assert.equal(clean.code, 0, clean.raw);
    assert.deepEqual(
      [
        clean.report.commits,
        clean.report.intents,
        clean.report.outcomes,
        clean.report.signaturesChecked,
      ],
      [5, 2, 2, 5],
    );

    // An edited old record: a new commit changes the file of r1's intent.
    const edited = await tampered(baseUrl, 'edited', async (dir) => {
      const [first] = await files(dir);
      const path = join(dir, first as string);
      writeFileSync(
        path,
        readFileSync(path, 'utf8').replace('release tamper/r1', 'released by hand'),
      );
      await gitCli(dir, 'commit', '--quiet', '-am', 'fix a typo');
    });
    const editedRun = await verify('--repo', edited.url);
    assert.equal(editedRun.code, 1, editedRun.raw);
    const [editedFile] = await files(edited.dir);
    expectProblem(
      editedRun.report,
      'chain',
      new RegExp(`modified ${editedFile}; audit files are never changed`),
      await head(edited.dir),
    );

    // A deleted record: the outcome of r1 removed.
    const deleted = await tampered(baseUrl, 'deleted', async (dir) => {
      const outcomeFile = (await files(dir))[1] as string;
      await gitCli(dir, 'rm', '--quiet', outcomeFile);
      await gitCli(dir, 'commit', '--quiet', '-m', 'tidy up');
    });
    const deletedRun = await verify('--repo', deleted.url);
    assert.equal(deletedRun.code, 1, deletedRun.raw);
    expectProblem(
      deletedRun.report,
      'chain',
      /deleted audit\/tamper\/.*\.jsonl; audit files are never/,
      await head(deleted.dir),
    );
    // A deleted record: r1's outcome commit dropped from the history (rebuilt and pushed).
    const dropped = await tampered(baseUrl, 'dropped', async (dir) => {
      await gitCli(
        dir,
        '-c',
        `sequence.editor=sed -i -e '2d'`,
        'rebase',
        '--quiet',
        '-i',
        '--root',
      );
    });
    const droppedRun = await verify('--repo', dropped.url);
    assert.equal(droppedRun.code, 1, droppedRun.raw);
    const intentCommit = (await gitCli(dropped.dir, 'rev-list', '--max-parents=0', 'HEAD')).trim();
    expectProblem(
      droppedRun.report,
      'intent-outcome',
      new RegExp(
        `intent ${r1.id} \\(audit/tamper/.*\\.jsonl:1 in commit ${intentCommit.slice(0, 12)}\\) has no outcome`,
      ),
      intentCommit,
    );

    // A reordered pair: r1's outcome committed before its intent (history rebuilt).
    const reordered = await tampered(baseUrl, 'reordered', async (dir) => {
      await gitCli(
        dir,
        '-c',
        `sequence.editor=sed -i -e '1{h;d}' -e '2{G}'`,
        'rebase',
        '--quiet',
        '-i',
        '--root',
      );
    });
    const reorderedRun = await verify('--repo', reordered.url);
    assert.equal(reorderedRun.code, 1, reorderedRun.raw);
    const outcomeCommit = (
      await gitCli(reordered.dir, 'rev-list', '--max-parents=0', 'HEAD')
    ).trim();
    expectProblem(
      reorderedRun.report,
      'intent-outcome',
      new RegExp(`outcome of ${r1.id} comes before its intent`),
      outcomeCommit,
    );
    const outcomeProblem = reorderedRun.report.problems.find((problem) =>
      /comes before/.test(problem.message),
    );
    assert.match(outcomeProblem?.record ?? '', /^audit\/tamper\/.*\.jsonl:1$/);

    // A duplicated outcome: r2's outcome file copied under a new name.
    const duplicated = await tampered(baseUrl, 'duplicated', async (dir) => {
      const outcomeFile = (await files(dir))[3] as string;
      const copy = outcomeFile.replace(/\.jsonl$/, '-copy.jsonl');
      writeFileSync(join(dir, copy), readFileSync(join(dir, outcomeFile)));
      await gitCli(dir, 'add', copy);
      await gitCli(dir, 'commit', '--quiet', '-m', 'outcomes');
    });
    const duplicatedRun = await verify('--repo', duplicated.url);
    assert.equal(duplicatedRun.code, 1, duplicatedRun.raw);
    expectProblem(
      duplicatedRun.report,
      'intent-outcome',
      new RegExp(`${r2.id} has two outcomes`),
      await head(duplicated.dir),
    );

    // An unsigned commit when signing is required: a well-formed record added by hand.
    const unsigned = await tampered(baseUrl, 'unsigned', async (dir) => {
      const extra = 'audit/tamper/2026/11/29/T080000Z-tollgate-0-000099.jsonl';
      const line = readFileSync(join(dir, (await files(dir))[4] as string), 'utf8').replace(
        'h1',
        'h9',
      );
      mkdirSync(dirname(join(dir, extra)), { recursive: true });
      writeFileSync(join(dir, extra), line);
      await gitCli(dir, 'add', extra);
      await gitCli(dir, 'commit', '--quiet', '-m', 'hold 1 pod in tamper');
    });
    const unsignedPlain = await verify('--repo', unsigned.url);
    assert.equal(
      unsignedPlain.code,
      0,
      `well-formed: only signatures can tell; ${unsignedPlain.raw}`,
    );
    const unsignedRun = await verify('--repo', unsigned.url, '--allowed-signers', allowedSigners);
    assert.equal(unsignedRun.code, 1, unsignedRun.raw);
    expectProblem(
      unsignedRun.report,
      'signature',
      /is not signed; signatures are required/,
      await head(unsigned.dir),
    );
    assert.equal(unsignedRun.report.problemCount, 1, unsignedRun.raw);

    // A rewritten history, force-pushed over the branch the writer uses: every commit is
    // well formed again, so only the signatures and the writer's anchor can tell.
    const rewriter = await freshClone(server, baseUrl, branch);
    const [firstFile] = await files(rewriter);
    await gitCli(rewriter, 'config', 'user.name', 'someone');
    await gitCli(rewriter, 'config', 'user.email', 'someone@example.invalid');
    await new Promise<void>((resolve, reject) =>
      execFile(
        'git',
        [
          '-C',
          rewriter,
          'filter-branch',
          '-f',
          '--tree-filter',
          `sed -i 's|release tamper/r1|approved by the board|' ${firstFile}`,
          'HEAD',
        ],
        { env: { ...process.env, FILTER_BRANCH_SQUELCH_WARNING: '1' } },
        (error) => (error ? reject(error) : resolve()),
      ),
    );
    await gitCli(
      rewriter,
      'push',
      '--quiet',
      '--force',
      baseUrl.replace('http://', `http://x:${server.token}@`),
      `HEAD:refs/heads/${branch}`,
    );
    const rewrittenRun = await verify('--repo', baseUrl, '--allowed-signers', allowedSigners);
    assert.equal(rewrittenRun.code, 1, rewrittenRun.raw);
    const rootCommit = (await gitCli(rewriter, 'rev-list', '--max-parents=0', 'HEAD')).trim();
    expectProblem(rewrittenRun.report, 'signature', /is not signed/, rootCommit);

    const { writer: resumed } = await open();
    await assert.rejects(
      resumed.recordIntents([aDecision('Release', 'r3', 'tamper').obj()]),
      /was rewritten: its tip [0-9a-f]{12} does not contain [0-9a-f]{12}, the last commit tollgate saw there; refusing/,
    );
    await resumed.close().catch(() => undefined);
    assert.equal(
      (
        await gitCli(
          rewriter,
          'ls-remote',
          baseUrl.replace('http://', `http://x:${server.token}@`),
          branch,
        )
      ).split('\t')[0],
      await head(rewriter),
      'nothing was pushed on top of the rewritten branch',
    );

    const misspelled = await verify('--repo', baseUrl, '--branch', 'tollgate/audti');
    assert.equal(misspelled.code, 1, misspelled.raw);
    expectProblem(misspelled.report, 'branch', /branch tollgate\/audti not found/);
  });
});
