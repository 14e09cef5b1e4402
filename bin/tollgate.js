#!/usr/bin/env node
// tollgate runs its TypeScript sources directly on Node 24 (type stripping); no build step.
// V8's compile cache (Node keeps it under the OS temp folder, TypeScript already stripped)
// lets a repeated start, such as `tollgate validate` in an editor's save hook or a restart
// in the same pod, skip parsing and type stripping; where the cache cannot be written it is
// simply not used. It is enabled before the first TypeScript module loads: a warm start then
// never loads Node's TypeScript stripper (about 17 MB resident).
// `tollgate run` and `tollgate audit verify` keep V8's young generation small before
// anything heavy is loaded (src/cli/memory-flags.ts): the resident memory of a
// long-running controller, and of a walk over the whole audit branch.
// Every command loads only the Kubernetes API groups tollgate calls
// (src/cluster/slim-client.ts): the client library's other groups are never loaded.
import module from 'node:module';
import process from 'node:process';

module.enableCompileCache?.();
const { applyMemoryFlags, nodeFlagsOfThisProcess } = await import('../src/cli/memory-flags.ts');
const { registerSlimClient } = await import('../src/cluster/slim-client.ts');
applyMemoryFlags(process.argv.slice(2), nodeFlagsOfThisProcess());
registerSlimClient();
await import('../src/cli/main.ts');
