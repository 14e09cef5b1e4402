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
 * two aggregates at load: the groups of `apiGroupsUsed` stay, every other group's class
 * becomes one that throws, naming this file, when it is built, and its generated module is
 * never imported. Every name the index exports still exists. Of a used group, the classes
 * keep only the operations tollgate calls (`operationsUsed`): a method of another is not
 * there (`api.listNamespacedService is not a function`), and the unit test that scans
 * tollgate's source for calls of these groups' operations names the one to add. A source
 * whose layout is not the one recognised here is left whole (the process then simply
 * uses more memory; test/unit/cluster/slim-client.test.ts fails on such an upgrade).
 * The generated modules that do load (the used groups, the models they reach) reach V8
 * with their documentation comments blanked (`withoutDocComments`): 2.1 MB of the
 * library's source instead of 4.2 MB.
 *
 * It also resolves every ES module import of `node:http` to `node-http.ts` beside it: the
 * same module without the web classes whose getters load Node's own fetch (see there).
 */
import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';

/** The generated API groups tollgate's commands build clients of (CoreV1Api, EventsV1Api, CoordinationV1Api, VersionApi). */
export const apiGroupsUsed: ReadonlySet<string> = new Set([
  'CoreV1',
  'EventsV1',
  'CoordinationV1',
  'Version',
]);

/**
 * The operations tollgate calls of each used group (the generated methods' names). A used
 * group's classes keep these and their constructors; every other operation's methods are
 * cut at load (`withOperations`): CoreV1 holds about 200 operations in four classes, 3.2 MiB
 * of a process's heap for the five tollgate calls. test/unit/cluster/slim-client.test.ts
 * fails when tollgate's source calls an operation of these groups that is not listed here;
 * it reads names, not which client a call is made on, so a name tollgate calls is kept in
 * every used group that has one (CoreV1's `readNamespacedEvent`, every `getAPIResources`).
 */
export const operationsUsed: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  [
    'CoreV1',
    new Set([
      'getAPIResources',
      'listNode',
      'listPodForAllNamespaces',
      'patchNamespacedPodResize',
      'readNamespacedEvent',
      'readNamespacedPod',
    ]),
  ],
  ['EventsV1', new Set(['getAPIResources', 'readNamespacedEvent'])],
  [
    'CoordinationV1',
    new Set([
      'getAPIResources',
      'createNamespacedLease',
      'readNamespacedLease',
      'replaceNamespacedLease',
    ]),
  ],
  ['Version', new Set(['getCode'])],
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

const classOpens = /^export class \w+[^{]*\{$/;
const memberOpens = /^ {4}(?:async )?(\w+)\(.*\{$/;

/**
 * `source` (a group's generated module, or its section of an aggregate) with each class
 * keeping only its constructor and the methods of the `kept` operations (the operation
 * itself and its `...WithHttpInfo`), each cut method's documentation comment with it. Each
 * cut line is left as an empty line, so the line numbers of stack traces stay those of the
 * file (as `withoutDocComments` keeps them). Undefined when a class is not laid out as
 * generated (members at four spaces, each closed by a line of four spaces and a brace) or
 * lacks a kept operation: then it must be loaded whole.
 */
export function withOperations(source: string, kept: ReadonlySet<string>): string | undefined {
  const keeps = (name: string) =>
    name === 'constructor' || kept.has(name) || kept.has(name.replace(/WithHttpInfo$/, ''));
  const out: string[] = [];
  let inClass = false;
  let names = new Set<string>();
  /** The documentation comment before the next member, while it is read. */
  let comment: string[] = [];
  /** Inside a member: whether it is kept. */
  let inMember: boolean | undefined;
  for (const line of source.split('\n')) {
    if (!inClass) {
      out.push(line);
      if (classOpens.test(line)) [inClass, names] = [true, new Set()];
    } else if (inMember !== undefined) {
      out.push(inMember ? line : '');
      if (line === '    }') inMember = undefined;
    } else if (comment.length > 0 && !comment.at(-1)!.trimEnd().endsWith('*/')) {
      comment.push(line);
    } else if (line.startsWith('    /**')) {
      comment = [line];
    } else if (line === '}') {
      const lacks = [...kept].some((op) => !names.has(op) && !names.has(`${op}WithHttpInfo`));
      if (lacks || comment.length > 0) return undefined;
      out.push(line);
      inClass = false;
    } else {
      const name = memberOpens.exec(line)?.[1];
      if (name === undefined) return undefined;
      names.add(name);
      inMember = keeps(name);
      const member = [...comment, line];
      out.push(...(inMember ? member : member.map(() => '')));
      comment = [];
    }
  }
  return inClass ? undefined : out.join('\n');
}

/** `source` cut to `kept` (`withOperations`); whole when none is listed or not recognised. */
function operationsOnly(source: string, kept: ReadonlySet<string> | undefined): string {
  return (kept && withOperations(source, kept)) ?? source;
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
 * The aggregate `source` with only the `used` groups' sections, each cut to its group's
 * `operations` when listed there; every other group's class replaced by one that throws.
 * Undefined when `source` is not laid out as expected or lacks a used group: then it must
 * be loaded whole.
 */
export function slimGeneratedApis(
  source: string,
  prefix: AggregatePrefix,
  used: ReadonlySet<string>,
  operations: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
): string | undefined {
  const parsed = sectionsOf(source, prefix);
  if (!parsed) return undefined;
  const groups = new Set(parsed.sections.map((s) => s.group));
  if ([...used].some((group) => !groups.has(group))) return undefined;
  const body = parsed.sections.map((section) => {
    if (!used.has(section.group!)) return unloadedClass(prefix, section.group!);
    return operationsOnly(section.lines.join('\n'), operations.get(section.group!));
  });
  return [...parsed.header, ...body].join('\n');
}

/** One line of `gen/models/all.js` (and of the head of `ObjectSerializer.js`): a model's re-export. */
const modelExport = /^export \* from '\.\.\/models\/(\w+)\.js';$/;
/** One of `ObjectSerializer.js`'s imports of a model, and one entry of its `typeMap`. */
const modelImport = /^import \{ (\w+) \} from '\.\.\/models\/(\w+)\.js';$/;
const typeMapEntry = /^ {4}"(\w+)": (\w+),$/;
/** Words of a type text such as `Array<V1Container>` or `{ [key: string]: V1Volume; }`. */
const typeWords = /[A-Za-z_]\w*/g;

/**
 * The generated models the `used` groups can hand the serializer, by name: every model a
 * used group's module (cut to its `operations`) names in a string (a request body's or an
 * answer's type), and every model those name in their attributes, to the end. Computed from
 * the library's own files at load (four group modules, then the reached models: a few
 * milliseconds), so an upgrade that adds a field of a new type keeps that type. Undefined
 * when the library is not laid out as expected (then nothing is cut).
 */
export function modelsReached(
  generatedDir: string,
  used: ReadonlySet<string>,
  operations: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
): ReadonlySet<string> | undefined {
  let index: string;
  try {
    index = readFileSync(`${generatedDir}/models/all.js`, 'utf8');
  } catch {
    return undefined;
  }
  const models = new Set<string>();
  for (const line of index.split('\n')) {
    const name = modelExport.exec(line)?.[1];
    if (name !== undefined) models.add(name);
  }
  const reached = new Set<string>();
  const pending: string[] = [];
  const reach = (text: string) => {
    for (const [word] of text.matchAll(typeWords))
      if (models.has(word) && !reached.has(word)) {
        const name = ownCopy(word);
        reached.add(name);
        pending.push(name);
      }
  };
  try {
    for (const group of used) {
      const api = operationsOnly(
        readFileSync(`${generatedDir}/apis/${group}Api.js`, 'utf8'),
        operations.get(group),
      );
      for (const [, literal] of api.matchAll(/"([^"\n]*)"/g)) reach(literal as string);
    }
    for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
      const model = readFileSync(`${generatedDir}/models/${name}.js`, 'utf8');
      for (const [, type] of model.matchAll(/^ *"type": "([^"]*)",?$/gm)) reach(type as string);
    }
  } catch {
    return undefined;
  }
  return reached.size > 0 ? reached : undefined;
}

/**
 * A copy of `text` that holds nothing of the string it was cut from. V8 keeps a substring
 * of 13 characters or more as a slice of its parent, so a model name cut from CoreV1Api.js
 * and kept for the life of the process kept the whole 1.5 MB file with it.
 */
function ownCopy(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** A model that was not loaded, saying, when built, why. */
function unloadedModel(name: string): string {
  return (
    `export class ${name} { constructor() { throw new Error(` +
    `${JSON.stringify(`${name} is not loaded: tollgate loads only the models of the API groups it calls (modelsReached in src/cluster/slim-client.ts)`)}); } }`
  );
}

/**
 * `gen/models/all.js` (every model, re-exported by the package index) importing only the
 * `reached` models; every other model's name stays exported, as a class that throws when
 * built. Undefined for another layout.
 */
export function slimModelIndex(source: string, reached: ReadonlySet<string>): string | undefined {
  const lines = source.split('\n');
  let found = 0;
  const out = lines.map((line) => {
    const name = modelExport.exec(line)?.[1];
    if (name === undefined) return line;
    if (!reached.has(name)) return unloadedModel(name);
    found += 1;
    return line;
  });
  if (found !== reached.size) return undefined;
  if (lines.some((l) => l.trim() !== '' && !l.startsWith('//') && !modelExport.test(l)))
    return undefined;
  return out.join('\n');
}

/**
 * `gen/models/ObjectSerializer.js` without the models not `reached`: their re-exports,
 * imports and `typeMap` entries dropped (a type missing from the map is passed through as
 * the JSON it is, which only a type outside the used groups could be). Undefined for
 * another layout, when a reached model is missing, or when a dropped model is named
 * anywhere else in the file: then it must be loaded whole.
 */
export function slimObjectSerializer(
  source: string,
  reached: ReadonlySet<string>,
): string | undefined {
  const dropped = new Set<string>();
  const keptEntries = new Set<string>();
  const out: string[] = [];
  for (const line of source.split('\n')) {
    const exported = modelExport.exec(line)?.[1];
    const imported = modelImport.exec(line);
    const entry = typeMapEntry.exec(line);
    const name = exported ?? (imported && imported[1] === imported[2] ? imported[1] : undefined);
    if (name !== undefined) {
      if (reached.has(name)) out.push(line);
      else dropped.add(name);
      continue;
    }
    if (entry && entry[1] === entry[2]) {
      if (reached.has(entry[1] as string)) {
        keptEntries.add(entry[1] as string);
        out.push(line);
      } else dropped.add(entry[1] as string);
      continue;
    }
    out.push(line);
  }
  if (keptEntries.size !== reached.size) return undefined;
  const slim = out.join('\n');
  for (const [word] of slim.matchAll(typeWords)) if (dropped.has(word)) return undefined;
  return slim;
}

/** A loaded module's source as text (a load hook may be handed a string or bytes). */
export function sourceText(source: string | ArrayBuffer | ArrayBufferView): string {
  if (typeof source === 'string') return source;
  const bytes = ArrayBuffer.isView(source)
    ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength)
    : new Uint8Array(source);
  return new TextDecoder().decode(bytes);
}

/** A group's generated module: its request factory and response processor. */
const groupModuleUrl = /\/@kubernetes\/client-node\/dist\/gen\/apis\/(\w+)Api\.js$/;

const modelsUrl = /\/@kubernetes\/client-node\/dist\/gen\/models\/(all|ObjectSerializer)\.js$/;

/** Every generated module of the library: the API groups, aggregates and models. */
const generatedUrl = /\/@kubernetes\/client-node\/dist\/gen\/.+\.js$/;

/**
 * `source` with every documentation comment that stands on lines of its own (a line
 * opening with `/**`, to the line that closes it with `*\/`) blanked, each of its lines kept
 * as an empty line so the line numbers of stack traces stay those of the file. The
 * generated modules are two-thirds documentation (16 of 25 MB), and V8 keeps every
 * module's source for the life of the process. Undefined when a comment closes before
 * the end of its line or never closes, or when the file has a template literal (a `/**`
 * line could be inside one): then it must be loaded whole.
 */
export function withoutDocComments(source: string): string | undefined {
  if (source.includes('`')) return undefined;
  const lines = source.split('\n');
  let inComment = false;
  let blanked = 0;
  for (let i = 0; i < lines.length; i++) {
    const text = (lines[i] as string).trim();
    const opens = !inComment && text.startsWith('/**');
    if (!inComment && !opens) continue;
    const closeAt = text.indexOf('*/', opens ? 2 : 0);
    if (closeAt !== -1 && closeAt !== text.length - 2) return undefined;
    inComment = closeAt === -1;
    lines[i] = '';
    blanked += 1;
  }
  if (inComment) return undefined;
  return blanked === 0 ? source : lines.join('\n');
}

/** `node:http` without the web classes, compiled or not as this module is. */
const nodeHttpUrl = new URL(
  `./node-http${import.meta.url.slice(import.meta.url.lastIndexOf('.'))}`,
  import.meta.url,
).href;

/** An `import` (not a `require`) of `node:http`: its ES module face reads every export. */
function isEsmImportOfHttp(specifier: string, conditions: readonly string[] | undefined): boolean {
  return (
    (specifier === 'node:http' || specifier === 'http') && (conditions ?? []).includes('import')
  );
}

/**
 * Cuts the client library's generated aggregates, the used groups' modules, and its model
 * index and serializer at load (see above) and resolves ES module imports of `node:http`
 * to `node-http.ts`, in this thread, for every module loaded after the call.
 */
export function registerSlimClient(
  used: ReadonlySet<string> = apiGroupsUsed,
  operations: ReadonlyMap<string, ReadonlySet<string>> = operationsUsed,
): void {
  const reachedBy = new Map<string, ReadonlySet<string> | undefined>();
  const reachedFrom = (url: string) => {
    const generatedDir = fileURLToPath(new URL('..', url));
    if (!reachedBy.has(generatedDir))
      reachedBy.set(generatedDir, modelsReached(generatedDir, used, operations));
    return reachedBy.get(generatedDir);
  };
  registerHooks({
    resolve(specifier, context, nextResolve) {
      if (isEsmImportOfHttp(specifier, context.conditions))
        return { url: nodeHttpUrl, shortCircuit: true };
      return nextResolve(specifier, context);
    },
    load(url, context, nextLoad) {
      const loaded = slimmed(url, nextLoad(url, context));
      if (!generatedUrl.test(url) || loaded.source === undefined || loaded.source === null)
        return loaded;
      const bare = withoutDocComments(sourceText(loaded.source));
      return bare === undefined ? loaded : { ...loaded, source: bare };
    },
  });

  /** The aggregates, model index and serializer cut to the used groups; any other module as loaded. */
  function slimmed<Loaded extends { source?: string | ArrayBuffer | ArrayBufferView | null }>(
    url: string,
    loaded: Loaded,
  ): Loaded {
    if (loaded.source === undefined || loaded.source === null) return loaded;
    const file = aggregateUrl.exec(url)?.[1];
    const prefix = file === undefined ? undefined : aggregates.get(file);
    if (prefix !== undefined) {
      const slim = slimGeneratedApis(sourceText(loaded.source), prefix, used, operations);
      return slim === undefined ? loaded : { ...loaded, source: slim };
    }
    const group = groupModuleUrl.exec(url)?.[1];
    const kept = group === undefined ? undefined : operations.get(group);
    if (kept !== undefined) {
      const slim = withOperations(sourceText(loaded.source), kept);
      return slim === undefined ? loaded : { ...loaded, source: slim };
    }
    const models = modelsUrl.exec(url)?.[1];
    if (models === undefined) return loaded;
    const reached = reachedFrom(url);
    if (reached === undefined) return loaded;
    const source = sourceText(loaded.source);
    const slim =
      models === 'all' ? slimModelIndex(source, reached) : slimObjectSerializer(source, reached);
    return slim === undefined ? loaded : { ...loaded, source: slim };
  }
}
