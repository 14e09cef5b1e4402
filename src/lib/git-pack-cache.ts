/**
 * isomorphic-git's cache object keeps the packs it read (index, whole pack and the
 * objects inflated from it) under a symbol, by file name. Readers that live as long as
 * the process (the policy reader, the audit writer's clone) drop their cache after each
 * cycle; this reaches into it to count or evict packs.
 */
export function packfileCache(cache: object): Map<string, unknown> | undefined {
  const key = Object.getOwnPropertySymbols(cache).find(
    (symbol) => symbol.description === 'PackfileCache',
  );
  return key === undefined ? undefined : (cache as Record<symbol, Map<string, unknown>>)[key];
}
