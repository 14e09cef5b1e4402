/**
 * Resize state read back from a pod is authenticated: tollgate seals each state
 * annotation with an HMAC over the pod's uid, the annotation's name and its value, keyed
 * from the run configuration. A state the tenant wrote, copied from another pod, edited,
 * or sealed with a key tollgate does not hold is ignored (as if absent) and the
 * rejection is part of the plan, for the loop to record, meter and alert on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PodResizePlan } from '../../../src/decide/resize-plan.ts';
import { lastGoodAnnotation, stateAnnotation } from '../../../src/decide/resize-state.ts';
import {
  parseStateKeys,
  seal,
  stateKeyRing,
  unseal,
  type StateKeyRing,
} from '../../../src/decide/resize-seal.ts';
import {
  aRunningPod,
  decideResizeFor,
  sealedValue,
  steady,
  testStateKeys,
} from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const low = [{ signal: 'queue', samples: steady(1, now) }];
const high = [{ signal: 'queue', samples: steady(500, now) }];
const otherKeys = stateKeyRing(['a-key-tollgate-does-not-hold-0123456789']);
const uid = 'uid-web-0';

const memoryDown = JSON.stringify({
  attempts: 1,
  requestedAt: now - 200_000,
  direction: { memory: 'down' },
  restarts: { app: 0 },
  target: { containers: { app: { requests: { cpu: '500m', memory: '128Mi' } } } },
});
const lastGood = JSON.stringify({
  containers: { app: { requests: { cpu: '500m', memory: '768Mi' } } },
});

/** A pod OOMKilled after a memory step down, with the given annotations as its state. */
function oomAfterDecrease(annotations: Record<string, string>) {
  const builder = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '128Mi' })
    .oomKilled('app', new Date(now - 5000).toISOString());
  for (const [k, v] of Object.entries(annotations)) builder.annotation(k, v);
  return builder.obj();
}

function sealedFor(podUid: string, keys: StateKeyRing = testStateKeys) {
  return {
    [lastGoodAnnotation]: seal(keys, podUid, lastGoodAnnotation, lastGood),
    [stateAnnotation]: seal(keys, podUid, stateAnnotation, memoryDown),
  };
}

function plan(annotations: Record<string, string>, stateKeys = testStateKeys): PodResizePlan {
  return decideResizeFor(now, { readings: low, pod: oomAfterDecrease(annotations), stateKeys });
}

test('a state written by hand, inside the policy bounds, is not honoured', () => {
  const p = plan({ [lastGoodAnnotation]: lastGood, [stateAnnotation]: memoryDown });
  assert.deepEqual(
    p.decisions.map((d) => d.kind).filter((k) => k === 'Rollback'),
    [],
    'no rollback to a size the tenant chose',
  );
});

test('stored state is honoured only when tollgate sealed it for this pod with a key it holds', () => {
  const honest = sealedFor(uid);
  const cases: {
    name: string;
    annotations: Record<string, string>;
    keys?: StateKeyRing;
    rollback: boolean;
    rejected: string[];
  }[] = [
    { name: 'sealed for this pod: rolled back', annotations: honest, rollback: true, rejected: [] },
    {
      name: 'written without a seal: ignored as unsigned',
      annotations: { [lastGoodAnnotation]: lastGood, [stateAnnotation]: memoryDown },
      rollback: false,
      rejected: ['unsigned', 'unsigned'],
    },
    {
      name: 'copied from another pod: ignored as forged',
      annotations: sealedFor('uid-web-1'),
      rollback: false,
      rejected: ['forged', 'forged'],
    },
    {
      name: 'the value edited after sealing: ignored as forged',
      annotations: {
        ...honest,
        [lastGoodAnnotation]: (honest[lastGoodAnnotation] ?? '').replace('768Mi', '1Gi'),
      },
      rollback: false,
      rejected: ['forged'],
    },
    {
      name: 'the last-good sealed as the state (annotations swapped): ignored as forged',
      annotations: {
        [lastGoodAnnotation]: seal(testStateKeys, uid, stateAnnotation, lastGood),
        [stateAnnotation]: honest[stateAnnotation] ?? '',
      },
      rollback: false,
      rejected: ['forged'],
    },
    {
      name: 'sealed with a key tollgate does not hold: ignored as unknown-key',
      annotations: sealedFor(uid, otherKeys),
      rollback: false,
      rejected: ['unknown-key', 'unknown-key'],
    },
    {
      name: 'sealed with a retired key still on the ring: honoured (rotation)',
      annotations: sealedFor(uid, otherKeys),
      keys: { signing: testStateKeys.signing, verifying: [otherKeys.signing] },
      rollback: true,
      rejected: [],
    },
    {
      name: 'sealed but not a JSON object: ignored as corrupt',
      annotations: {
        ...honest,
        [lastGoodAnnotation]: seal(testStateKeys, uid, lastGoodAnnotation, '[1,2]'),
      },
      rollback: false,
      rejected: ['corrupt'],
    },
  ];
  for (const c of cases) {
    const p = plan(c.annotations, c.keys);
    const kinds = p.decisions.map((d) => d.kind);
    assert.equal(kinds.includes('Rollback'), c.rollback, `${c.name}: ${kinds.join()}`);
    assert.deepEqual(
      p.stateRejected?.rejected.map((r) => r.reason) ?? [],
      c.rejected,
      `${c.name}: rejections`,
    );
    if (c.rejected.length === 0) continue;
    const record = p.stateRejected?.decision;
    assert.equal(record?.outcome.result, 'recorded', `${c.name}: recorded, no write`);
    assert.match(record?.reason ?? '', /resize state on the pod ignored/);
    assert.ok(
      record?.inputs.some((i) => i.condition === 'StoredState' && !i.met),
      `${c.name}: the rejection is an input of the record`,
    );
  }
});

test('an honest rollback restores the sealed last good exactly', () => {
  const p = plan(sealedFor(uid));
  const resize = p.writes.find((w) => w.op.type === 'resize')?.op;
  assert.ok(resize?.type === 'resize');
  assert.deepEqual(resize.containers[0]?.resources.requests, { cpu: '500m', memory: '768Mi' });
});

test('every state value tollgate writes is sealed for the pod, and reads back as written', () => {
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' }, { cpu: '1', memory: '512Mi' })
    .obj();
  const p = decideResizeFor(now, { readings: high, pod });
  const annotate = p.writes.find((w) => w.op.type === 'annotate')?.op;
  assert.ok(annotate?.type === 'annotate');
  for (const [name, text] of Object.entries(annotate.annotations)) {
    assert.match(text ?? '', /^v1\./, `${name} is sealed`);
    assert.ok(sealedValue(uid, name, text), `${name} verifies for the pod it was written for`);
    assert.throws(() => sealedValue('uid-web-1', name, text), /does not match/);
  }
  assert.equal(p.stateRejected, undefined, 'no stored state, nothing rejected');
});

test('the state key file: one key per line, the first seals, short keys and empty files refused', () => {
  const long = (c: string) => c.repeat(32);
  const cases: { name: string; text: string; error?: RegExp; keys?: number }[] = [
    { name: 'one key', text: `${long('a')}\n`, keys: 1 },
    {
      name: 'a new key first, the old one still verifying',
      text: `${long('b')}\n${long('a')}`,
      keys: 2,
    },
    { name: 'comments and blank lines skipped', text: `# rotated\n\n${long('a')}\n`, keys: 1 },
    { name: 'a short key names its line', text: `${long('a')}\nshort\n`, error: /line 2: .*32/ },
    { name: 'an empty file', text: '\n# nothing\n', error: /no key/ },
  ];
  for (const c of cases) {
    const ring = parseStateKeys(c.text);
    if (c.error) assert.match('error' in ring ? ring.error : '', c.error, c.name);
    else {
      assert.ok(!('error' in ring), c.name);
      assert.equal(1 + (ring.verifying?.length ?? 0), c.keys, c.name);
    }
  }
  const rotated = parseStateKeys(`${long('b')}\n${long('a')}`);
  const old = parseStateKeys(long('a'));
  assert.ok(!('error' in rotated) && !('error' in old));
  const sealedByOld = seal(old, uid, stateAnnotation, '{}');
  assert.ok(unseal(rotated, uid, stateAnnotation, sealedByOld).ok, 'the old key still verifies');
  assert.match(
    seal(rotated, uid, stateAnnotation, '{}'),
    new RegExp(`^v1\\.${rotated.signing.id}\\.`),
  );
});

test('an OOM kill after a decrease, with the last good rejected, still raises memory one step within bounds, cooldown or not', () => {
  const p = plan({
    [lastGoodAnnotation]: JSON.stringify({
      containers: { app: { requests: { cpu: '500m', memory: '1Gi' } } },
    }),
    [stateAnnotation]: seal(
      testStateKeys,
      uid,
      stateAnnotation,
      JSON.stringify({ ...JSON.parse(memoryDown), requestedAt: now - 20_000 }),
    ),
  });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Resize'],
    p.skip ?? '',
  );
  const resize = p.writes.find((w) => w.op.type === 'resize')?.op;
  assert.ok(resize?.type === 'resize');
  // The signal is low: cpu steps down; memory steps up, as the OOM kill asks.
  assert.deepEqual(resize.containers[0]?.resources.requests, { cpu: '250m', memory: '256Mi' });
});

test('that memory step does not depend on the OOM kill still being inside the signal window', () => {
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '128Mi' })
    .oomKilled('app', new Date(now - 600_000).toISOString())
    .annotation(lastGoodAnnotation, lastGood)
    .sealed(stateAnnotation, { ...JSON.parse(memoryDown), requestedAt: now - 900_000 })
    .obj();
  const p = decideResizeFor(now, { readings: [], pod });
  const resize = p.writes.find((w) => w.op.type === 'resize')?.op;
  assert.ok(resize?.type === 'resize', p.skip ?? p.decisions.map((d) => d.reason).join());
  assert.equal(resize.containers[0]?.resources.requests?.memory, '256Mi');
});
