#!/usr/bin/env node
// A checkout runs tollgate's TypeScript sources directly on Node 24 (type stripping); no
// build step. The image ships src/ compiled to JavaScript (scripts/compile-js.sh, same
// layout), which this file runs when it is there: no start of the image loads Node's
// TypeScript stripper.
// V8's compile cache (Node keeps it under the OS temp folder, TypeScript already stripped)
// lets a repeated start, such as `tollgate validate` in an editor's save hook or a restart
// in the same pod, skip parsing and type stripping; where the cache cannot be written it is
// simply not used. It is enabled before the first TypeScript module loads: a warm start then
// never loads Node's TypeScript stripper (about 17 MB resident). The compiled tree's
// `tollgate run` goes without it: Node keeps every module's cached code in memory for the
// life of the process, to write it out at exit (3.5 MiB of a controller at 0 pods with an
// empty cache, more with a warm one), for a start a long-running process makes once.
// `tollgate run` and `tollgate audit verify` keep V8's young generation small before
// anything heavy is loaded (src/cli/memory-flags.ts): the resident memory of a
// long-running controller, and of a walk over the whole audit branch.
// Every command loads only the Kubernetes API groups tollgate calls
// (src/cluster/slim-client.ts): the client library's other groups are never loaded.
// Every module's source reaches V8 in one byte a character (src/cli/one-byte-sources.ts):
// V8 keeps each source for the life of the process, in two bytes a character if it holds
// a single character above U+00FF.
import { existsSync } from 'node:fs';
import module from 'node:module';
import process from 'node:process';
import { URL } from 'node:url';

const compiled = existsSync(new URL('../src/cli/main.js', import.meta.url));
if (!(compiled && process.argv[2] === 'run')) module.enableCompileCache?.();
const source = (path) => new URL(`../src/${path}${compiled ? '.js' : '.ts'}`, import.meta.url).href;
const { applyMemoryFlags, nodeFlagsOfThisProcess } = await import(source('cli/memory-flags'));
const { registerSlimClient } = await import(source('cluster/slim-client'));
const { registerOneByteSources } = await import(source('cli/one-byte-sources'));
applyMemoryFlags(process.argv.slice(2), nodeFlagsOfThisProcess());
registerSlimClient();
registerOneByteSources();
await import(source('cli/main'));
