/**
 * Property-based tests of the dispatcher queue (src/dispatch/queue.ts), with fast-check.
 *
 * Invariants, checked after every command of random command sequences (model-based
 * testing: fc.commands + fc.asyncModelRun against a controllable executor, a manual
 * clock and manual timers):
 *  I1 bounded: queued + in-flight never exceeds capacity; `full` is answered only when
 *     the queue holds `capacity` writes.
 *  I2 one in flight per key: the executor never sees two writes to one key at once.
 *  I3 concurrency: the executor never has more than `concurrency` writes at once.
 *  I4 coalescing keeps the newest: every write sent is the newest accepted request for
 *     its key at that moment (an older one was replaced, never sent after a newer one).
 *  I5 deadlines: no write is sent after its deadline; `expired` only after the deadline.
 *  I6 exactly once: every accepted request resolves at most once at any time, and
 *     exactly once after the queue is drained and closed.
 *  I7 conflicts are never retried: a write answered 409 / failed patch test is not sent
 *     again and resolves `conflict`.
 *  I8 bands: a work or background write is never sent while a safety write (a delete,
 *     by default) that is the newest for its key, never sent, within its deadline and
 *     not blocked by a write in flight to its key is waiting.
 *  I9 cancel on delete: a write cancelled by `cancelObject(key, {uid})` (the pod was
 *     deleted or replaced) is never sent afterwards; a write for another uid of the same
 *     name is not cancelled by it.
 *  I10 synchronous means one: while the dispatcher is synchronous (the fallback entered
 *     on failures and timeouts), the executor never has two writes at once; the
 *     fallback is left again once writes succeed (checked after the drain).
 *  The reserve: a non-safety write is refused `full` only when the queue holds
 *     capacity - safetyReserve writes (1 while synchronous).
 * Separate properties:
 *  P1 max priority wins and the newest decision is the one sent, whatever the order of
 *     requests (concurrency 1, no aging): send order follows the max priority per key.
 *  P2 no starvation: under a sustained stream of higher-priority writes, a low-priority
 *     write is sent within (priority difference + 1) * agingMs + capacity sends.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { bandOf } from '../../../src/dispatch/bands.ts';
import { PriorityDispatcher } from '../../../src/dispatch/queue.ts';
import type { WriteOperation, WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';

const ops: WriteOperation[] = [
  { type: 'removeGate', gate: 'tollgate.io/quota', gateIndex: 0 },
  { type: 'delete', reason: 'expired' },
  { type: 'annotate', annotations: { 'tollgate.io/state': 'waiting' } },
  { type: 'resize', containers: [{ name: 'app', resources: { requests: { cpu: '200m' } } }] },
];

let ids = 0;
function request(key: string, fields: Partial<WriteRequest> & { now: number }): WriteRequest {
  const [namespace, name] = key.split('/') as [string, string];
  return {
    key,
    target: { namespace, name, uid: `uid-${name}`, resourceVersion: '100' },
    op: ops[0] as WriteOperation,
    priority: 0,
    tenant: 'team-a',
    deadline: fields.now + 60_000,
    decisionId: `d${ids++}`,
    ...fields,
  };
}

type Outcome = 'ok' | '409' | '422test' | '429' | '500' | '404' | 'ECONNRESET';

function errorFor(outcome: Exclude<Outcome, 'ok'>): Error {
  const error = new Error(outcome) as Error & Record<string, unknown>;
  if (outcome === 'ECONNRESET') error.code = 'ECONNRESET';
  else if (outcome === '422test') {
    error.statusCode = 422;
    error.apiMessage = 'the server rejected our request due to an error in our request';
    error.causes = [];
  } else error.statusCode = Number(outcome);
  return error;
}

interface Call {
  readonly request: WriteRequest;
  readonly resolve: (value: { resourceVersion: string }) => void;
  readonly reject: (error: unknown) => void;
}

class Real {
  readonly timers = new ManualTimers();
  readonly capacity: number;
  readonly concurrency: number;
  readonly dispatcher: PriorityDispatcher;
  readonly calls: Call[] = [];
  readonly sent = new Map<string, number>();
  readonly conflicted = new Set<string>();
  /** decisionId -> how often it had been sent when it resolved `conflict`. */
  readonly sentAtConflict = new Map<string, number>();
  readonly results = new Map<string, WriteResult[]>();
  readonly accepted = new Map<string, WriteRequest>();
  readonly newest = new Map<string, string>();
  readonly controllers: AbortController[] = [];
  /** decisionIds cancelObject cancelled while they were not in flight (I9). */
  readonly deleted = new Set<string>();
  readonly safetyReserve: number;
  violations: string[] = [];

  constructor(capacity: number, concurrency: number, safetyReserve = 0) {
    this.capacity = capacity;
    this.concurrency = concurrency;
    this.safetyReserve = safetyReserve;
    this.dispatcher = new PriorityDispatcher({
      capacity,
      safetyReserve,
      // Quick to enter and to leave, so random runs cross the fallback both ways.
      fallback: {
        enabled: true,
        windowAttempts: 4,
        maxFailureRatio: 0.75,
        maxConsecutiveTimeouts: 2,
        maxQueueAgeMs: 6000,
        minDegradedMs: 2000,
        recoverySuccesses: 2,
      },
      concurrency,
      qps: 5,
      burst: 2,
      agingMs: 1000,
      retry: { baseMs: 100, maxMs: 2000, maxAttempts: 4, maxElapsedMs: 20_000 },
      attemptTimeoutMs: 10_000,
      clock: this.timers.clock,
      timers: this.timers,
      random: () => 0.5,
      executor: (req, signal) => this.#execute(req, signal),
    });
  }

  #execute(req: WriteRequest, signal: AbortSignal): Promise<{ resourceVersion: string }> {
    const now = this.timers.clock.now();
    if (this.calls.some((call) => call.request.key === req.key))
      this.violations.push(`I2: two writes to ${req.key}`);
    if (this.calls.length >= this.concurrency)
      this.violations.push(`I3: ${this.calls.length + 1} in flight`);
    if (this.newest.get(req.key) !== req.decisionId)
      this.violations.push(`I4: sent ${req.decisionId}, newest is ${this.newest.get(req.key)}`);
    if (now > req.deadline) this.violations.push(`I5: sent ${req.decisionId} after its deadline`);
    if (this.conflicted.has(req.decisionId))
      this.violations.push(`I7: ${req.decisionId} sent again after a conflict`);
    if (this.results.get(req.decisionId)?.length)
      this.violations.push(`sent ${req.decisionId} after it resolved`);
    if (bandOf(req) !== 'safety') {
      const waiting = this.#waitingSafety(now);
      if (waiting)
        this.violations.push(
          `I8: sent ${req.decisionId} (${bandOf(req)}) while safety ${waiting} waited`,
        );
    }
    if (this.deleted.has(req.decisionId))
      this.violations.push(`I9: sent ${req.decisionId} after its pod was deleted`);
    if (this.dispatcher.synchronous && this.calls.length > 0)
      this.violations.push(`I10: ${this.calls.length + 1} in flight while synchronous`);
    this.sent.set(req.decisionId, (this.sent.get(req.decisionId) ?? 0) + 1);
    return new Promise((resolve, reject) => {
      const call: Call = {
        request: req,
        resolve: (value) => {
          this.#drop(call);
          resolve(value);
        },
        reject: (error) => {
          this.#drop(call);
          reject(error);
        },
      };
      this.calls.push(call);
      signal.addEventListener(
        'abort',
        () => call.reject(Object.assign(new Error('aborted'), { name: 'AbortError' })),
        { once: true },
      );
    });
  }

  /** A never-sent safety write that should go before anything else, if one waits. */
  #waitingSafety(now: number): string | undefined {
    for (const [key, id] of this.newest) {
      const req = this.accepted.get(id);
      if (!req || bandOf(req) !== 'safety' || (this.sent.get(id) ?? 0) > 0) continue;
      if (this.results.get(id)?.length || req.deadline < now || req.signal?.aborted) continue;
      // The dispatcher's own view: an answer given but not yet handled still holds the key.
      if (this.deleted.has(id) || this.dispatcher.isInFlight(key)) continue;
      return id;
    }
    return undefined;
  }

  #drop(call: Call): void {
    const index = this.calls.indexOf(call);
    if (index >= 0) this.calls.splice(index, 1);
  }

  held(): number {
    return this.dispatcher.depth + this.dispatcher.inFlight;
  }

  check(): void {
    if (this.held() > this.capacity)
      this.violations.push(`I1: ${this.held()} held > ${this.capacity}`);
    for (const [id, results] of this.results) {
      if (results.length > 1) this.violations.push(`I6: ${id} resolved ${results.length} times`);
    }
    assert.deepEqual(this.violations, []);
  }
}

type Model = Record<string, never>;

class Enqueue implements fc.AsyncCommand<Model, Real> {
  readonly key: string;
  readonly op: number;
  readonly priority: number;
  readonly tenant: string;
  readonly deadlineIn: number;
  readonly withSignal: boolean;
  readonly incarnation: number;
  constructor(
    key: string,
    op: number,
    priority: number,
    tenant: string,
    deadlineIn: number,
    withSignal: boolean,
    incarnation = 0,
  ) {
    this.incarnation = incarnation;
    this.key = key;
    this.op = op;
    this.priority = priority;
    this.tenant = tenant;
    this.deadlineIn = deadlineIn;
    this.withSignal = withSignal;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, real: Real): Promise<void> {
    const now = real.timers.clock.now();
    const controller = this.withSignal ? new AbortController() : undefined;
    if (controller) real.controllers.push(controller);
    const [namespace, name] = this.key.split('/') as [string, string];
    const req = request(this.key, {
      now,
      target: { namespace, name, uid: `uid-${name}-${this.incarnation}`, resourceVersion: '100' },
      op: ops[this.op] as WriteOperation,
      priority: this.priority,
      tenant: this.tenant,
      deadline: now + this.deadlineIn,
      signal: controller?.signal,
    });
    const heldBefore = real.held();
    // The newest decision is known before the dispatcher may send it synchronously.
    const previousNewest = real.newest.get(this.key);
    real.newest.set(this.key, req.decisionId);
    const answer = real.dispatcher.enqueue(req);
    if (!answer.accepted) {
      if (previousNewest === undefined) real.newest.delete(this.key);
      else real.newest.set(this.key, previousNewest);
      assert.equal(answer.reason, 'full');
      const synchronous = real.dispatcher.synchronous;
      const safety = bandOf(req) === 'safety';
      const limit = synchronous
        ? safety
          ? Math.min(real.capacity, 1 + Math.max(1, real.safetyReserve))
          : 1
        : safety
          ? real.capacity
          : real.capacity - real.safetyReserve;
      if (heldBefore < limit)
        real.violations.push(
          `I1: full with ${heldBefore} of ${limit} (${synchronous ? 'sync' : 'queue'})`,
        );
    } else {
      real.accepted.set(req.decisionId, req);
      real.results.set(req.decisionId, []);
      void answer.done.then((result) => {
        real.results.get(req.decisionId)?.push(result);
        if (result.result === 'conflict') {
          real.conflicted.add(req.decisionId);
          real.sentAtConflict.set(req.decisionId, real.sent.get(req.decisionId) ?? 0);
        }
        if (result.result === 'expired' && real.timers.clock.now() <= req.deadline) {
          real.violations.push(`I5: ${req.decisionId} expired before its deadline`);
        }
      });
    }
    await settle();
    real.check();
  }
  toString(): string {
    return `enqueue(${this.key}#${this.incarnation},${ops[this.op]?.type},p${this.priority},${this.tenant},+${this.deadlineIn}${this.withSignal ? ',signal' : ''})`;
  }
}

class Complete implements fc.AsyncCommand<Model, Real> {
  readonly index: number;
  readonly outcome: Outcome;
  constructor(index: number, outcome: Outcome) {
    this.index = index;
    this.outcome = outcome;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, real: Real): Promise<void> {
    const call = real.calls[this.index % Math.max(1, real.calls.length)];
    if (call) {
      if (this.outcome === 'ok') call.resolve({ resourceVersion: '101' });
      else call.reject(errorFor(this.outcome));
      // I7: once answered with a conflict, the write must never be sent again.
      if (this.outcome === '409' || this.outcome === '422test')
        real.conflicted.add(call.request.decisionId);
    }
    await settle();
    real.check();
  }
  toString(): string {
    return `complete(#${this.index},${this.outcome})`;
  }
}

class Advance implements fc.AsyncCommand<Model, Real> {
  readonly ms: number;
  constructor(ms: number) {
    this.ms = ms;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, real: Real): Promise<void> {
    await real.timers.advance(this.ms);
    real.check();
  }
  toString(): string {
    return `advance(${this.ms})`;
  }
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  readonly key: string;
  readonly viaSignal: boolean;
  constructor(key: string, viaSignal: boolean) {
    this.key = key;
    this.viaSignal = viaSignal;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, real: Real): Promise<void> {
    if (this.viaSignal) real.controllers.shift()?.abort(new Error('caller gave up'));
    else real.dispatcher.cancel(this.key, 'pod deleted');
    await settle();
    real.check();
  }
  toString(): string {
    return this.viaSignal ? 'abortOldestSignal' : `cancel(${this.key})`;
  }
}

class DeletePod implements fc.AsyncCommand<Model, Real> {
  readonly key: string;
  readonly incarnation: number;
  constructor(key: string, incarnation: number) {
    this.key = key;
    this.incarnation = incarnation;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, real: Real): Promise<void> {
    const [, name] = this.key.split('/') as [string, string];
    const uid = `uid-${name}-${this.incarnation}`;
    for (const [id, req] of real.accepted) {
      if (req.key !== this.key || req.target.uid !== uid || real.results.get(id)?.length) continue;
      if (real.calls.some((call) => call.request.decisionId === id)) continue;
      real.deleted.add(id);
    }
    const spared = [...real.accepted.values()].filter(
      (req) =>
        req.key === this.key && req.target.uid !== uid && !real.results.get(req.decisionId)?.length,
    );
    real.dispatcher.cancelObject(this.key, { uid, reason: `pod ${uid} deleted` });
    await settle();
    for (const req of spared) {
      const result = real.results.get(req.decisionId)?.[0];
      if (result?.result === 'cancelled' && result.message === `pod ${uid} deleted`)
        real.violations.push(
          `I9: ${req.decisionId} of ${req.target.uid} cancelled by the delete of ${uid}`,
        );
    }
    real.check();
  }
  toString(): string {
    return `deletePod(${this.key}#${this.incarnation})`;
  }
}

const keys = ['ns/a', 'ns/b', 'ns/c', 'ns/d', 'other/e'];
const commands = [
  fc
    .tuple(
      fc.constantFrom(...keys),
      fc.integer({ min: 0, max: 3 }),
      fc.integer({ min: 0, max: 3 }),
      fc.constantFrom('team-a', 'team-b', 'team-c'),
      fc.integer({ min: 0, max: 8000 }),
      fc.boolean(),
      fc.integer({ min: 0, max: 1 }),
    )
    .map(
      ([key, op, priority, tenant, deadlineIn, withSignal, incarnation]) =>
        new Enqueue(key, op, priority, tenant, deadlineIn, withSignal, incarnation),
    ),
  fc
    .tuple(
      fc.nat(10),
      fc.constantFrom<Outcome>(
        'ok',
        'ok',
        'ok',
        '409',
        '422test',
        '429',
        '500',
        '404',
        'ECONNRESET',
      ),
    )
    .map(([index, outcome]) => new Complete(index, outcome)),
  fc.integer({ min: 0, max: 3000 }).map((ms) => new Advance(ms)),
  fc
    .tuple(fc.constantFrom(...keys), fc.boolean())
    .map(([key, viaSignal]) => new Cancel(key, viaSignal)),
  fc
    .tuple(fc.constantFrom(...keys), fc.integer({ min: 0, max: 1 }))
    .map(([key, incarnation]) => new DeletePod(key, incarnation)),
];

test('random command sequences keep every queue invariant (I1-I10) and resolve every accepted write exactly once', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 6 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 0, max: 2 }),
      fc.commands(commands, { maxCommands: 60, size: 'max' }),
      async (capacity, concurrency, reserve, cmds) => {
        const real = new Real(capacity, concurrency, Math.min(reserve, capacity - 1));
        await fc.asyncModelRun(() => ({ model: {}, real }), cmds);
        // Drain: answer everything in flight and let time pass until nothing is left.
        for (let round = 0; round < 200 && real.held() > 0; round++) {
          for (const call of [...real.calls]) call.resolve({ resourceVersion: '102' });
          await real.timers.advance(1000);
          real.check();
        }
        // Nothing fails any more: after a quiet spell the fallback must have been left.
        await real.timers.advance(5000);
        assert.equal(
          real.dispatcher.degraded,
          false,
          'I10: the fallback was left once nothing failed',
        );
        await real.dispatcher.close({ cancelQueued: true });
        await settle();
        real.check();
        for (const [id, results] of real.results) {
          assert.equal(results.length, 1, `I6: ${id} resolved ${results.length} times`);
        }
        for (const [id, sentThen] of real.sentAtConflict) {
          assert.equal(real.sent.get(id), sentThen, `I7: ${id} sent again after a conflict`);
        }
      },
    ),
    { numRuns: 150 },
  );
});

test('the highest priority among coalesced requests wins and the newest request is the one sent (P1)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.tuple(fc.constantFrom('ns/a', 'ns/b', 'ns/c', 'ns/d'), fc.integer({ min: 0, max: 9 })),
        {
          minLength: 1,
          maxLength: 25,
        },
      ),
      async (requests) => {
        const timers = new ManualTimers();
        const order: WriteRequest[] = [];
        let release!: () => void;
        // A blocker holds the only worker so every request below is queued before any is sent.
        const paused = new PriorityDispatcher({
          capacity: 100,
          concurrency: 1,
          qps: 1000,
          burst: 1000,
          agingMs: 1e12,
          clock: timers.clock,
          timers,
          executor: async (req) => {
            order.push(req);
            if (req.key === 'blocker/x') await new Promise<void>((resolve) => (release = resolve));
            return { resourceVersion: '1' };
          },
        });
        assert.ok(
          paused.enqueue(request('blocker/x', { now: timers.clock.now(), priority: 100 })).accepted,
        );
        const maxPriority = new Map<string, number>();
        const newest = new Map<string, string>();
        for (const [key, priority] of requests) {
          const req = request(key, { now: timers.clock.now(), priority });
          maxPriority.set(key, Math.max(maxPriority.get(key) ?? -1, priority));
          newest.set(key, req.decisionId);
          assert.ok(paused.enqueue(req).accepted);
        }
        release();
        await paused.close();
        const sent = order.filter((req) => req.key !== 'blocker/x');
        assert.deepEqual(
          sent.map((req) => req.decisionId).sort(),
          [...newest.values()].sort(),
          'each key sent once, with its newest decision',
        );
        const priorities = sent.map((req) => maxPriority.get(req.key) as number);
        for (let i = 1; i < priorities.length; i++) {
          assert.ok(
            (priorities[i - 1] as number) >= (priorities[i] as number),
            `sent in max-priority order: ${priorities.join(',')}`,
          );
        }
      },
    ),
    { numRuns: 200 },
  );
});

test('a low-priority write is sent within the aging bound under sustained high-priority load (P2)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 100, max: 2000 }),
      fc.integer({ min: 10, max: 500 }),
      fc.integer({ min: 2, max: 8 }),
      async (difference, agingMs, serviceMs, capacity) => {
        const timers = new ManualTimers();
        const clock = timers.clock;
        // A holder object: TypeScript does not track assignments made inside the executor closure.
        const flight = {} as { current?: () => void };
        const finishCurrent = (): void => {
          const finish = flight.current;
          flight.current = undefined;
          finish?.();
        };
        let lowSentAt: number | undefined;
        const dispatcher = new PriorityDispatcher({
          capacity,
          concurrency: 1,
          qps: 1e6,
          burst: 1e6,
          agingMs,
          clock,
          timers,
          executor: (req) =>
            new Promise((resolve) => {
              if (req.key === 'low/x') lowSentAt = clock.now();
              flight.current = () => resolve({ resourceVersion: '1' });
            }),
        });
        let next = 0;
        const high = (): void => {
          // Keep the queue full of fresh high-priority work.
          while (dispatcher.depth + dispatcher.inFlight < capacity) {
            dispatcher.enqueue(
              request(`high/h${next++}`, {
                now: clock.now(),
                priority: 10,
                deadline: Number.MAX_SAFE_INTEGER,
              }),
            );
          }
        };
        high();
        // Make room for the low one by finishing the first high write.
        finishCurrent();
        await settle();
        const low = dispatcher.enqueue(
          request('low/x', {
            now: clock.now(),
            priority: 10 - difference,
            tenant: 'team-low',
            deadline: Number.MAX_SAFE_INTEGER,
          }),
        );
        if (!low.accepted) {
          // The finished write's slot was already taken by nothing: the queue must have room.
          assert.fail('low-priority write refused although a slot was freed');
        }
        const start = clock.now();
        const bound = (difference + 1) * agingMs + (capacity + 1) * serviceMs;
        while (lowSentAt === undefined && clock.now() - start <= bound + serviceMs) {
          high();
          await timers.advance(serviceMs);
          finishCurrent();
          await settle();
        }
        assert.ok(lowSentAt !== undefined, `low-priority write not sent within ${bound} ms`);
        assert.ok(
          lowSentAt - start <= bound,
          `sent after ${lowSentAt - start} ms, bound ${bound} ms`,
        );
        finishCurrent();
        await dispatcher.close({ cancelQueued: true });
      },
    ),
    { numRuns: 100 },
  );
});
