/**
 * Kubernetes resource quantities ("500m", "1.5Gi", "2", "1e3") as plain numbers.
 *
 * tollgate keeps cpu in millicores and everything else in base units (bytes for
 * memory, a count for extended resources), both rounded up to whole numbers the way
 * the API server rounds requests. The client library's `quantityToScalar` mixes
 * numbers and bigints and rejects fractional binary suffixes ("1.5Gi"), so tollgate
 * parses them itself, exactly as the Quantity grammar in apimachinery defines them.
 */

const suffixes: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const grammar = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$/;

export class QuantityError extends Error {}

/** Parses a quantity to its value in base units (cores for cpu, bytes for memory). */
export function parseQuantity(text: string | number): number {
  if (typeof text === 'number') {
    if (!Number.isFinite(text)) throw new QuantityError(`quantity ${text} is not a finite number`);
    return text;
  }
  const match = grammar.exec(text.trim());
  if (!match) {
    throw new QuantityError(
      `"${text}" is not a Kubernetes quantity (examples: 500m, 2, 1.5Gi, 256Mi)`,
    );
  }
  const [, digits, exponent, suffix] = match;
  const base = Number(digits);
  if (exponent) return base * 10 ** Number(exponent.slice(1));
  return base * (suffixes[suffix ?? ''] ?? 1);
}

/** The unit tollgate stores a resource in: millicores for cpu, base units otherwise, rounded up. */
export function toStoredAmount(resource: string, text: string | number): number {
  const value = parseQuantity(text);
  return Math.ceil(resource === 'cpu' ? value * 1000 - 1e-9 : value - 1e-9);
}

/** Formats a stored amount back into a quantity the API accepts ("250m", "512Mi", "3"). */
export function formatStoredAmount(resource: string, amount: number): string {
  if (resource === 'cpu') return amount % 1000 === 0 ? String(amount / 1000) : `${amount}m`;
  if (resource === 'memory' || resource === 'ephemeral-storage') {
    for (const [suffix, factor] of [
      ['Gi', 2 ** 30],
      ['Mi', 2 ** 20],
      ['Ki', 2 ** 10],
    ] as const) {
      if (amount >= factor && amount % factor === 0) return `${amount / factor}${suffix}`;
    }
  }
  return String(amount);
}
