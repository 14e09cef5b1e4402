/**
 * The clone's maintenance (pack, prune) beside strict intents: a release waits for its
 * intents' push, never for the maintenance of the clone behind it. Over an in-memory
 * store whose pushes and maintenance end when the test says (the packing itself is
 * proven on a real clone in maintain.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GitAuditWriter, type AuditStore } from '../../../src/audit/writer.ts';
import { aDecision } from '../../builders/decision.ts';
import { ManualTimers, settle as settleRounds } from '../../support/manual-timers.ts';

/** A promise the test ends. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Commits and pushes in memory; `holdPushes` / `holdMaintenance` make the next ones wait for the test. */
class HeldStore implements AuditStore {
  readonly events: string[] = [];
  #unpushed = 0;
  pushGate: ReturnType<typeof gate> | undefined;
  maintenanceGate: ReturnType<typeof gate> | undefined;
  async commitFile(path: string) {
    this.#unpushed += 1;
    this.events.push('commit');
    return { oid: String(this.events.length), path };
  }
  /** Push calls (1, 2, ...) refused. */
  readonly refuse = new Set<number>();
  #pushes = 0;
  async push() {
    this.#pushes += 1;
    const refused = this.refuse.has(this.#pushes);
    this.events.push('push');
    await this.pushGate?.promise;
    if (refused) {
      this.events.push('refused');
      throw new Error('remote unavailable');
    }
    const landed = this.#unpushed;
    this.#unpushed = 0;
    this.events.push('pushed');
    return landed;
  }
  async unpushed() {
    return Array.from({ length: this.#unpushed }, () => ({ decisions: 1 }));
  }
  async maintain() {
    this.events.push('maintain');
    await this.maintenanceGate?.promise;
    this.events.push('maintained');
    return { packed: 1, pruned: 0 };
  }
}

/** Enough turns for a cycle, its settle and a queued maintenance to run. */
const settle = (): Promise<void> => settleRounds(20);

function strictWriter(maintainEvery: number) {
  const store = new HeldStore();
  const timers = new ManualTimers();
  const writer = new GitAuditWriter({
    store,
    cluster: 'prod',
    controller: 'tollgate-0',
    mode: 'strict',
    batch: { maxDecisions: 100, maxDelayMs: 5_000 },
    maintainEvery,
    clock: timers.clock,
    timers,
  });
  return { store, writer };
}

/** Records one intent, and a second while the first one's push is out; then lets the push land. */
async function secondIntentDuringFirstPush(
  store: HeldStore,
  writer: GitAuditWriter,
): Promise<[Promise<void>, Promise<void>]> {
  const pushGate = gate();
  store.pushGate = pushGate;
  const first = writer.recordIntents([aDecision('Release', 'p1').obj()]);
  await settle();
  const second = writer.recordIntents([aDecision('Release', 'p2').obj()]);
  store.pushGate = undefined;
  pushGate.open();
  return [first, second];
}

/** Whether `promise` has settled by now. */
async function settledBy(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await settle();
  return done;
}

test('a strict intent is settled once its push lands, while the maintenance it made due still runs', async () => {
  const { store, writer } = strictWriter(1);
  store.maintenanceGate = gate();
  const recorded = writer.recordIntents([aDecision('Release', 'p1').obj()]);
  assert.equal(await settledBy(recorded), true, 'the release goes on once its intent is pushed');
  assert.deepEqual(store.events, ['commit', 'push', 'pushed', 'maintain']);
  store.maintenanceGate.open();
  await recorded;
  await writer.flush();
  assert.deepEqual(store.events.at(-1), 'maintained');
});

test('intents recorded while a push is under way go first: the due maintenance waits for a turn with no intent waiting', async () => {
  const { store, writer } = strictWriter(1);
  await Promise.all(await secondIntentDuringFirstPush(store, writer));
  await settle();
  assert.deepEqual(store.events, [
    'commit',
    'push',
    'pushed',
    'commit',
    'push',
    'pushed',
    'maintain',
    'maintained',
  ]);
});

test('maintenance waits while a commit is unpushed: a push that failed is retried first', async () => {
  const { store, writer } = strictWriter(1);
  store.refuse.add(2);
  const [one, two] = await Promise.allSettled(await secondIntentDuringFirstPush(store, writer));
  assert.deepEqual([one.status, two.status], ['fulfilled', 'rejected']);
  await settle();
  assert.deepEqual(store.events, ['commit', 'push', 'pushed', 'commit', 'push', 'refused']);
  await writer.flush();
  await settle();
  // The refused intents' cancellations, then the push of everything, then maintenance.
  assert.deepEqual(store.events.slice(6), ['commit', 'push', 'pushed', 'maintain', 'maintained']);
});

test('under intents that never stop, maintenance still runs once it is four times overdue: the clone stays bounded', async () => {
  const { store, writer } = strictWriter(1);
  // Every push lets the next intent in before it lands: an intent always waits.
  let next = 0;
  const recorded: Promise<void>[] = [];
  const recordOne = (): void => {
    next += 1;
    recorded.push(writer.recordIntents([aDecision('Release', `p${next}`).obj()]));
  };
  const push = store.push.bind(store);
  store.push = async () => {
    if (next < 12) recordOne();
    return push();
  };
  recordOne();
  await settle();
  await Promise.all(recorded);
  await writer.flush();
  const maintenances = store.events.filter((event) => event === 'maintain').length;
  const commitsBeforeFirst = store.events
    .slice(0, store.events.indexOf('maintain'))
    .filter((event) => event === 'commit').length;
  assert.ok(maintenances >= 2, `maintained ${maintenances} times over 12 commits`);
  assert.equal(commitsBeforeFirst, 4, 'the first maintenance once four commits were made');
});
