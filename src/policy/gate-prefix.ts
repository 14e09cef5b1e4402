/**
 * Which gate names a tenant's gate prefix owns: the one rule compile time (a GatePolicy's
 * gate must be under its tenant's prefix; two tenants' prefixes must not overlap) and run
 * time (which gates on a pod are tollgate's) both use, so a policy that validates is a
 * policy that runs.
 *
 * A gate name is a Kubernetes qualified name, `domain/name`. A prefix is
 * - `domain/` or a bare `domain`: every gate of exactly that domain;
 * - `domain/name-start`: the gates of that domain whose name starts with `name-start`.
 * Domains compare whole (`team-a.io` owns nothing of `team-a.io.evil.com` or
 * `xteam-a.io`); everything compares case-sensitively, as the API server does (domains
 * are lower case there; names may mix cases, `Team-` and `team-` are different prefixes).
 */

interface Split {
  readonly domain: string;
  readonly name: string;
}

function split(text: string): Split {
  const slash = text.indexOf('/');
  return slash < 0
    ? { domain: text, name: '' }
    : { domain: text.slice(0, slash), name: text.slice(slash + 1) };
}

/** Whether the gate `gate` is under `prefix`: same domain, a name that extends the prefix's name start (a gate equal to its prefix is not under it). */
export function gateUnderPrefix(gate: string, prefix: string): boolean {
  if (!gate.includes('/')) return false;
  const g = split(gate);
  const p = split(prefix);
  return g.domain === p.domain && g.name.length > p.name.length && g.name.startsWith(p.name);
}

/** Whether some gate name could be under both prefixes (then two tenants would both own it). */
export function gatePrefixesOverlap(a: string, b: string): boolean {
  const x = split(a);
  const y = split(b);
  return x.domain === y.domain && (x.name.startsWith(y.name) || y.name.startsWith(x.name));
}
