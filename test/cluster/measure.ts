/**
 * Measures the local control plane: start time (each of N runs and the median) and the
 * resident memory of every component right after start. Run:
 *   node test/cluster/measure.ts [runs]
 * Numbers depend on machine load; the report says how many cores were busy.
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { startControlPlane } from '../support/control-plane.ts';

const runs = Number(process.argv[2] ?? 3);
const rssMiB = (pid: number | undefined): string => {
  if (pid === undefined) return 'n/a';
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return `${Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024)} MiB`;
};

const times: number[] = [];
for (let run = 1; run <= runs; run += 1) {
  const load = loadavg()[0]!.toFixed(1);
  const cp = await startControlPlane({ name: `measure-${run}` });
  times.push(cp.startMillis);
  // Memory settles once the controller manager has built its controllers.
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const memory = Object.entries(cp.pids()).map(([name, pid]) => `${name} ${rssMiB(pid)}`);
  console.log(
    `run ${run}: started in ${cp.startMillis}ms (load ${load} on ${cpus().length} cores); RSS after 10s: ${memory.join(', ')}`,
  );
  await cp.stop();
}
const sorted = [...times].sort((a, b) => a - b);
console.log(
  `median start ${sorted[Math.floor(sorted.length / 2)]}ms over ${runs} runs: ${times.join(', ')}ms`,
);
