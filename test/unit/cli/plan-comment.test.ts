/**
 * The pull-request workflow example (docs/examples/github-actions-policy-pr.yaml) keeps
 * its comment under GitHub's limit of 65,536 characters however big the plan: a plan of
 * thousands of pods is rendered as `tollgate plan -o markdown` renders it, cut by
 * `--max-chars` as the workflow asks, and the workflow's own comment script is run on it
 * (with the GitHub API replaced by a recorder: what is checked is the body it would post).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { fitToLength } from '../../../src/cli/output.ts';
import { runPlan } from '../../../src/cli/plan.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { diffPlans, formatMarkdown } from '../../../src/decide/plan-diff.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const githubCommentLimit = 65_536;
const now = Date.UTC(2030, 0, 1);

/** A budget raised from 0 to n: every one of n gated pods changes from Hold to Release. */
function bigPlan(n: number): string {
  const policy = (commit: string, pods: number) =>
    aPolicy()
      .commit(commit)
      .tenant(aTenant('team-a').budget({ pods }))
      .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
      .obj();
  const pods = Array.from({ length: n }, (_, i) =>
    aPod(`training-run-worker-${String(i).padStart(5, '0')}`, 'team-a')
      .gated('team-a.tollgate.io/ready')
      .requests({ cpu: '1' })
      .createdAt(now - 600_000 + i)
      .obj(),
  );
  return formatMarkdown(
    diffPlans(policy('base', 0), policy('prop', n), snapshotOf(pods, [aNode('n1').obj()]), now),
  );
}

const workflow = parse(
  readFileSync(
    fileURLToPath(new URL('../../../docs/examples/github-actions-policy-pr.yaml', import.meta.url)),
    'utf8',
  ),
) as {
  jobs: {
    plan: {
      steps: { name?: string; uses?: string; run?: string; with?: Record<string, string> }[];
    };
  };
};
const steps = workflow.jobs.plan.steps;
const planStep = steps.find((s) => s.run?.includes('tollgate plan'))!;
const maxChars = Number(/--max-chars (\d+)/.exec(planStep.run!)?.[1]);
const fullOutput = /--full-output (\S+)/.exec(planStep.run!)?.[1];
const commentScript = steps.find((s) => s.uses?.startsWith('actions/github-script'))!.with!.script!;

/** The body the workflow's script would post, for a plan file and a worst-case run URL. */
async function commentBody(planFile: string): Promise<string> {
  let posted = '';
  const github = {
    paginate: async () => [],
    rest: {
      issues: {
        listComments: () => undefined,
        createComment: async ({ body }: { body: string }) => void (posted = body),
        updateComment: async ({ body }: { body: string }) => void (posted = body),
      },
    },
  };
  const context = {
    // GitHub's longest names: owner 39 characters, repository 100.
    serverUrl: 'https://github.com',
    repo: { owner: 'o'.repeat(39), repo: 'r'.repeat(100) },
    runId: 99_999_999_999,
    issue: { number: 99_999 },
  };
  const fakeRequire = (name: string) => {
    assert.equal(name, 'node:fs');
    return { readFileSync: (path: string) => (assert.equal(path, 'plan.md'), planFile) };
  };
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
    ...args: string[]
  ) => (...values: unknown[]) => Promise<void>;
  await new AsyncFunction('require', 'github', 'context', commentScript)(
    fakeRequire,
    github,
    context,
  );
  return posted;
}

describe('the pull-request comment stays under GitHub’s limit', () => {
  const full = bigPlan(3000);

  it('a plan of 3,000 pods is far over the limit as rendered', () => {
    assert.ok(full.length > 2 * githubCommentLimit, `${full.length} characters`);
  });

  it('the workflow cuts it, writes the whole to the file it attaches, and links the run', () => {
    assert.ok(Number.isInteger(maxChars), '--max-chars is given');
    assert.equal(fullOutput, 'plan-full.md');
    const upload = steps.find((s) => s.uses?.startsWith('actions/upload-artifact'));
    assert.equal(upload?.with?.path, fullOutput, 'the whole plan is attached');
    assert.equal(upload?.with?.name, 'tollgate-plan');
    assert.match(planStep.run!, /> plan\.md/);
  });

  it('the posted body is under 65,536 characters, ends the plan with a note and links the whole', async () => {
    const cut = fitToLength(full, maxChars, fullOutput!);
    const body = await commentBody(cut);
    assert.ok(body.length <= githubCommentLimit, `${body.length} characters`);
    assert.match(
      cut,
      /\n… truncated: \d+ of \d+ lines shown \(\d+ characters, limit 64000\); the whole: plan-full\.md\n$/,
    );
    assert.match(
      body,
      /The whole plan: artifact `tollgate-plan` of \[this run\]\(https:\/\/github\.com\/o+\/r+\/actions\/runs\/99999999999\)/,
    );
    const kept = cut.split('\n… truncated')[0]!;
    assert.ok(full.startsWith(kept), 'what is shown is the plan’s beginning, cut at a line');
    assert.ok(kept.length > maxChars - 1000, 'and nearly all the room is used');
  });

  it('a plan that fits is posted whole, without a note', async () => {
    const small = bigPlan(5);
    assert.equal(fitToLength(small, maxChars, fullOutput!), small);
    assert.ok((await commentBody(small)).includes(small));
  });
});

describe('tollgate plan --max-chars refuses what it cannot keep', () => {
  const examples = fileURLToPath(new URL('../../../policy-examples', import.meta.url));
  const table: [string, { maxChars: string; output: string }, RegExp][] = [
    [
      'a limit too small for a note',
      { maxChars: '10', output: 'markdown' },
      /--max-chars must be a whole number of at least 1000, got "10"/,
    ],
    [
      'a structured output, which is never cut',
      { maxChars: '64000', output: 'json' },
      /--max-chars cuts text or markdown; json and yaml are never cut/,
    ],
  ];
  for (const [name, flags, message] of table)
    it(`${name}: exit 2`, async () => {
      let out = '';
      const code = await runPlan(
        { policy: examples, base: examples, gitTokenEnv: 'T', ...flags },
        { stdout: (t) => void (out += t), stderr: (t) => void (out += t), env: {}, now: () => now },
      );
      assert.equal(code, 2);
      assert.match(out, message);
    });
});
