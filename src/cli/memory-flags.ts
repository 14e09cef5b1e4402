/**
 * The V8 flags `tollgate run` and `tollgate audit verify` set on themselves before they
 * load anything heavy.
 *
 * V8 grows its young generation (the semi-spaces where new objects are born) up to
 * 16 MiB per semi-space while objects pile up: loading the Kubernetes client's thousands
 * of modules and listing thousands of pods both do. The grown pages then stay resident
 * for the life of the process, about 45 MiB at 10,000 pods (docs/BENCHMARKS.md, Memory).
 * A long-running controller holds its pods in the old generation anyway, so `run` stops
 * the growth factor: the young generation mostly stays at its initial size (2 MiB of
 * capacity; V8's time-based sizing still grows it on a busy machine, up to 24 MiB seen,
 * against 64 MiB without): more, smaller scavenges, planning a few per cent slower, and
 * the memory back.
 *
 * `audit verify` walks the whole audit branch: every commit's trees, blobs and records are
 * garbage a moment later, and V8 grew its young generation to that churn (a 100,000-record
 * trail: 420 MiB peak RSS in 36 s; with a 1 MiB semi-space from the command line, 302 MiB
 * in 23 s: docs/BENCHMARKS.md, the audit trail at a million records). The same flag holds
 * it at its initial size from inside the process; a semi-space size set at run time does
 * not (V8 has sized the heap by then).
 *
 * V8's memory saver mode (`--memory-saver-mode`) is not set: it held a leader writing the
 * Released conditions of 10,000 fresh pods at 148 MiB instead of 153 to 163, but made
 * releases slower (strict p99 988 ms against 705 in the latency bench, tollgate's own share
 * over 250 ms) for 1.08 times the CPU (docs/BENCHMARKS.md, Memory). An operator who wants
 * it passes it on node's command line (docs/install.md, Sizing).
 *
 * The flag is set at run time (`v8.setFlagsFromString`), because the image starts
 * `node bin/tollgate.js run` and a deployment's NODE_OPTIONS carry only the heap cap.
 * An operator who passes any young-generation size flag keeps their own choice.
 */
import { setFlagsFromString } from 'node:v8';

export const runMemoryFlags: readonly string[] = ['--semi-space-growth-factor=1'];

const youngGenerationFlag = /^--(max[-_]|min[-_])?semi[-_]space[-_](size|growth[-_]factor)\b/;

/** The flags to set for these arguments (process.argv after the script) and Node flags (execArgv, NODE_OPTIONS). */
export function memoryFlagsFor(
  args: readonly string[],
  nodeFlags: readonly string[],
): readonly string[] {
  const walksOrRuns = args[0] === 'run' || (args[0] === 'audit' && args[1] === 'verify');
  if (!walksOrRuns) return [];
  if (nodeFlags.some((flag) => youngGenerationFlag.test(flag))) return [];
  return runMemoryFlags;
}

/** Node's own flags of this process: its command line and NODE_OPTIONS. */
export function nodeFlagsOfThisProcess(): string[] {
  return [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].filter(
    (flag) => flag !== '',
  );
}

/** Sets the flags `memoryFlagsFor` picks; returns them. Call before the heavy imports. */
export function applyMemoryFlags(
  args: readonly string[],
  nodeFlags: readonly string[],
): readonly string[] {
  const flags = memoryFlagsFor(args, nodeFlags);
  if (flags.length > 0) setFlagsFromString(flags.join(' '));
  return flags;
}
