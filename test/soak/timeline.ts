/** The soak's timeline: every fault, recovery and harness event, printed as it happens. */
export interface TimelineEntry {
  /** Milliseconds since the chaos phase began (negative: during set-up). */
  readonly atMs: number;
  readonly what: string;
}

export class Timeline {
  readonly entries: TimelineEntry[] = [];
  startedAt = Date.now();

  note(what: string): void {
    const entry = { atMs: Date.now() - this.startedAt, what };
    this.entries.push(entry);
    process.stderr.write(`[soak] ${format(entry)}\n`);
  }
}

export const format = (entry: TimelineEntry): string =>
  `${(entry.atMs / 1000).toFixed(1).padStart(7)}s  ${entry.what}`;
