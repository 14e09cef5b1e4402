/**
 * Child process of memory.test.ts: syncs one pod informer and prints the heap it holds
 * per pod as JSON. One process per measurement so nothing from an earlier informer
 * (sockets, stream buffers) skews the next. Args: kubeconfig namespace trim|whole
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KubeConfig } from '@kubernetes/client-node';
import { Informer } from '../../../src/cluster/informer.ts';
import { createResourceSource } from '../../../src/cluster/source.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const [kubeconfig, namespace, mode] = process.argv.slice(2);
if (!kubeconfig || !namespace || (mode !== 'trim' && mode !== 'whole')) {
  throw new Error('usage: memory-probe.ts <kubeconfig> <namespace> trim|whole');
}
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const source = createResourceSource(kc, { apiVersion: 'v1', kind: 'Pod', namespace });
// Warm up the client (TLS, discovery) so its one-time allocations are not counted.
await source.list({ limit: 1, signal: new AbortController().signal });
gc();
const before = process.memoryUsage().heapUsed;
const informer = new Informer({ source, transform: mode === 'trim' ? undefined : (o) => o });
informer.start();
await informer.whenSynced(AbortSignal.timeout(120_000));
await informer.stop();
gc();
await new Promise((resolve) => setTimeout(resolve, 100));
gc();
const after = process.memoryUsage().heapUsed;
process.stdout.write(
  JSON.stringify({ mode, count: informer.size, perPod: (after - before) / informer.size }) + '\n',
);
