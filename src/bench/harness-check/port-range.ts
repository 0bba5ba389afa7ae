/**
 * The ports `npm run harness-check` listens on (each harness's `serve` and recording proxy): any free ones,
 * or with `--port-range A-B` only ports of that range (a firewall that opens some, a machine shared with
 * servers on fixed ports).
 */
import { createServer } from "node:net";

export interface PortRange {
  readonly first: number;
  readonly last: number;
}

/** `A-B` with 1 <= A <= B <= 65535; null when the text is not of that form. */
export function parsePortRange(text: string): PortRange | null {
  const m = /^(\d+)-(\d+)$/.exec(text.trim());
  if (!m) return null;
  const first = Number(m[1]);
  const last = Number(m[2]);
  return first >= 1 && first <= last && last <= 65535 ? { first, last } : null;
}

/** Binds `port` (0: one the system picks) on `host` and lets it go again: the port bound, or null when taken. */
function tryPort(host: string, port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(null));
    server.listen(port, host, () => {
      const address = server.address();
      const bound = typeof address === "object" && address ? address.port : null;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * Hands out ports free on `host` when asked: within `range` (each at most once, in order, skipping ports
 * something else holds), or any the system picks when there is no range.
 */
export class PortPicker {
  private next: number;

  constructor(
    private readonly host: string,
    private readonly range: PortRange | null,
  ) {
    this.next = range?.first ?? 0;
  }

  async take(): Promise<number> {
    if (this.range === null) {
      const port = await tryPort(this.host, 0);
      if (port === null) throw new Error(`no free port on ${this.host}`);
      return port;
    }
    const { first, last } = this.range;
    while (this.next <= last) {
      const port = this.next++;
      if ((await tryPort(this.host, port)) !== null) return port;
    }
    throw new Error(`--port-range ${first}-${last}: no free port left on ${this.host}`);
  }
}
