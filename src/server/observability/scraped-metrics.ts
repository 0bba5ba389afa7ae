import { Counter, Gauge, type Registry } from "prom-client";

/** A gauge set from `read()` at every scrape. */
export function scrapedGauge(registers: Registry[], name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers,
    collect() {
      this.set(read());
    },
  });
}

/** A counter over a running total the engine keeps: it advances by what the total grew since the last scrape. */
export function scrapedCounter(
  registers: Registry[],
  name: string,
  help: string,
  read: () => number,
): Counter {
  let last = 0;
  return new Counter({
    name,
    help,
    registers,
    collect() {
      const now = read();
      if (now > last) this.inc(now - last);
      last = Math.max(last, now);
    },
  });
}
