/**
 * When gate-release passes start, on a clock and timers moved by hand: a change is served
 * `debounceMs` after it arrived, never sooner than the pass share allows after the last
 * pass (a pass of P ms is followed by P * (1 / share - 1) ms without one), and a wish made
 * while a pass runs counts from when it was made. Each pass costs `passMs` on the clock
 * (the view's pods() moves it), so the spacing is exact.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { earliestPassAt, passSpacingMs } from '../../../src/loops/pass-pacing.ts';
import { passSeconds } from '../../../src/loops/gate-release-metrics.ts';
import type { ClusterView, ViewChange } from '../../../src/cluster/types.ts';
import type { Dispatcher } from '../../../src/dispatch/types.ts';
import type { AuditSink } from '../../../src/audit/types.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';

const gate = 'team-a.tollgate.io/ready';
// Nothing is ever released (a budget of no pods). A held pod is looked at again 1 s after
// the pass that held it (then 2 s, 4 s): each test ends before that wake-up.
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 0 }))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();

const idleDispatcher: Dispatcher = {
  enqueue: () => ({ accepted: false, reason: 'closed' }),
  whenNotFull: async () => undefined,
  cancel: () => undefined,
  depth: 0,
  close: async () => undefined,
};
const idleAudit: AuditSink = {
  recordIntents: async () => undefined,
  record: () => undefined,
  flush: async () => undefined,
  backlog: 0,
  close: async () => undefined,
};

/**
 * A loop over one held pod whose every pass costs `passMs` on the clock; `syncedAt`: the
 * view is synced from that time on (a pass started earlier waits for it). Returns when
 * each pass started (clock ms from the test's start), and a way to send a view change.
 */
function pacedLoop(options: {
  passMs: number;
  /** Absent: the loop's default. */
  debounceMs?: number;
  passShare?: number;
  syncedAt?: number;
  /** The pods of the view; default one held pod. */
  pods?: V1Pod[];
}) {
  const timers = new ManualTimers();
  const clock = timers.clock;
  const t0 = clock.now();
  const pods: V1Pod[] = options.pods ?? [aPod('a', 'team-a').gated(gate).obj()];
  const listeners = new Set<(change: ViewChange) => void>();
  let synced = options.syncedAt === undefined;
  const whenSynced: (() => void)[] = [];
  const syncAt = async (at: number): Promise<void> => {
    await timers.advance(t0 + at - clock.now());
    synced = true;
    for (const resolve of whenSynced.splice(0)) resolve();
    await settle();
  };
  const view = {
    get synced() {
      return synced;
    },
    whenSynced: () =>
      synced ? Promise.resolve() : new Promise<void>((resolve) => whenSynced.push(resolve)),
    pods: () => {
      clock.advance(options.passMs);
      return pods;
    },
    pod: () => pods[0],
    nodes: () => [],
    object: () => undefined,
    lastResourceVersion: () => undefined,
    onChange: (listener: (change: ViewChange) => void) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  } as unknown as ClusterView;
  const starts: number[] = [];
  const loop = startGateReleaseLoop({
    view,
    policy: () => policy,
    dispatcher: idleDispatcher,
    audit: idleAudit,
    clock,
    timers,
    ...(options.debounceMs !== undefined ? { debounceMs: options.debounceMs } : {}),
    ...(options.passShare !== undefined ? { passShare: options.passShare } : {}),
    watchdog: {
      begin: () => {
        starts.push(clock.now() - t0);
        return () => undefined;
      },
    },
  });
  return {
    loop,
    starts,
    syncAt,
    /** Moves the clock to `at` (ms from the start), firing what falls due. */
    at: (at: number) => timers.advance(t0 + at - clock.now()),
    /** A view change: by default the first pod, modified. */
    change: (change: Partial<ViewChange> = {}) => {
      const object = change.object ?? pods[0]!;
      for (const listener of listeners)
        listener({
          type: 'MODIFIED',
          resource: 'pods',
          key: `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`,
          object,
          ...change,
        });
    },
  };
}

test('the spacing after a pass of P ms is P * (1 / share - 1), at most a second', () => {
  const cases = [
    { passMs: 100, share: 0.25, spacing: 300 },
    { passMs: 10, share: 0.25, spacing: 30 },
    { passMs: 100, share: 1, spacing: 0 },
    { passMs: 600, share: 0.25, spacing: 1000 },
    { passMs: 0, share: 0.25, spacing: 0 },
  ];
  for (const c of cases) {
    assert.equal(passSpacingMs(c.passMs, c.share), c.spacing, JSON.stringify(c));
    assert.equal(earliestPassAt(5_000, c.passMs, c.share), 5_000 + c.spacing);
  }
});

test('a change on an idle loop starts a pass debounceMs after it, and changes meanwhile join that pass', async () => {
  const world = pacedLoop({ passMs: 10, debounceMs: 100 });
  await world.at(0); // the first pass, at start
  await world.at(500);
  world.change();
  await world.at(550);
  world.change();
  await world.at(1_000);
  assert.deepEqual(world.starts, [0, 600]);
  await world.loop.stop();
});

test('by default a change on an idle loop is served 20 ms after it (time for one burst of watch events to arrive), not a tenth of a second later', async () => {
  // The share, not the debounce, keeps passes from crowding the process out: a pass that
  // waited 100 ms for every change was most of a release's own latency at 1,000 pods.
  const world = pacedLoop({ passMs: 10 });
  await world.at(0);
  await world.at(500);
  world.change();
  await world.at(505);
  world.change();
  await world.at(1_000);
  assert.deepEqual(world.starts, [0, 520]);
  await world.loop.stop();
});

test('a change right after a pass of P ms waits for the spacing that pass earned, and no more', async () => {
  const world = pacedLoop({ passMs: 100, debounceMs: 20, passShare: 0.25 });
  await world.at(0); // the first pass: 0-100, spacing 300
  world.change();
  await world.at(1_000);
  assert.deepEqual(world.starts, [0, 400]);
  await world.loop.stop();
});

test('a change made while a pass waits for the view is served debounceMs after it was made, not debounceMs after that pass ends', async () => {
  // The first pass waits for the view until 150, then plans for 10 ms (spacing 30): the
  // change made at 10 was due at 110, so the next pass starts as soon as the share allows
  // (190), not a whole debounce after the pass ended (260).
  const world = pacedLoop({ passMs: 10, debounceMs: 100, passShare: 0.25, syncedAt: 150 });
  await world.at(10);
  world.change();
  await world.syncAt(150);
  await world.at(1_000);
  assert.deepEqual(world.starts, [0, 190]);
  await world.loop.stop();
});

test('a pass asked by hand (a new policy) moves a pending timer to the spacing it earned, so passes keep to their share', async () => {
  // Passes of 100 ms at a share of 0.25: none starts within 300 ms of the last one's end.
  const world = pacedLoop({ passMs: 100, debounceMs: 100, passShare: 0.25 });
  await world.at(0); // 0-100
  await world.at(500);
  world.change(); // due at 600
  await world.at(550);
  await world.loop.pass(); // 550-650: the next may start at 950
  await world.at(1_200);
  assert.deepEqual(world.starts, [0, 550, 950]);
  await world.loop.stop();
});

test('by default passes take up to half the event loop: passes of 30 ms keep up with a change every 100 ms, each served after the debounce alone', async () => {
  // Ten changes a second is a release stream at 10,000 watched pods, where a pass plans in
  // 25-40 ms. At a quarter of the loop (a pass of 30 ms, then 90 ms without one) the passes
  // fell behind the changes and a change waited up to a whole spacing more.
  const world = pacedLoop({ passMs: 30 });
  await world.at(0); // the first pass: 0-30
  const changes = [100, 200, 300, 400, 500, 600, 700, 800];
  for (const at of changes) {
    await world.at(at);
    world.change();
  }
  await world.at(1_000);
  assert.deepEqual(
    world.starts,
    [0, ...changes.map((at) => at + 20)],
    'every change is served 20 ms after it',
  );
  await world.loop.stop();
});

test('passes take no more than half the event loop by default: a change right after a pass of P ms waits P', async () => {
  const world = pacedLoop({ passMs: 100, debounceMs: 20 });
  await world.at(0); // the first pass: 0-100, spacing 100
  world.change();
  await world.at(1_000);
  assert.deepEqual(world.starts, [0, 200]);
  await world.loop.stop();
});

// A released pod: tollgate's gate gone, bound to a node. Nothing else in the view.
const released = () => aPod('r', 'team-a').boundTo('n1').obj();

test('while no pod is held, a change to a pod holding no gate is served within five seconds, not after the debounce: a pass could release nothing', async () => {
  // A wave of releases lands as watch events on pods tollgate no longer holds (scheduled,
  // running): each started a pass over every pod, which planned nothing. Within a second,
  // a 10,000-pod wave still ran a pass a second over every pod for the whole wave.
  const world = pacedLoop({ passMs: 10, pods: [released()] });
  await world.at(0);
  await world.at(500);
  world.change();
  await world.at(700);
  world.change();
  await world.at(5_000);
  world.change();
  await world.at(7_000);
  assert.deepEqual(world.starts, [0, 5_500]);
  await world.loop.stop();
});

test('while a pod is held, a change to a pod holding no gate is served after the debounce: it may have freed what the held pod waits for', async () => {
  const world = pacedLoop({
    passMs: 10,
    pods: [aPod('a', 'team-a').gated(gate).obj(), released()],
  });
  await world.at(0);
  await world.at(500);
  world.change({ object: released() });
  await world.at(1_000); // before the held pod's own wake-up, a second after the first pass
  assert.deepEqual(world.starts, [0, 520]);
  await world.loop.stop();
});

test('while no pod is held, a gated pod, a pod being deleted, a deleted pod and a node are served after the debounce', async () => {
  const changes: Partial<ViewChange>[] = [
    { object: aPod('new', 'team-a').gated(gate).obj() },
    { object: aPod('other', 'team-a').gated('kueue.x-k8s.io/admission').obj() },
    { object: aPod('r', 'team-a').boundTo('n1').deleting().obj() },
    { type: 'DELETED', object: released() },
    { resource: 'nodes', key: 'n1', object: { metadata: { name: 'n1' } } },
  ];
  for (const change of changes) {
    const world = pacedLoop({ passMs: 10, pods: [released()] });
    await world.at(0);
    await world.at(500);
    world.change(change);
    await world.at(2_000);
    assert.deepEqual(world.starts, [0, 520], JSON.stringify(change));
    await world.loop.stop();
  }
});

/**
 * Starts of passes when a held pod (resourceVersion 10) is modified at 500 ms into
 * `after` (resourceVersion 11), until 900 ms: before the held pod's own wake-up.
 */
async function passesAfterHeldPodBecomes(
  after: (pod: ReturnType<typeof aPod>) => ReturnType<typeof aPod>,
): Promise<number[]> {
  const heldAt = (rv: string) => aPod('a', 'team-a').gated(gate).resourceVersion(rv);
  const before = heldAt('10').obj();
  const world = pacedLoop({ passMs: 10, pods: [before] });
  await world.at(0);
  await world.at(500);
  world.change({ object: after(heldAt('11')).obj(), previous: before });
  await world.at(900);
  await world.loop.stop();
  return world.starts;
}

test("while a pod is held, tollgate's own Released condition landing on it starts no pass: nothing a pass decides on changed", async () => {
  // Holding 10,000 fresh pods writes 10,000 conditions; each landed as a watch event that
  // started a pass over every pod, back to back at the pass share for minutes.
  const starts = await passesAfterHeldPodBecomes((pod) =>
    pod.condition('tollgate.io/Released', 'False', 'Budget'),
  );
  assert.deepEqual(starts, [0]);
});

test('while a pod is held, a change beside its Released condition is served after the debounce', async () => {
  const starts = await passesAfterHeldPodBecomes((pod) =>
    pod.label('priority', 'high').condition('tollgate.io/Released', 'False', 'Budget'),
  );
  assert.deepEqual(starts, [0, 520]);
});

test('a change served after the debounce brings forward a pass a quiet change had set a second away', async () => {
  const world = pacedLoop({ passMs: 10, pods: [released()] });
  await world.at(0);
  await world.at(500);
  world.change(); // due at 5,500
  await world.at(700);
  world.change({ object: aPod('new', 'team-a').gated(gate).obj() }); // due at 720
  await world.at(2_000);
  assert.deepEqual(world.starts, [0, 720]);
  await world.loop.stop();
});

test('every pass is counted in tollgate_gate_release_pass_seconds', async () => {
  const passes = async () =>
    (await passSeconds.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  const before = await passes();
  const world = pacedLoop({ passMs: 10, pods: [released()] });
  await world.at(0);
  await world.at(500);
  world.change({ object: aPod('new', 'team-a').gated(gate).obj() });
  await world.at(900);
  assert.deepEqual(world.starts, [0, 520]);
  assert.equal((await passes()) - before, 2);
  await world.loop.stop();
});
