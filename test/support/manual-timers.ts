/** Timers a test fires by hand: `fire()` runs every pending callback once. */
export class ManualTimers {
  #pending = new Map<number, { callback: () => void; ms: number }>();
  #next = 1;
  setTimeout = (callback: () => void, ms: number): unknown => {
    const id = this.#next++;
    this.#pending.set(id, { callback, ms });
    return id;
  };
  clearTimeout = (handle: unknown): void => {
    this.#pending.delete(handle as number);
  };
  get pending(): number[] {
    return [...this.#pending.values()].map((p) => p.ms);
  }
  fire(): void {
    const due = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of due) p.callback();
  }
}
