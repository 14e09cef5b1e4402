/**
 * `tollgate explain` on pods tollgate released that then fail to start, on the real
 * control plane: the simulated kubelet reports one pod's image as not pulling
 * (ImagePullBackOff, Pending) and another's container as crash-looping
 * (CrashLoopBackOff after 3 restarts), as a kubelet writes them; a third runs and is
 * ready. `explain -o json`, run as tollgate's read identity, tells the three apart, with
 * the kubelet's evidence.
 *
 * Run: node --test --test-concurrency=1 test/e2e/explain/states.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { policyFiles, startWorld, type PolicyState, type World } from '../isolation/world.ts';

const execFileAsync = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const namespace = 'explain-kubelet';
const gate = 'ek.tollgate.io/run';
const fails = 'kubelet.tollgate.test/fails';

const policy: PolicyState = {
  tenants: [{ name: 'ek', namespaces: [namespace], gatePrefixes: ['ek.tollgate.io/'] }],
  gatePolicies: [{ name: 'run', tenant: 'ek', gate }],
};

interface Explained {
  readonly life: { state: string; detail: string; since: string | null };
}

describe('explain tells apart pods that do not pull, crash-loop, or run', () => {
  let world: World;
  const policyDir = () => join(world.work, 'policy');

  before(async () => {
    world = await startWorld('explain-kubelet', policy);
    await world.createNamespaces(namespace);
    for (const [file, text] of Object.entries(policyFiles(policy))) {
      if (text === null) continue;
      mkdirSync(dirname(join(policyDir(), file)), { recursive: true });
      writeFileSync(join(policyDir(), file), text);
    }
    await world.startTollgate();
  });

  after(() => world?.stop());

  const explain = async (name: string): Promise<Explained> => {
    const { stdout } = await execFileAsync(
      process.execPath,
      [
        join(repoRoot, 'src/cli/main.ts'),
        'explain',
        `${namespace}/${name}`,
        ...['--policy-dir', policyDir(), '--kubeconfig', world.cp.tollgateKubeconfig],
        ...['-o', 'json'],
      ],
      { encoding: 'utf8', cwd: repoRoot },
    );
    return JSON.parse(stdout) as Explained;
  };

  test('pulling its image, crash-looping, ready', async () => {
    await world.createPods([
      aPod('pull', namespace).gated(gate).annotate(fails, 'ImagePullBackOff').obj(),
      aPod('crash', namespace).gated(gate).annotate(fails, 'CrashLoopBackOff').obj(),
      aPod('fine', namespace).gated(gate).obj(),
    ]);
    const cases = [
      { pod: 'pull', state: 'pulling-image', detail: /ImagePullBackOff/ },
      { pod: 'crash', state: 'crash-looping', detail: /CrashLoopBackOff|restart/ },
      { pod: 'fine', state: 'ready', detail: /^running and ready$/ },
    ];
    for (const c of cases) {
      const explained = await eventually(
        `explain says ${c.pod} is ${c.state}`,
        async () => {
          const e = await explain(c.pod);
          return e.life.state === c.state ? e : undefined;
        },
        { timeoutMs: 60_000 },
      );
      assert.match(explained.life.detail, c.detail, c.pod);
    }
  });
});
