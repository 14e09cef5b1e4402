/**
 * `tollgate validate` and `tollgate plan` warnings about a tenant whose budget ignores the
 * pods tollgate never released (`spec.budget.neverGatedPods: Ignore`). Valid, and the
 * right choice when another controller bounds those pods (Kueue's quota, say), but the
 * budget then no longer bounds everything the tenant's namespaces run: pods created
 * without tollgate's gate, admitted by another controller, or whose gate someone else
 * removed run uncharged. A reviewer should see that, once per tenant.
 */
import type { PolicyError } from '../policy/errors.ts';
import type { Policy, Tenant } from '../policy/model.ts';

function ignoreWarning(tenant: Tenant): PolicyError {
  return {
    file: tenant.source.file,
    document: tenant.source.document,
    path: 'spec.budget.neverGatedPods',
    message: `tenant "${tenant.name}" does not charge pods tollgate did not release (Ignore): pods in ${tenant.namespaces.join(', ')} created without its gate, admitted by another controller or ungated by someone else run outside the budget; keep Ignore only where another controller bounds those pods`,
  };
}

const ignores = (tenant: Tenant | undefined): boolean => tenant?.budget.neverGatedPods === 'Ignore';

/** One warning per tenant whose budget ignores never-gated pods. */
export function neverGatedWarnings(policy: Policy): PolicyError[] {
  return [...policy.tenants.values()].filter(ignores).map(ignoreWarning);
}

/** For `plan`: only the tenants the proposal turns to Ignore (or adds with it). */
export function neverGatedWarningsOfChange(base: Policy, proposed: Policy): PolicyError[] {
  return [...proposed.tenants.values()]
    .filter((tenant) => ignores(tenant) && !ignores(base.tenants.get(tenant.name)))
    .map(ignoreWarning);
}
