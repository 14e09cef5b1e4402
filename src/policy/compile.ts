/**
 * From parsed documents to a `Policy` snapshot: kind dispatch, schema validation, the
 * semantic checks a schema cannot express, then compilation (durations to ms,
 * quantities to stored units, defaults filled in). Pure: no I/O, no clock.
 *
 * Semantic checks, each reported with file, document, field path and reason:
 * - durations and quantities parse; bounds have min <= max and step > 0;
 * - names are unique per kind; a gate is governed by one GatePolicy only;
 * - references resolve: GatePolicy.tenant, ResizePolicy.tenant, Approval targets;
 * - tenancy holds: a gate falls under a prefix its tenant owns; no policy reaches a
 *   namespace outside its tenant's (ObjectCondition objects, the `namespace` matchers
 *   of PromQL signals, Approval targets); two tenants never share a namespace or
 *   overlapping gate prefixes;
 * - exactly one Settings (in `tollgate.yaml`) and at most one StalenessPolicy (the
 *   defaults in `defaultStaleness` apply without one).
 * All checks run; every error is returned, not only the first.
 */
import { byCodeUnits } from '../lib/compare.ts';
import { scheduleWindowProblem } from '../decide/schedule.ts';
import { parseDuration } from '../lib/clock.ts';
import { toStoredAmount } from '../lib/quantity.ts';
import { fieldPath, type PolicyError } from './errors.ts';
import { annotationKeyProblems, qualifiedNameProblems, selectorProblems } from './labels.ts';
import { gatePrefixesOverlap, gateUnderPrefix } from './gate-prefix.ts';
import type {
  ApprovalDocument,
  GatePolicyDocument,
  ResizePolicyDocument,
  SettingsDocument,
  StalenessPolicyDocument,
  TenantDocument,
} from './generated/index.ts';
import type {
  Approval,
  ApprovalTarget,
  Bounds,
  GateCondition,
  GatePolicy,
  LabelSelector,
  Pacing,
  Policy,
  ResizePolicy,
  ResourceBounds,
  Settings,
  StalenessPolicy,
  Tenant,
} from './model.ts';
import type { ParsedDocument } from './parse.ts';
import { namespaceScopeProblems } from './promql.ts';
import { apiVersion, policyKinds, validateDocument, type PolicyKind } from './schema.ts';

/** The audit commit limits when Settings name none (schemas/Settings.schema.json's defaults). */
export const defaultAuditBatch = { maxDecisions: 500, maxDelayMs: 2_000 } as const;

export type PolicyResult =
  | { readonly ok: true; readonly policy: Policy }
  | { readonly ok: false; readonly errors: readonly PolicyError[] };

/** The file that must hold the one Settings document. */
export const settingsFile = 'tollgate.yaml';

/** In force when a repository has no StalenessPolicy (the schema's defaults). */
export const defaultStaleness: StalenessPolicy = {
  name: 'default',
  source: { file: '(default)', document: 0 },
  maxCacheLagMs: 5_000,
  destructive: ['Cancel', 'ExpireRelease', 'Rollback'],
  requeue: { baseMs: 1_000, maxMs: 60_000 },
  liveReads: { qps: 5, burst: 10, breaker: { failureThreshold: 5, openMs: 30_000 } },
};

const defaultPacing: Pacing = { maxInFlight: 50, releasesPerSecond: 10, batchSize: 100 };

interface Located<T> {
  readonly file: string;
  readonly index: number;
  readonly doc: T;
}

/** Collects errors for one document; `at` builds a path-scoped reporter. */
class Reporter {
  readonly errors: PolicyError[] = [];
  at(where: { file: string; index: number }) {
    return (path: string, message: string): void => {
      this.errors.push({ file: where.file, document: where.index, path, message });
    };
  }
}

type Report = (path: string, message: string) => void;

function duration(
  report: Report,
  path: string,
  text: string | undefined,
  fallback: number,
): number {
  if (text === undefined) return fallback;
  try {
    return parseDuration(text);
  } catch (error) {
    report(path, (error as Error).message);
    return fallback;
  }
}

function amount(report: Report, path: string, resource: string, text: string | number): number {
  try {
    const value = toStoredAmount(resource, text);
    if (value < 0) report(path, `"${text}" is negative`);
    return value;
  } catch (error) {
    report(path, (error as Error).message);
    return 0;
  }
}

function pacingOf(input: Partial<Pacing> | undefined, base: Pacing): Pacing {
  return {
    maxInFlight: input?.maxInFlight ?? base.maxInFlight,
    releasesPerSecond: input?.releasesPerSecond ?? base.releasesPerSecond,
    batchSize: input?.batchSize ?? base.batchSize,
  };
}

/** The selector, checked as the API server checks one (labels.ts). */
function selectorOf(report: Report, input: GatePolicyDocument['spec']['selector']): LabelSelector {
  for (const problem of selectorProblems(input))
    report(fieldPath(['spec', 'selector', ...problem.path]), problem.message);
  const matchExpressions = (input?.matchExpressions ?? []).map((e) => ({
    key: e.key,
    operator: e.operator,
    values: e.values ?? [],
  }));
  return { matchLabels: { ...(input?.matchLabels ?? {}) }, matchExpressions };
}

function kindOf(value: unknown): PolicyKind | string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const kind = (value as Record<string, unknown>).kind;
  return typeof kind === 'string' ? kind : undefined;
}

/** The documents of one kind that passed schema validation, with where they came from. */
type DocumentsOf = <T>(kind: PolicyKind) => Located<T>[];

/**
 * Compiles the parsed documents of a repository into one Policy, or every error found.
 * The steps, in order: sort by kind (schema-valid only), unique names per kind, the one
 * Settings, tenants with the namespaces and prefixes they claim, gate policies, resize
 * policies, the staleness policy, approvals. Every step reports into one list, sorted
 * at the end, so a repository shows all its errors at once.
 */
export function compilePolicy(documents: readonly ParsedDocument[], commit: string): PolicyResult {
  const reporter = new Reporter();
  const all = validDocumentsByKind(documents, reporter);
  checkUniqueNames(all, reporter);
  const settings = compileTheSettings(all, reporter);
  const { tenants, namespaceOwner } = compileTenants(all, reporter);
  const gatePolicies = compileGatePolicies(all, reporter, tenants);
  const resizePolicies: ResizePolicy[] = [];
  for (const r of all<ResizePolicyDocument>('ResizePolicy')) {
    const compiled = compileResizePolicy(r, reporter.at(r), tenants);
    if (compiled) resizePolicies.push(compiled);
  }
  const staleness = compileTheStaleness(all, reporter);
  const approvals: Approval[] = [];
  for (const a of all<ApprovalDocument>('Approval')) {
    const refs = { namespaceOwner, tenants, gatePolicies, resizePolicies };
    const compiled = compileApproval(a, reporter.at(a), refs);
    if (compiled) approvals.push(compiled);
  }

  if (reporter.errors.length > 0 || !settings) {
    return { ok: false, errors: sortErrors(reporter.errors) };
  }
  return {
    ok: true,
    policy: { commit, settings, tenants, gatePolicies, resizePolicies, staleness, approvals },
  };
}

/** Step 1: each document's kind, then its schema; only valid documents go on. */
function validDocumentsByKind(
  documents: readonly ParsedDocument[],
  reporter: Reporter,
): DocumentsOf {
  const byKind = new Map<PolicyKind, Located<unknown>[]>(policyKinds.map((k) => [k, []]));
  for (const d of documents) {
    const report = reporter.at(d);
    const kind = kindOf(d.value);
    if (kind === undefined) {
      report(
        '',
        typeof d.value === 'object' && d.value !== null && !Array.isArray(d.value)
          ? 'document has no "kind"'
          : 'document is not a mapping with apiVersion, kind, metadata and spec',
      );
      continue;
    }
    if (!(policyKinds as readonly string[]).includes(kind)) {
      report(
        'kind',
        `unknown kind "${kind}" (expected one of ${policyKinds.join(', ')}; apiVersion ${apiVersion})`,
      );
      continue;
    }
    const errors = validateDocument(kind as PolicyKind, d.value, {
      file: d.file,
      document: d.index,
    });
    if (errors.length > 0) {
      reporter.errors.push(...errors);
      continue;
    }
    byKind.get(kind as PolicyKind)?.push({ file: d.file, index: d.index, doc: d.value });
  }
  return <T>(kind: PolicyKind) => (byKind.get(kind) ?? []) as Located<T>[];
}

/** Step 2: names are unique per kind (Settings has none). */
function checkUniqueNames(all: DocumentsOf, reporter: Reporter): void {
  for (const kind of policyKinds) {
    if (kind === 'Settings') continue;
    const first = new Map<string, Located<unknown>>();
    for (const item of all<{ metadata: { name: string } }>(kind)) {
      const name = item.doc.metadata.name;
      const previous = first.get(name);
      if (previous) {
        reporter.at(item)(
          'metadata.name',
          `${kind} "${name}" is already defined in ${previous.file}#${previous.index}`,
        );
      } else {
        first.set(name, item);
      }
    }
  }
}

/** Step 3: exactly one Settings document, in tollgate.yaml at the top. */
function compileTheSettings(all: DocumentsOf, reporter: Reporter): Settings | undefined {
  const settingsDocs = all<SettingsDocument>('Settings');
  for (const s of settingsDocs) {
    if (s.file !== settingsFile)
      reporter.at(s)('kind', `Settings belong in ${settingsFile} at the top of the policy folder`);
  }
  if (settingsDocs.length === 0) {
    reporter.errors.push({
      file: settingsFile,
      path: '',
      message: `missing: a policy repository needs one Settings document in ${settingsFile}`,
    });
  } else if (settingsDocs.length > 1) {
    for (const s of settingsDocs.slice(1))
      reporter.at(s)('kind', 'more than one Settings document; keep exactly one');
  }
  return settingsDocs[0]
    ? compileSettings(settingsDocs[0], reporter.at(settingsDocs[0]))
    : undefined;
}

/** Step 4: tenants, each namespace claimed once, gate prefixes that do not overlap. */
function compileTenants(
  all: DocumentsOf,
  reporter: Reporter,
): { tenants: Map<string, Tenant>; namespaceOwner: Map<string, string> } {
  const tenants = new Map<string, Tenant>();
  const namespaceOwner = new Map<string, string>();
  const prefixOwner: { prefix: string; tenant: string }[] = [];
  for (const t of all<TenantDocument>('Tenant')) {
    const report = reporter.at(t);
    const tenant = compileTenant(t, report);
    tenant.namespaces.forEach((ns, i) => {
      const owner = namespaceOwner.get(ns);
      if (owner !== undefined && owner !== tenant.name) {
        report(
          `spec.namespaces[${i}]`,
          `namespace "${ns}" is already claimed by tenant "${owner}"`,
        );
      } else namespaceOwner.set(ns, tenant.name);
    });
    tenant.gatePrefixes.forEach((prefix, i) => {
      const clash = prefixOwner.find(
        (p) => p.tenant !== tenant.name && gatePrefixesOverlap(p.prefix, prefix),
      );
      if (clash) {
        report(
          `spec.gatePrefixes[${i}]`,
          `gate prefix "${prefix}" overlaps "${clash.prefix}" of tenant "${clash.tenant}"`,
        );
      } else prefixOwner.push({ prefix, tenant: tenant.name });
    });
    if (!tenants.has(tenant.name)) tenants.set(tenant.name, tenant);
  }
  return { tenants, namespaceOwner };
}

/** Step 5: gate policies, each gate governed by one policy only. */
function compileGatePolicies(
  all: DocumentsOf,
  reporter: Reporter,
  tenants: ReadonlyMap<string, Tenant>,
): GatePolicy[] {
  const gatePolicies: GatePolicy[] = [];
  const gateOwner = new Map<string, string>();
  for (const g of all<GatePolicyDocument>('GatePolicy')) {
    const report = reporter.at(g);
    const compiled = compileGatePolicy(g, report, tenants);
    if (!compiled) continue;
    const owner = gateOwner.get(compiled.gate);
    if (owner !== undefined) {
      report('spec.gate', `gate "${compiled.gate}" is already governed by GatePolicy "${owner}"`);
    } else gateOwner.set(compiled.gate, compiled.name);
    gatePolicies.push(compiled);
  }
  return gatePolicies;
}

/** Step 7: at most one StalenessPolicy, the defaults otherwise. */
function compileTheStaleness(all: DocumentsOf, reporter: Reporter): StalenessPolicy {
  const stalenessDocs = all<StalenessPolicyDocument>('StalenessPolicy');
  for (const s of stalenessDocs.slice(1)) {
    reporter.at(s)(
      'kind',
      `more than one StalenessPolicy (the first is in ${stalenessDocs[0]?.file}); keep at most one`,
    );
  }
  return stalenessDocs[0]
    ? compileStaleness(stalenessDocs[0], reporter.at(stalenessDocs[0]))
    : defaultStaleness;
}

function sortErrors(errors: PolicyError[]): PolicyError[] {
  return [...errors].sort(
    (a, b) =>
      byCodeUnits(a.file, b.file) ||
      (a.document ?? -1) - (b.document ?? -1) ||
      byCodeUnits(a.path, b.path),
  );
}

function compileSettings(s: Located<SettingsDocument>, report: Report): Settings {
  const spec = s.doc.spec;
  const audit = spec.audit ?? {};
  return {
    source: { file: s.file, document: s.index },
    cluster: spec.cluster,
    audit: {
      branch: audit.branch ?? 'tollgate/audit',
      ...(audit.repo ? { repo: audit.repo } : {}),
      mode: audit.mode ?? 'strict',
      batch: {
        maxDecisions: audit.batch?.maxDecisions ?? defaultAuditBatch.maxDecisions,
        maxDelayMs: duration(
          report,
          'spec.audit.batch.maxDelay',
          audit.batch?.maxDelay,
          defaultAuditBatch.maxDelayMs,
        ),
      },
      // The schema allows whole hours only ("24h"); the default is a day.
      windowHours: Number(/^(\d+)h$/.exec(audit.window ?? '24h')?.[1] ?? 24),
    },
    ...(spec.prometheus ? { prometheus: { url: spec.prometheus.url } } : {}),
    pacing: pacingOf(spec.pacing, defaultPacing),
  };
}

function compileTenant(t: Located<TenantDocument>, report: Report): Tenant {
  const spec = t.doc.spec;
  const resources: Record<string, number> = {};
  for (const [resource, value] of Object.entries(spec.budget?.resources ?? {})) {
    resources[resource] = amount(
      report,
      fieldPath(['spec', 'budget', 'resources', resource]),
      resource,
      value,
    );
  }
  return {
    name: t.doc.metadata.name,
    source: { file: t.file, document: t.index },
    namespaces: [...spec.namespaces],
    gatePrefixes: [...spec.gatePrefixes],
    weight: spec.weight ?? 1,
    budget: {
      ...(spec.budget?.pods !== undefined ? { pods: spec.budget.pods } : {}),
      resources,
      neverGatedPods: spec.budget?.neverGatedPods ?? 'Charge',
      unreadyNodeGraceMs: duration(
        report,
        'spec.budget.unreadyNodeGrace',
        spec.budget?.unreadyNodeGrace,
        300_000,
      ),
    },
    pacing: pacingOf(spec.pacing, defaultPacing),
    orphanedGates: spec.orphanedGates ?? 'Review',
  };
}

function resolveTenant(
  report: Report,
  tenants: ReadonlyMap<string, Tenant>,
  name: string,
): Tenant | undefined {
  const tenant = tenants.get(name);
  if (!tenant) {
    const known = [...tenants.keys()];
    report(
      'spec.tenant',
      `tenant "${name}" is not defined${known.length ? ` (tenants: ${known.join(', ')})` : ''}`,
    );
  }
  return tenant;
}

function compileGatePolicy(
  g: Located<GatePolicyDocument>,
  report: Report,
  tenants: ReadonlyMap<string, Tenant>,
): GatePolicy | undefined {
  const spec = g.doc.spec;
  const tenant = resolveTenant(report, tenants, spec.tenant);
  if (tenant && !tenant.gatePrefixes.some((p) => gateUnderPrefix(spec.gate, p))) {
    report(
      'spec.gate',
      `gate "${spec.gate}" is not under a prefix tenant "${tenant.name}" owns (${tenant.gatePrefixes.join(', ')})`,
    );
  }
  const conditions: GateCondition[] = (spec.conditions ?? []).map((c, i): GateCondition => {
    const path = `spec.conditions[${i}]`;
    switch (c.type) {
      case 'Budget':
      case 'Approved':
        return { type: c.type };
      case 'ImagePresent':
        return { type: 'ImagePresent', minNodes: c.minNodes ?? 1 };
      case 'Schedule':
        c.windows.forEach((w, j) => {
          const problem = scheduleWindowProblem(w);
          if (problem)
            report(`${path}.windows[${j}]`, `cron "${w.cron}" in ${w.timeZone}: ${problem}`);
        });
        return {
          type: 'Schedule',
          windows: c.windows.map((w) => ({ cron: w.cron, timeZone: w.timeZone })),
        };
      case 'GangComplete':
        for (const problem of qualifiedNameProblems(c.groupLabel))
          report(`${path}.groupLabel`, `label key: ${problem}`);
        for (const problem of annotationKeyProblems(c.sizeAnnotation))
          report(`${path}.sizeAnnotation`, `annotation key: ${problem}`);
        return { type: 'GangComplete', groupLabel: c.groupLabel, sizeAnnotation: c.sizeAnnotation };
      case 'ObjectCondition': {
        const byCondition = c.conditionType !== undefined;
        const byField = c.field !== undefined || c.equals !== undefined;
        if (byCondition === byField) {
          report(
            path,
            'an ObjectCondition checks either conditionType (and status) or field and equals, exactly one of the two',
          );
        } else if (byField && (c.field === undefined || c.equals === undefined)) {
          report(path, 'field and equals go together');
        } else if (!byCondition && c.status !== undefined) {
          report(`${path}.status`, 'status applies only with conditionType');
        }
        if (
          tenant &&
          c.object.namespace !== undefined &&
          !tenant.namespaces.includes(c.object.namespace)
        ) {
          report(
            `${path}.object.namespace`,
            `namespace "${c.object.namespace}" is outside tenant "${tenant.name}" (${tenant.namespaces.join(', ')})`,
          );
        }
        const object = {
          apiVersion: c.object.apiVersion,
          kind: c.object.kind,
          name: c.object.name,
          ...(c.object.namespace !== undefined ? { namespace: c.object.namespace } : {}),
        };
        return byCondition
          ? {
              type: 'ObjectCondition',
              object,
              conditionType: c.conditionType,
              status: c.status ?? 'True',
            }
          : { type: 'ObjectCondition', object, field: c.field, equals: c.equals };
      }
    }
  });
  const recheck = {
    initialMs: duration(report, 'spec.recheck.initial', spec.recheck?.initial, 5_000),
    maxMs: duration(report, 'spec.recheck.max', spec.recheck?.max, 300_000),
    maxAttempts: spec.recheck?.maxAttempts ?? 20,
  };
  if (recheck.initialMs > recheck.maxMs)
    report(
      'spec.recheck',
      `initial (${spec.recheck?.initial ?? '5s'}) is greater than max (${spec.recheck?.max ?? '5m'})`,
    );
  const selector = selectorOf(report, spec.selector);
  if (!tenant) return undefined;
  const pacing: Partial<Pacing> | undefined = spec.pacing ? { ...spec.pacing } : undefined;
  return {
    name: g.doc.metadata.name,
    source: { file: g.file, document: g.index },
    tenant: tenant.name,
    gate: spec.gate,
    selector,
    priority: spec.priority ?? 0,
    ...(spec.suspend ? { suspend: true } : {}),
    ...(spec.drain ? { drain: true } : {}),
    conditions,
    ...(spec.expiry
      ? {
          expiry: {
            afterMs: duration(report, 'spec.expiry.after', spec.expiry.after, 0),
            action: spec.expiry.action,
          },
        }
      : {}),
    recheck,
    ...(pacing ? { pacing } : {}),
  };
}

type RawBounds = { min: string | number; max: string | number; step: string | number };

function boundsOf(
  report: Report,
  path: string,
  resource: 'cpu' | 'memory',
  raw: RawBounds,
): Bounds {
  const b = {
    min: amount(report, `${path}.min`, resource, raw.min),
    max: amount(report, `${path}.max`, resource, raw.max),
    step: amount(report, `${path}.step`, resource, raw.step),
  };
  if (b.min > b.max) report(path, `min (${raw.min}) is greater than max (${raw.max})`);
  if (b.step <= 0) report(`${path}.step`, `step (${raw.step}) must be greater than zero`);
  if (b.min <= 0) report(`${path}.min`, `min (${raw.min}) must be greater than zero`);
  return b;
}

function resourceBoundsOf(
  report: Report,
  path: string,
  raw: { cpu?: RawBounds; memory?: RawBounds } | undefined,
): ResourceBounds {
  return {
    ...(raw?.cpu ? { cpu: boundsOf(report, `${path}.cpu`, 'cpu', raw.cpu) } : {}),
    ...(raw?.memory ? { memory: boundsOf(report, `${path}.memory`, 'memory', raw.memory) } : {}),
  };
}

function compileResizePolicy(
  r: Located<ResizePolicyDocument>,
  report: Report,
  tenants: ReadonlyMap<string, Tenant>,
): ResizePolicy | undefined {
  const spec = r.doc.spec;
  const tenant = resolveTenant(report, tenants, spec.tenant);
  const containers: Record<string, ResourceBounds> = {};
  for (const [name, raw] of Object.entries(spec.containers ?? {})) {
    containers[name] = resourceBoundsOf(report, `spec.containers.${name}`, raw);
    if (!raw.cpu && !raw.memory)
      report(`spec.containers.${name}`, 'give bounds for cpu, memory or both');
  }
  const pod = spec.pod ? resourceBoundsOf(report, 'spec.pod', spec.pod) : undefined;
  if (Object.keys(containers).length === 0 && (!pod || (!pod.cpu && !pod.memory))) {
    report('spec', 'a ResizePolicy needs bounds for at least one container or for the pod');
  }
  const seen = new Set<string>();
  const signals = spec.signals.map((s, i) => {
    const path = `spec.signals[${i}]`;
    if (seen.has(s.name)) report(`${path}.name`, `signal "${s.name}" is defined twice`);
    seen.add(s.name);
    if (s.scaleUpAbove === undefined && s.scaleDownBelow === undefined) {
      report(path, 'a signal needs scaleUpAbove, scaleDownBelow or both');
    }
    if (
      s.scaleUpAbove !== undefined &&
      s.scaleDownBelow !== undefined &&
      s.scaleDownBelow >= s.scaleUpAbove
    ) {
      report(
        path,
        `scaleDownBelow (${s.scaleDownBelow}) must be below scaleUpAbove (${s.scaleUpAbove})`,
      );
    }
    if (tenant)
      for (const p of namespaceScopeProblems(s.query, tenant.namespaces))
        report(`${path}.query`, p);
    return {
      name: s.name,
      query: s.query,
      ...(s.scaleUpAbove !== undefined ? { scaleUpAbove: s.scaleUpAbove } : {}),
      ...(s.scaleDownBelow !== undefined ? { scaleDownBelow: s.scaleDownBelow } : {}),
      ...(s.resources !== undefined ? { resources: s.resources } : {}),
    };
  });
  if (spec.slo && tenant) {
    for (const p of namespaceScopeProblems(spec.slo.query, tenant.namespaces))
      report('spec.slo.query', p);
  }
  const selector = selectorOf(report, spec.selector);
  if (!tenant) return undefined;
  return {
    name: r.doc.metadata.name,
    source: { file: r.file, document: r.index },
    tenant: tenant.name,
    selector,
    containers,
    ...(pod ? { pod } : {}),
    signals,
    ...(spec.slo
      ? {
          slo: {
            query: spec.slo.query,
            above: spec.slo.above,
            forMs: duration(report, 'spec.slo.for', spec.slo.for, 0),
          },
        }
      : {}),
    windowMs: duration(report, 'spec.window', spec.window, 300_000),
    hysteresis: spec.hysteresis ?? 0.1,
    cooldownMs: duration(report, 'spec.cooldown', spec.cooldown, 600_000),
    deferredTimeoutMs: duration(report, 'spec.deferredTimeout', spec.deferredTimeout, 900_000),
    maxAttempts: spec.maxAttempts ?? 3,
    rollback: {
      onOOMKilled: spec.rollback?.onOOMKilled ?? true,
      pauseForReview: spec.rollback?.pauseForReview ?? true,
    },
    allowRestart: spec.allowRestart ?? false,
    pause: {
      restarts: spec.pause?.onRestarts ?? 5,
      stuckMs: duration(report, 'spec.pause.onStuckFor', spec.pause?.onStuckFor, 1_800_000),
      unreadableMs: duration(
        report,
        'spec.pause.onUnreadableFor',
        spec.pause?.onUnreadableFor,
        7_200_000,
      ),
    },
    ...(spec.mode === 'Observe' ? { mode: 'Observe' as const } : {}),
  };
}

function compileStaleness(s: Located<StalenessPolicyDocument>, report: Report): StalenessPolicy {
  const spec = s.doc.spec;
  const d = defaultStaleness;
  const requeue = {
    baseMs: duration(report, 'spec.requeue.base', spec.requeue?.base, d.requeue.baseMs),
    maxMs: duration(report, 'spec.requeue.max', spec.requeue?.max, d.requeue.maxMs),
  };
  if (requeue.baseMs > requeue.maxMs) report('spec.requeue', 'base is greater than max');
  return {
    name: s.doc.metadata.name,
    source: { file: s.file, document: s.index },
    maxCacheLagMs: duration(report, 'spec.maxCacheLag', spec.maxCacheLag, d.maxCacheLagMs),
    destructive: spec.destructive ? [...spec.destructive] : d.destructive,
    requeue,
    liveReads: {
      qps: spec.liveReads?.qps ?? d.liveReads.qps,
      burst: spec.liveReads?.burst ?? d.liveReads.burst,
      breaker: {
        failureThreshold:
          spec.liveReads?.breaker?.failureThreshold ?? d.liveReads.breaker.failureThreshold,
        openMs: duration(
          report,
          'spec.liveReads.breaker.open',
          spec.liveReads?.breaker?.open,
          d.liveReads.breaker.openMs,
        ),
      },
    },
  };
}

/** What an Approval's target may name, compiled before the approvals. */
interface ApprovalRefs {
  readonly namespaceOwner: ReadonlyMap<string, string>;
  readonly tenants: ReadonlyMap<string, Tenant>;
  readonly gatePolicies: readonly GatePolicy[];
  readonly resizePolicies: readonly ResizePolicy[];
}

type TargetDocument = ApprovalDocument['spec']['target'];

function compileApproval(
  a: Located<ApprovalDocument>,
  report: Report,
  refs: ApprovalRefs,
): Approval | undefined {
  const spec = a.doc.spec;
  let ok = true;
  const fail: Report = (path, message) => {
    report(path, message);
    ok = false;
  };
  const resume = spec.target.kind === 'ResizePolicy';
  if (resume !== (spec.action === 'Resume')) {
    fail(
      'spec.action',
      resume
        ? `${spec.action} applies to a pod target (Pod, Pods, Gang, GatePolicy); a ResizePolicy target takes Resume`
        : `Resume applies to a ResizePolicy target, not a ${spec.target.kind}`,
    );
  }
  const target = approvalTarget(spec.target, fail, refs);
  let expiresAt: number | undefined;
  if (spec.expiresAt !== undefined) {
    expiresAt = Date.parse(spec.expiresAt);
    if (Number.isNaN(expiresAt))
      fail('spec.expiresAt', `"${spec.expiresAt}" is not an RFC 3339 time`);
  }
  if (!ok || !target) return undefined;
  return {
    name: a.doc.metadata.name,
    source: { file: a.file, document: a.index },
    action: spec.action,
    target,
    approvedBy: spec.approvedBy,
    reason: spec.reason,
    ...(expiresAt !== undefined ? { expiresAt } : {}),
  };
}

/** The target, checked against what it names (namespaces of a tenant, existing policies). */
function approvalTarget(
  target: TargetDocument,
  fail: Report,
  refs: ApprovalRefs,
): ApprovalTarget | undefined {
  const inTenant = (namespace: string) => {
    if (refs.namespaceOwner.has(namespace)) return true;
    fail('spec.target.namespace', `namespace "${namespace}" belongs to no tenant`);
    return false;
  };
  switch (target.kind) {
    case 'Pod':
      if (!inTenant(target.namespace)) return undefined;
      return {
        kind: 'Pod',
        namespace: target.namespace,
        name: target.name,
        ...(target.uid !== undefined ? { uid: target.uid.toLowerCase() } : {}),
      };
    case 'Pods': {
      const selector = selectorOf(
        (path, message) => fail(path.replace(/^spec\./, 'spec.target.'), message),
        target.selector,
      );
      if (Object.keys(selector.matchLabels).length + selector.matchExpressions.length === 0)
        fail(
          'spec.target.selector',
          'an empty selector would pick every pod of the namespace; name them, or target the GatePolicy',
        );
      if (!inTenant(target.namespace)) return undefined;
      return { kind: 'Pods', namespace: target.namespace, selector };
    }
    case 'Gang':
      return gangTarget(target, fail, refs);
    case 'GatePolicy':
      if (refs.gatePolicies.some((g) => g.name === target.name))
        return { kind: 'GatePolicy', name: target.name };
      fail('spec.target.name', `GatePolicy "${target.name}" is not defined`);
      return undefined;
    case 'ResizePolicy':
      return resizeTarget(target, fail, refs);
  }
}

/** Is `namespace` one of the tenant's of the policy an approval names? Reported when not. */
function inTenantOf(
  policy: { readonly name: string; readonly tenant: string },
  kind: 'GatePolicy' | 'ResizePolicy',
  namespace: string,
  fail: Report,
  refs: ApprovalRefs,
): boolean {
  if ((refs.tenants.get(policy.tenant)?.namespaces ?? []).includes(namespace)) return true;
  fail(
    'spec.target.namespace',
    `namespace "${namespace}" is outside tenant "${policy.tenant}" of ${kind} "${policy.name}"`,
  );
  return false;
}

function gangTarget(
  target: Extract<TargetDocument, { kind: 'Gang' }>,
  fail: Report,
  refs: ApprovalRefs,
): ApprovalTarget | undefined {
  const policy = refs.gatePolicies.find((g) => g.name === target.gatePolicy);
  if (!policy) {
    fail('spec.target.gatePolicy', `GatePolicy "${target.gatePolicy}" is not defined`);
    return undefined;
  }
  const gang = policy.conditions.find((c) => c.type === 'GangComplete');
  if (!gang) {
    fail(
      'spec.target.gatePolicy',
      `GatePolicy "${policy.name}" has no GangComplete condition, so no gangs`,
    );
    return undefined;
  }
  if (!inTenantOf(policy, 'GatePolicy', target.namespace, fail, refs)) return undefined;
  const { namespace, gang: value } = target;
  return {
    kind: 'Gang',
    gatePolicy: policy.name,
    namespace,
    groupLabel: gang.groupLabel,
    gang: value,
  };
}

function resizeTarget(
  target: Extract<TargetDocument, { kind: 'ResizePolicy' }>,
  fail: Report,
  refs: ApprovalRefs,
): ApprovalTarget | undefined {
  const policy = refs.resizePolicies.find((p) => p.name === target.name);
  if (!policy) {
    fail('spec.target.name', `ResizePolicy "${target.name}" is not defined`);
    return undefined;
  }
  if (
    target.namespace !== undefined &&
    !inTenantOf(policy, 'ResizePolicy', target.namespace, fail, refs)
  )
    return undefined;
  return {
    kind: 'ResizePolicy',
    name: target.name,
    ...(target.namespace !== undefined ? { namespace: target.namespace } : {}),
    ...(target.pod !== undefined ? { pod: target.pod } : {}),
  };
}
