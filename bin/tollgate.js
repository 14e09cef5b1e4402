#!/usr/bin/env node
// tollgate runs its TypeScript sources directly on Node 24 (type stripping); no build step.
// V8's compile cache (Node keeps it under the OS temp folder, TypeScript already stripped)
// lets a repeated start, such as `tollgate validate` in an editor's save hook, skip parsing
// and type stripping; where the cache cannot be written it is simply not used.
// `tollgate run` keeps V8's young generation small before anything is loaded
// (src/cli/memory-flags.ts): the resident memory of a long-running controller.
// Every command loads only the Kubernetes API groups tollgate calls
// (src/cluster/slim-client.ts): the client library's other groups are never loaded.
import module from 'node:module';
import process from 'node:process';
import { applyMemoryFlags, nodeFlagsOfThisProcess } from '../src/cli/memory-flags.ts';
import { registerSlimClient } from '../src/cluster/slim-client.ts';

applyMemoryFlags(process.argv.slice(2), nodeFlagsOfThisProcess());
registerSlimClient();
module.enableCompileCache?.();
await import('../src/cli/main.ts');
