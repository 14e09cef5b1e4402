/** Decision builder: `aDecision('Release', 'p1', 'team-a').intent().obj()`. */
import type { Decision, DecisionKind, Loop, Outcome } from '../../src/decide/decision.ts';

export class DecisionBuilder {
  #decision: { -readonly [K in keyof Decision]: Decision[K] };

  constructor(kind: DecisionKind, name: string, namespace: string) {
    const loop: Loop =
      kind === 'Resize' || kind === 'Rollback' || kind === 'Defer' || kind === 'Infeasible'
        ? 'resize'
        : 'gate-release';
    this.#decision = {
      id: `${loop}:${kind}:uid-${namespace}-${name}:1`,
      at: Date.UTC(2026, 10, 29, 7, 0, 0),
      loop,
      kind,
      tenant: namespace,
      target: { namespace, name, uid: `uid-${namespace}-${name}`, resourceVersion: '1' },
      policy: { commit: 'a'.repeat(40), file: `tenants/${namespace}.yaml`, name: 'default' },
      inputs: [],
      reason: `${kind.toLowerCase()} ${namespace}/${name}`,
      outcome: { result: kind === 'Hold' || kind === 'SkipStale' ? 'recorded' : 'pending' },
    };
  }
  id(id: string): this {
    this.#decision.id = id;
    return this;
  }
  /** The loop that decided it (the id's prefix follows). */
  loop(loop: Loop): this {
    this.#decision.id = this.#decision.id.replace(/^[^:]+:/, `${loop}:`);
    this.#decision.loop = loop;
    return this;
  }
  at(ms: number): this {
    this.#decision.at = ms;
    return this;
  }
  tenant(tenant: string | undefined): this {
    if (tenant === undefined) delete this.#decision.tenant;
    else this.#decision.tenant = tenant;
    return this;
  }
  uid(uid: string): this {
    this.#decision.target = { ...this.#decision.target, uid };
    return this;
  }
  policyCommit(commit: string): this {
    this.#decision.policy = { ...this.#decision.policy, commit };
    return this;
  }
  input(condition: string, met: boolean, value: unknown): this {
    this.#decision.inputs = [...this.#decision.inputs, { condition, met, value }];
    return this;
  }
  reason(reason: string): this {
    this.#decision.reason = reason;
    return this;
  }
  intent(): this {
    this.#decision.outcome = { result: 'pending' };
    return this;
  }
  recorded(): this {
    this.#decision.outcome = { result: 'recorded' };
    return this;
  }
  outcome(outcome: Outcome): this {
    this.#decision.outcome = outcome;
    return this;
  }
  succeeded(): this {
    return this.outcome({ result: 'succeeded' });
  }
  obj(): Decision {
    return structuredClone(this.#decision);
  }
}

export function aDecision(kind: DecisionKind, name: string, namespace = 'team-a'): DecisionBuilder {
  return new DecisionBuilder(kind, name, namespace);
}

/** The outcome that follows an intent. */
export function outcomeOf(intent: Decision, outcome: Outcome = { result: 'succeeded' }): Decision {
  return { ...intent, outcome };
}
