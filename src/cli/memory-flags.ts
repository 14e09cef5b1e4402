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
 * `run` also sets V8's memory saver mode (`--memory-saver-mode`: the footprint first, at
 * the cost of more collector work). Without it V8 lets the old generation grow well above
 * what its last collection left before it collects again (at least 8 MiB, and by a
 * factor of what is live) and keeps the pages; a leader writing the Released conditions of
 * 10,000 fresh pods sat 10 to 20 MiB above its rest for minutes, 153 to 160 MiB. In memory
 * saver mode the steps are smaller: 148 to 149 MiB, a start that peaks 30 to 60 MiB lower,
 * for 1.08 times the CPU seconds over the process's life (docs/BENCHMARKS.md, Memory).
 * `audit verify` runs without it: a walk wants speed, and its peak is bounded by the
 * young-generation flag.
 *
 * The flags are set at run time (`v8.setFlagsFromString`), because the image starts
 * `node bin/tollgate.js run`, a deployment's NODE_OPTIONS carry only the heap cap, and
 * Node refuses V8's own flags there. An operator who passes any young-generation size flag,
 * or `--memory-saver-mode` / `--no-memory-saver-mode` on node's command line, keeps their
 * own choice.
 */
import { setFlagsFromString } from 'node:v8';

/** Holds the young generation at its initial size (`run` and `audit verify`). */
export const youngGenerationFlags: readonly string[] = ['--semi-space-growth-factor=1'];
/** V8's memory saver mode (`run`). */
export const memorySaverFlags: readonly string[] = ['--memory-saver-mode'];
/** Every flag `run` sets when the operator chose none of them. */
export const runMemoryFlags: readonly string[] = [...youngGenerationFlags, ...memorySaverFlags];

const youngGenerationFlag = /^--(max[-_]|min[-_])?semi[-_]space[-_](size|growth[-_]factor)\b/;
const memorySaverFlag = /^--(no[-_])?memory[-_]saver[-_]mode\b/;

/** The flags to set for these arguments (process.argv after the script) and Node flags (execArgv, NODE_OPTIONS). */
export function memoryFlagsFor(
  args: readonly string[],
  nodeFlags: readonly string[],
): readonly string[] {
  const runs = args[0] === 'run';
  const walks = args[0] === 'audit' && args[1] === 'verify';
  if (!runs && !walks) return [];
  const chosen = (flag: RegExp): boolean => nodeFlags.some((given) => flag.test(given));
  return [
    ...(chosen(youngGenerationFlag) ? [] : youngGenerationFlags),
    ...(runs && !chosen(memorySaverFlag) ? memorySaverFlags : []),
  ];
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
