/**
 * Text order by UTF-16 code units, the same on every machine and in every locale.
 * `localeCompare` would order by the system locale's collation and load ICU's collation
 * data into the process for the rest of its life; tollgate orders names, keys and paths,
 * where code-unit order is what a reader of the audit trail can reproduce.
 */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
