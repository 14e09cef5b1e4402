/**
 * `node:http` for ES module importers, without Node's web classes.
 *
 * Node builds the ES module face of a built-in by reading every one of its exports, and
 * `node:http` exports `WebSocket`, `CloseEvent` and `MessageEvent` as getters that load
 * Node's own fetch (its bundled undici): three-quarters of a megabyte of source kept in the
 * heap for the life of a process that never uses it (tollgate's requests go through the
 * undici package). A bare node process importing `node:http` is 13 MiB larger for it; a
 * `tollgate run`, which loads much of the rest anyway, 1.5 MiB (docs/BENCHMARKS.md,
 * Memory). A `require` of `node:http` reads no export, so it loads none of that.
 *
 * `registerSlimClient` (src/cluster/slim-client.ts) resolves every ES module import of
 * `node:http` in a tollgate process to this module: the same module object as its default
 * export, and every other export by name. The three web classes are left out: an importer
 * that names one fails to start, loudly (none of tollgate's or its libraries' do;
 * test/unit/cluster/slim-client.test.ts). `globalAgent` and `maxHeaderSize` are read once,
 * as the process loads; read them through the default export to see a later change.
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';

type NodeHttp = typeof Http & {
  readonly _connectionListener: unknown;
  readonly setGlobalProxyFromEnv: unknown;
};

const http = createRequire(import.meta.url)('node:http') as NodeHttp;

export default http;
export const {
  _connectionListener,
  METHODS,
  STATUS_CODES,
  Agent,
  ClientRequest,
  IncomingMessage,
  OutgoingMessage,
  Server,
  ServerResponse,
  createServer,
  validateHeaderName,
  validateHeaderValue,
  get,
  request,
  setMaxIdleHTTPParsers,
  setGlobalProxyFromEnv,
  maxHeaderSize,
  globalAgent,
} = http;
