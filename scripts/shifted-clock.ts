/**
 * Preload for `npm run test:unit:any-day` (node --import): moves the process's wall clock
 * (`Date`, `Date.now()`, `new Date()`) by TOLLGATE_CLOCK_SHIFT_DAYS days, so the unit
 * tests prove they depend on no calendar date: a test that passes only before or after
 * some fixed date fails under one of the shifts CI runs. Dates built from explicit values
 * (`new Date(ms)`, `Date.UTC`, `Date.parse`) are untouched; timers and
 * `performance.now()` keep running as they do.
 */
const days = Number(process.env.TOLLGATE_CLOCK_SHIFT_DAYS ?? '0');
if (!Number.isFinite(days)) throw new Error(`TOLLGATE_CLOCK_SHIFT_DAYS: not a number of days`);
const offsetMs = days * 86_400_000;
const RealDate = Date;
const shiftedNow = (): number => RealDate.now() + offsetMs;

globalThis.Date = new Proxy(RealDate, {
  construct: (target, args: unknown[], newTarget) =>
    Reflect.construct(target, args.length === 0 ? [shiftedNow()] : args, newTarget) as object,
  apply: () => new RealDate(shiftedNow()).toString(),
  get: (target, property, receiver) =>
    property === 'now' ? shiftedNow : Reflect.get(target, property, receiver),
});
