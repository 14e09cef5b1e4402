/**
 * What grew in the heap between two V8 heap snapshots (bench/audit-history.ts
 * --heap-snapshots writes them): self size and count by constructor, largest growth first.
 *
 *   node bench/audit-heap-diff.ts before.heapsnapshot after.heapsnapshot [--top 15]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  readonly snapshot: { readonly meta: { node_fields: string[]; node_types: [string[]] } };
  readonly nodes: number[];
  readonly strings: string[];
}

interface Group {
  count: number;
  bytes: number;
}

/** Self size and count of the snapshot's nodes, by type and constructor (or string) name. */
export function groupsOf(path: string): Map<string, Group> {
  const data = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const fields = data.snapshot.meta.node_fields;
  const types = data.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const groups = new Map<string, Group>();
  for (let index = 0; index < data.nodes.length; index += fields.length) {
    const type = types[data.nodes[index + (typeAt as number)] as number] as string;
    const name =
      type === 'object' || type === 'closure'
        ? data.strings[data.nodes[index + (nameAt as number)] as number]
        : '';
    const key = `${type}${name ? ` ${name}` : ''}`;
    const group = groups.get(key) ?? { count: 0, bytes: 0 };
    group.count += 1;
    group.bytes += data.nodes[index + (sizeAt as number)] as number;
    groups.set(key, group);
  }
  return groups;
}

if (import.meta.main) {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '15' } },
  });
  const [before, after] = positionals.map(groupsOf) as [Map<string, Group>, Map<string, Group>];
  const total = (groups: Map<string, Group>) =>
    [...groups.values()].reduce((sum, group) => sum + group.bytes, 0) / 2 ** 20;
  const rows = [...after.entries()]
    .map(([key, group]) => {
      const old = before.get(key) ?? { count: 0, bytes: 0 };
      return {
        key,
        bytes: group.bytes - old.bytes,
        count: group.count - old.count,
        now: group.bytes,
      };
    })
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, Number(values.top));
  process.stdout.write(
    `heap ${total(before).toFixed(1)} MiB -> ${total(after).toFixed(1)} MiB\n` +
      rows
        .map(
          (row) =>
            `${(row.bytes / 1024).toFixed(0).padStart(8)} KiB ${String(row.count).padStart(8)} objects  ${row.key} (now ${(row.now / 1024).toFixed(0)} KiB)`,
        )
        .join('\n') +
      '\n',
  );
}
