/**
 * tollgate loads only the Kubernetes API groups it calls.
 *
 * @kubernetes/client-node's package index re-exports one generated class per API group and
 * style, from two aggregate modules (`gen/types/ObservableAPI.js`, `ObjectParamAPI.js`) that
 * import the generated modules of all 65 groups: 16 MB of source that V8 keeps in the heap
 * for the life of the process (module sources are never dropped), about a tenth of a
 * replica's resident memory, for the four groups tollgate calls. `KubeConfig` needs the
 * index too (its `config.js` imports it), so importing less is not possible from outside.
 *
 * `registerSlimClient` (called by `bin/tollgate.js` before anything else loads) cuts the
 * two aggregates at load: the groups of `apiGroupsUsed` stay as they are, every other
 * group's class becomes one that throws, naming this file, when it is built, and its
 * generated module is never imported. Every name the index exports still exists. A source
 * whose layout is not the one recognised here is left whole (the process then simply
 * uses more memory; test/unit/cluster/slim-client.test.ts fails on such an upgrade).
 */
import { registerHooks } from 'node:module';

/** The generated API groups tollgate's commands build clients of (CoreV1Api, EventsV1Api, CoordinationV1Api, VersionApi). */
export const apiGroupsUsed: ReadonlySet<string> = new Set([
  'CoreV1',
  'EventsV1',
  'CoordinationV1',
  'Version',
]);

export type AggregatePrefix = 'Observable' | 'Object';

const aggregates: ReadonlyMap<string, AggregatePrefix> = new Map([
  ['ObservableAPI.js', 'Observable'],
  ['ObjectParamAPI.js', 'Object'],
]);

const aggregateUrl = /\/@kubernetes\/client-node\/dist\/gen\/types\/(\w+\.js)$/;

/** The import that opens a group's section: its generated module, or the Observable class. */
const groupImport = /^import \{[^}]*\} from "(?:\.\.\/apis\/\w+Api|\.\/ObservableAPI)\.js";$/;

interface Section {
  readonly lines: string[];
  group?: string;
}

/** The header (shared imports) and the groups' sections, each its import and its class; undefined for another layout. */
function sectionsOf(
  source: string,
  prefix: AggregatePrefix,
): { header: string[]; sections: Section[] } | undefined {
  const classStart = new RegExp(`^export class ${prefix}(\\w+)Api \\{`);
  const header: string[] = [];
  const sections: Section[] = [];
  for (const line of source.split('\n')) {
    const current = sections.at(-1);
    if (groupImport.test(line) && (!current || current.group !== undefined)) {
      sections.push({ lines: [line] });
      continue;
    }
    if (!current) {
      header.push(line);
      continue;
    }
    const start = classStart.exec(line);
    if (start) {
      if (current.group !== undefined) return undefined;
      current.group = start[1];
    }
    current.lines.push(line);
  }
  if (sections.length === 0 || sections.some((s) => s.group === undefined)) return undefined;
  return { header, sections };
}

/** A group's class that says, when built, why it is not there. */
function unloadedClass(prefix: AggregatePrefix, group: string): string {
  const name = `${group}Api`;
  return (
    `export class ${prefix}${name} { constructor() { throw new Error(` +
    `${JSON.stringify(`${name} is not loaded: tollgate loads only the API groups it calls (apiGroupsUsed in src/cluster/slim-client.ts)`)}); } }`
  );
}

/**
 * The aggregate `source` with only the `used` groups' sections; every other group's class
 * replaced by one that throws. Undefined when `source` is not laid out as expected or lacks
 * a used group: then it must be loaded whole.
 */
export function slimGeneratedApis(
  source: string,
  prefix: AggregatePrefix,
  used: ReadonlySet<string>,
): string | undefined {
  const parsed = sectionsOf(source, prefix);
  if (!parsed) return undefined;
  const groups = new Set(parsed.sections.map((s) => s.group));
  if ([...used].some((group) => !groups.has(group))) return undefined;
  const body = parsed.sections.map((section) =>
    used.has(section.group!) ? section.lines.join('\n') : unloadedClass(prefix, section.group!),
  );
  return [...parsed.header, ...body].join('\n');
}

function sourceText(source: string | ArrayBuffer | ArrayBufferView): string {
  if (typeof source === 'string') return source;
  const bytes = ArrayBuffer.isView(source)
    ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength)
    : new Uint8Array(source);
  return new TextDecoder().decode(bytes);
}

/** Cuts the client library's generated aggregates at load (see above), in this thread, for every module loaded after the call. */
export function registerSlimClient(used: ReadonlySet<string> = apiGroupsUsed): void {
  registerHooks({
    load(url, context, nextLoad) {
      const loaded = nextLoad(url, context);
      const file = aggregateUrl.exec(url)?.[1];
      const prefix = file === undefined ? undefined : aggregates.get(file);
      if (prefix === undefined || loaded.source === undefined || loaded.source === null)
        return loaded;
      const slim = slimGeneratedApis(sourceText(loaded.source), prefix, used);
      return slim === undefined ? loaded : { ...loaded, source: slim };
    },
  });
}
