import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPolicyFromFiles, type PolicyFile } from '../../../src/policy/load.ts';
import { defaultStaleness } from '../../../src/policy/compile.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { loadSchema } from '../../../src/policy/schema.ts';

const v = 'apiVersion: tollgate.io/v1alpha1\n';
const settings = `${v}kind: Settings\nspec:\n  cluster: test\n`;
const tenant = (name: string, namespaces: string, prefixes: string, extra = '') =>
  `${v}kind: Tenant\nmetadata:\n  name: ${name}\nspec:\n  namespaces: [${namespaces}]\n  gatePrefixes: [${prefixes}]\n${extra}`;
const gate = (name: string, tenantName: string, gateName: string, extra = '') =>
  `${v}kind: GatePolicy\nmetadata:\n  name: ${name}\nspec:\n  tenant: ${tenantName}\n  gate: ${gateName}\n${extra}`;
const approval = (action: string, target: string) =>
  `${v}kind: Approval\nmetadata:\n  name: x\nspec:\n  action: ${action}\n  target: ${target}\n  approvedBy: ops\n  reason: reviewed\n`;
const gangGate = gate(
  'trainer',
  'team-a',
  'a.tollgate.io/gang',
  '  conditions:\n    - { type: GangComplete, groupLabel: gang, sizeAnnotation: size }\n',
);
const resize = (bounds: string, extra = '') =>
  `${v}kind: ResizePolicy\nmetadata:\n  name: web\nspec:\n  tenant: team-a\n  containers:\n    app:\n${bounds}  signals:\n    - name: load\n      query: 'up{namespace="$namespace"}'\n      scaleUpAbove: 2\n${extra}`;

function repo(files: Record<string, string>): PolicyFile[] {
  return Object.entries({
    'tollgate.yaml': settings,
    'tenants/a.yaml': tenant('team-a', 'a1, a2', 'a.tollgate.io/'),
    ...files,
  }).map(([path, content]) => ({ path, content }));
}

interface Case {
  readonly name: string;
  readonly files: Record<string, string>;
  /** `file#doc path: message` fragments that must all be reported; [] = valid. */
  readonly errors: readonly string[];
}

const cases: Case[] = [
  { name: 'a repository with settings and one tenant is valid', files: {}, errors: [] },
  {
    name: 'a gate under the tenant prefix is accepted',
    files: { 'g.yaml': gate('ready', 'team-a', 'a.tollgate.io/ready') },
    errors: [],
  },
  {
    name: 'a gate equal to the bare prefix is refused',
    files: {
      'g.yaml': gate('ready', 'team-a', 'a.tollgate.io/x', ''),
      't.yaml': tenant('team-x', 'x1', 'x.tollgate.io/ready'),
      'h.yaml': gate('bare', 'team-x', 'x.tollgate.io/ready'),
    },
    errors: [
      'h.yaml#0 spec.gate: gate "x.tollgate.io/ready" is not under a prefix tenant "team-x" owns',
    ],
  },
  {
    name: 'prefixes of two tenants that only share leading characters do not overlap',
    files: {
      'tenants/a.yaml': tenant('team-a', 'a1', 'a.tollgate.io/x-'),
      'tenants/b.yaml': tenant('team-b', 'b1', 'a.tollgate.io/y-'),
    },
    errors: [],
  },
  {
    name: 'two tenants claiming the same prefix are refused',
    files: { 'tenants/b.yaml': tenant('team-b', 'b1', 'a.tollgate.io/') },
    errors: [
      'tenants/b.yaml#0 spec.gatePrefixes[0]: gate prefix "a.tollgate.io/" overlaps "a.tollgate.io/" of tenant "team-a"',
    ],
  },
  {
    name: "a second tenant claiming one of the first tenant's namespaces is refused at that namespace",
    files: { 'tenants/b.yaml': tenant('team-b', 'b1, a2', 'b.tollgate.io/') },
    errors: [
      'tenants/b.yaml#0 spec.namespaces[1]: namespace "a2" is already claimed by tenant "team-a"',
    ],
  },
  {
    name: 'tenants with the same name in two files are refused, naming the first file',
    files: { 'tenants/b.yaml': tenant('team-a', 'b1', 'b.tollgate.io/') },
    errors: [
      'tenants/b.yaml#0 metadata.name: Tenant "team-a" is already defined in tenants/a.yaml#0',
    ],
  },
  {
    name: 'a GatePolicy of an unknown tenant is refused and lists the known tenants',
    files: { 'g.yaml': gate('ready', 'team-q', 'a.tollgate.io/ready') },
    errors: ['g.yaml#0 spec.tenant: tenant "team-q" is not defined (tenants: team-a)'],
  },
  {
    name: 'In without values is refused',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        '  selector:\n    matchExpressions:\n      - { key: tier, operator: In }\n',
      ),
    },
    errors: [
      'g.yaml#0 spec.selector.matchExpressions[0].values: operator In needs at least one value',
    ],
  },
  {
    name: 'Exists with values is refused',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        '  selector:\n    matchExpressions:\n      - { key: tier, operator: Exists, values: [x] }\n',
      ),
    },
    errors: ['g.yaml#0 spec.selector.matchExpressions[0].values: operator Exists takes no values'],
  },
  {
    name: 'selector label keys and values are checked as the API server checks them',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        [
          '  selector:',
          '    matchLabels:',
          '      Example.com/app: trainer',
          '      app/x/y: a',
          '      tier: -web',
          '    matchExpressions:',
          '      - { key: team_, operator: Exists }',
          '      - { key: zone, operator: In, values: [eu-1, "bad value"] }',
          '',
        ].join('\n'),
      ),
    },
    errors: [
      'g.yaml#0 spec.selector.matchLabels["Example.com/app"]: label key: prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters',
      'g.yaml#0 spec.selector.matchLabels["app/x/y"]: label key: a qualified name must consist of alphanumeric characters',
      'g.yaml#0 spec.selector.matchLabels.tier: label value "-web": a valid label must be an empty string or consist of alphanumeric characters',
      'g.yaml#0 spec.selector.matchExpressions[0].key: label key: name part must consist of alphanumeric characters',
      'g.yaml#0 spec.selector.matchExpressions[1].values[1]: label value "bad value": a valid label must be an empty string',
    ],
  },
  {
    name: 'a label value of 64 characters is refused, 63 accepted',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        `  selector:\n    matchExpressions:\n      - { key: k, operator: NotIn, values: [${'a'.repeat(63)}, ${'b'.repeat(64)}] }\n`,
      ),
    },
    errors: [
      'g.yaml#0 spec.selector.matchExpressions[0].values[1]: must NOT have more than 63 characters',
    ],
  },
  {
    name: "a resize policy's selector is checked the same way",
    files: {
      'r.yaml': resize(
        '      cpu: { min: 100m, max: "1", step: 100m }\n',
        '  selector:\n    matchLabels:\n      "/app": web\n',
      ),
    },
    errors: [
      'r.yaml#0 spec.selector.matchLabels["/app"]: label key: prefix part must be non-empty',
    ],
  },
  {
    name: "a Schedule window's cron expression and time zone are checked by the cron package",
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        '  conditions:\n    - type: Schedule\n      windows:\n        - { cron: "* 1-4 * * *", timeZone: Europe/Berlin }\n        - { cron: "61 1 * * *", timeZone: UTC }\n        - { cron: "* 1-4 * * *", timeZone: Mars/Base }\n',
      ),
    },
    errors: [
      'g.yaml#0 spec.conditions[0].windows[1]: cron "61 1 * * *" in UTC: Field value (61) is out of range',
      'g.yaml#0 spec.conditions[0].windows[2]: cron "* 1-4 * * *" in Mars/Base: Invalid timezone.',
    ],
  },
  {
    name: "a gang's group label and size annotation must be qualified names",
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        '  conditions:\n    - { type: GangComplete, groupLabel: "gang name", sizeAnnotation: "a.tollgate.io/" }\n',
      ),
    },
    errors: [
      'g.yaml#0 spec.conditions[0].groupLabel: label key: name part must consist of alphanumeric characters',
      'g.yaml#0 spec.conditions[0].sizeAnnotation: annotation key: name part must be non-empty',
    ],
  },
  {
    name: 'label keys and values the API server accepts are accepted',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        [
          '  selector:',
          '    matchLabels:',
          '      app.kubernetes.io/name: My_App.v2',
          '      A-b_c.D: ""',
          `      ${'x'.repeat(63)}: "1"`,
          '    matchExpressions:',
          '      - { key: example.com/Tier, operator: In, values: [a, "0"] }',
          '  conditions:',
          '    - { type: GangComplete, groupLabel: ml.tollgate.io/gang, sizeAnnotation: ml.tollgate.io/Gang-Size }',
          '',
        ].join('\n'),
      ),
    },
    errors: [],
  },
  {
    name: 'a recheck whose initial delay exceeds its maximum is refused',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        '  recheck: { initial: 10m, max: 1m }\n',
      ),
    },
    errors: ['g.yaml#0 spec.recheck: initial (10m) is greater than max (1m)'],
  },
  {
    name: 'an ObjectCondition in a namespace of the tenant is accepted',
    files: {
      'g.yaml': gate(
        'ready',
        'team-a',
        'a.tollgate.io/ready',
        '  conditions:\n    - type: ObjectCondition\n      object: { apiVersion: v1, kind: ConfigMap, namespace: a2, name: flag }\n      conditionType: Ready\n',
      ),
    },
    errors: [],
  },
  {
    name: 'resize bounds with min above max and a zero step are both reported',
    files: { 'r.yaml': resize('      cpu: { min: "2", max: 500m, step: 0m }\n') },
    errors: [
      'r.yaml#0 spec.containers.app.cpu: min (2) is greater than max (500m)',
      'r.yaml#0 spec.containers.app.cpu.step: step (0m) must be greater than zero',
    ],
  },
  {
    name: 'a resize quantity that does not parse is refused at its field',
    files: { 'r.yaml': resize('      memory: { min: 1Gb, max: 2Gi, step: 128Mi }\n') },
    errors: ['r.yaml#0 spec.containers.app.memory.min: "1Gb" is not a Kubernetes quantity'],
  },
  {
    name: 'a signal query without a namespace matcher is refused',
    files: {
      'r.yaml': resize('      cpu: { min: 100m, max: "1", step: 100m }\n').replace(
        'up{namespace="$namespace"}',
        'sum(up)',
      ),
    },
    errors: ['r.yaml#0 spec.signals[0].query: query has no namespace matcher'],
  },
  {
    name: 'an SLO query reading another namespace is refused',
    files: {
      'r.yaml': resize(
        '      cpu: { min: 100m, max: "1", step: 100m }\n',
        '  slo: { query: \'errors{namespace="b1"}\', above: 1, for: 5m }\n',
      ),
    },
    errors: ['r.yaml#0 spec.slo.query: namespace "b1" is not one of the tenant\'s namespaces'],
  },
  {
    name: 'scaleDownBelow at or above scaleUpAbove is refused',
    files: {
      'r.yaml': resize('      cpu: { min: 100m, max: "1", step: 100m }\n').replace(
        'scaleUpAbove: 2',
        'scaleUpAbove: 2\n      scaleDownBelow: 3',
      ),
    },
    errors: ['r.yaml#0 spec.signals[0]: scaleDownBelow (3) must be below scaleUpAbove (2)'],
  },
  {
    name: 'an Approval resuming a ResizePolicy in a namespace outside its tenant is refused',
    files: {
      'r.yaml': resize('      cpu: { min: 100m, max: "1", step: 100m }\n'),
      'approvals/x.yaml': `${v}kind: Approval\nmetadata:\n  name: resume\nspec:\n  action: Resume\n  target: { kind: ResizePolicy, name: web, namespace: b1 }\n  approvedBy: ops\n  reason: reviewed\n`,
    },
    errors: [
      'approvals/x.yaml#0 spec.target.namespace: namespace "b1" is outside tenant "team-a" of ResizePolicy "web"',
    ],
  },
  {
    name: 'an Approval of the pods a selector picks in a tenant namespace is accepted',
    files: {
      'approvals/x.yaml': approval(
        'Release',
        '{ kind: Pods, namespace: a1, selector: { matchLabels: { tier: batch } } }',
      ),
    },
    errors: [],
  },
  {
    name: 'an Approval with an empty selector is refused',
    files: {
      'approvals/x.yaml': approval('Release', '{ kind: Pods, namespace: a1, selector: {} }'),
    },
    errors: [
      'approvals/x.yaml#0 spec.target.selector: an empty selector would pick every pod of the namespace',
    ],
  },
  {
    name: 'an Approval selector In without values is refused at its own path',
    files: {
      'approvals/x.yaml': approval(
        'Cancel',
        '{ kind: Pods, namespace: a1, selector: { matchExpressions: [{ key: tier, operator: In }] } }',
      ),
    },
    errors: [
      'approvals/x.yaml#0 spec.target.selector.matchExpressions[0].values: operator In needs at least one value',
    ],
  },
  {
    name: 'an Approval of pods outside every tenant is refused',
    files: {
      'approvals/x.yaml': approval(
        'Release',
        '{ kind: Pods, namespace: zz, selector: { matchLabels: { a: b } } }',
      ),
    },
    errors: ['approvals/x.yaml#0 spec.target.namespace: namespace "zz" belongs to no tenant'],
  },
  {
    name: 'an Approval of a gang of a GatePolicy with GangComplete is accepted',
    files: {
      'g.yaml': gangGate,
      'approvals/x.yaml': approval(
        'Cancel',
        '{ kind: Gang, gatePolicy: trainer, namespace: a1, gang: run-1 }',
      ),
    },
    errors: [],
  },
  {
    name: 'an Approval of a gang of a GatePolicy without GangComplete is refused',
    files: {
      'g.yaml': gate('ready', 'team-a', 'a.tollgate.io/ready'),
      'approvals/x.yaml': approval(
        'Cancel',
        '{ kind: Gang, gatePolicy: ready, namespace: a1, gang: run-1 }',
      ),
    },
    errors: [
      'approvals/x.yaml#0 spec.target.gatePolicy: GatePolicy "ready" has no GangComplete condition, so no gangs',
    ],
  },
  {
    name: 'an Approval of a gang outside the GatePolicy tenant is refused',
    files: {
      'g.yaml': gangGate,
      'tenants/b.yaml': tenant('team-b', 'b1', 'b.tollgate.io/'),
      'approvals/x.yaml': approval(
        'Cancel',
        '{ kind: Gang, gatePolicy: trainer, namespace: b1, gang: run-1 }',
      ),
    },
    errors: [
      'approvals/x.yaml#0 spec.target.namespace: namespace "b1" is outside tenant "team-a" of GatePolicy "trainer"',
    ],
  },
  {
    name: 'an Approval of a whole GatePolicy is accepted',
    files: {
      'g.yaml': gangGate,
      'approvals/x.yaml': approval('Release', '{ kind: GatePolicy, name: trainer }'),
    },
    errors: [],
  },
  {
    name: 'an Approval of an undefined GatePolicy is refused',
    files: { 'approvals/x.yaml': approval('Release', '{ kind: GatePolicy, name: nope }') },
    errors: ['approvals/x.yaml#0 spec.target.name: GatePolicy "nope" is not defined'],
  },
  {
    name: 'Resume of a GatePolicy is refused',
    files: {
      'g.yaml': gangGate,
      'approvals/x.yaml': approval('Resume', '{ kind: GatePolicy, name: trainer }'),
    },
    errors: [
      'approvals/x.yaml#0 spec.action: Resume applies to a ResizePolicy target, not a GatePolicy',
    ],
  },
  {
    name: 'Settings outside tollgate.yaml are refused',
    files: { 'other.yaml': settings },
    errors: ['other.yaml#0 kind: Settings belong in tollgate.yaml'],
  },
  {
    name: 'a document that is a list, not a mapping, is refused',
    files: { 'list.yaml': '- a\n- b\n' },
    errors: ['list.yaml#0: document is not a mapping'],
  },
  {
    name: 'a wrong apiVersion is refused',
    files: { 'g.yaml': gate('ready', 'team-a', 'a.tollgate.io/ready').replace('v1alpha1', 'v2') },
    errors: ['g.yaml#0 apiVersion: must be "tollgate.io/v1alpha1"'],
  },
  {
    name: 'errors in several files are all reported at once',
    files: {
      'g.yaml': gate('ready', 'team-q', 'a.tollgate.io/ready'),
      'r.yaml': resize('      cpu: { min: "2", max: "1", step: 100m }\n'),
    },
    errors: [
      'g.yaml#0 spec.tenant',
      'r.yaml#0 spec.containers.app.cpu: min (2) is greater than max (1)',
    ],
  },
];

for (const c of cases) {
  test(c.name, () => {
    const result = loadPolicyFromFiles(repo(c.files));
    if (c.errors.length === 0) {
      assert.equal(
        result.ok,
        true,
        result.ok ? '' : result.errors.map(formatPolicyError).join('\n'),
      );
      return;
    }
    assert.equal(result.ok, false);
    if (result.ok) return;
    const printed = result.errors.map(formatPolicyError);
    for (const fragment of c.errors) {
      assert.ok(
        printed.some((p) => p.includes(fragment)),
        `expected "${fragment}" among:\n${printed.join('\n')}`,
      );
    }
  });
}

test("the audit window: whole hours of the tip's folders, 0h keeps them all; anything else names the field", () => {
  const windowOf = (value: string) =>
    loadPolicyFromFiles(
      repo({ 'tollgate.yaml': `${settings}  audit:\n    window: ${JSON.stringify(value)}\n` }),
    );
  for (const [value, hours] of [
    ['168h', 168],
    ['1h', 1],
    ['0h', 0],
  ] as const) {
    const result = windowOf(value);
    assert.equal(result.ok, true, result.ok ? '' : result.errors.map(formatPolicyError).join());
    if (result.ok) assert.equal(result.policy.settings.audit.windowHours, hours);
  }
  for (const value of ['90m', '1d', '24', '-1h', '1.5h']) {
    const result = windowOf(value);
    assert.equal(result.ok, false, value);
    if (!result.ok)
      assert.match(
        result.errors.map(formatPolicyError).join('\n'),
        /tollgate\.yaml#0 spec\.audit\.window/,
        value,
      );
  }
});

test('without a StalenessPolicy the documented defaults are in force', () => {
  const result = loadPolicyFromFiles(repo({}));
  assert.equal(result.ok, true);
  if (result.ok) assert.deepEqual(result.policy.staleness, defaultStaleness);
});

test('the compiled defaults are the defaults the schemas document', () => {
  const result = loadPolicyFromFiles(
    repo({
      'g.yaml': gate('ready', 'team-a', 'a.tollgate.io/ready'),
      'r.yaml': resize('      cpu: { min: 100m, max: "1", step: 100m }\n'),
    }),
  );
  assert.equal(result.ok, true);
  if (!result.ok) return;
  const { policy } = result;
  const spec = (kind: Parameters<typeof loadSchema>[0]) =>
    (
      loadSchema(kind) as {
        properties: {
          spec: {
            properties: Record<
              string,
              {
                default?: unknown;
                properties?: Record<
                  string,
                  { default?: unknown; properties?: Record<string, { default?: unknown }> }
                >;
              }
            >;
          };
        };
      }
    ).properties.spec.properties;
  const ms = (text: unknown) => {
    const units: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000 };
    const m = /^(\d+)(s|m|h)$/.exec(String(text));
    return m ? Number(m[1]) * (units[m[2] ?? ''] ?? 0) : NaN;
  };
  const settingsSpec = spec('Settings');
  assert.equal(policy.settings.audit.branch, settingsSpec.audit?.properties?.branch?.default);
  assert.equal(policy.settings.audit.mode, settingsSpec.audit?.properties?.mode?.default);
  assert.equal(
    policy.settings.audit.batch.maxDecisions,
    settingsSpec.audit?.properties?.batch?.properties?.maxDecisions?.default,
  );
  assert.equal(
    policy.settings.audit.batch.maxDelayMs,
    ms(settingsSpec.audit?.properties?.batch?.properties?.maxDelay?.default),
  );
  const windowDefault = /^(\d+)h$/.exec(String(settingsSpec.audit?.properties?.window?.default));
  assert.equal(policy.settings.audit.windowHours, Number(windowDefault?.[1]));
  assert.equal(policy.settings.audit.windowHours, 24, 'a day, as the docs say');
  const pacing = settingsSpec.pacing?.properties ?? {};
  assert.deepEqual(policy.settings.pacing, {
    maxInFlight: pacing.maxInFlight?.default,
    releasesPerSecond: pacing.releasesPerSecond?.default,
    batchSize: pacing.batchSize?.default,
  });
  const tenantSpec = spec('Tenant');
  assert.equal(policy.tenants.get('team-a')?.weight, tenantSpec.weight?.default);
  const gateSpec = spec('GatePolicy');
  const g = policy.gatePolicies[0];
  assert.equal(g?.priority, gateSpec.priority?.default);
  assert.deepEqual(g?.recheck, {
    initialMs: ms(gateSpec.recheck?.properties?.initial?.default),
    maxMs: ms(gateSpec.recheck?.properties?.max?.default),
    maxAttempts: gateSpec.recheck?.properties?.maxAttempts?.default,
  });
  const resizeSpec = spec('ResizePolicy');
  const r = policy.resizePolicies[0];
  assert.equal(r?.windowMs, ms(resizeSpec.window?.default));
  assert.equal(r?.cooldownMs, ms(resizeSpec.cooldown?.default));
  assert.equal(r?.deferredTimeoutMs, ms(resizeSpec.deferredTimeout?.default));
  assert.equal(r?.hysteresis, resizeSpec.hysteresis?.default);
  assert.equal(r?.maxAttempts, resizeSpec.maxAttempts?.default);
  assert.equal(r?.allowRestart, resizeSpec.allowRestart?.default);
  assert.deepEqual(r?.rollback, {
    onOOMKilled: resizeSpec.rollback?.properties?.onOOMKilled?.default,
    pauseForReview: resizeSpec.rollback?.properties?.pauseForReview?.default,
  });
  const stale = spec('StalenessPolicy');
  assert.equal(defaultStaleness.maxCacheLagMs, ms(stale.maxCacheLag?.default));
  assert.deepEqual(defaultStaleness.destructive, stale.destructive?.default);
  assert.equal(defaultStaleness.requeue.baseMs, ms(stale.requeue?.properties?.base?.default));
  assert.equal(defaultStaleness.requeue.maxMs, ms(stale.requeue?.properties?.max?.default));
  assert.equal(defaultStaleness.liveReads.qps, stale.liveReads?.properties?.qps?.default);
  assert.equal(defaultStaleness.liveReads.burst, stale.liveReads?.properties?.burst?.default);
});
