/**
 * HAProxy's view of each replica, read from its stats socket (`show stat`, the CSV of HAProxy's
 * management guide, section 9.1): whether its health check holds it up and why not, and the requests it
 * lost or that were sent elsewhere after failing on it, summed over the backends that name it.
 */
import { connect } from "node:net";

export interface BalancerView {
  /** HAProxy's status of the replica: UP, DOWN, DRAIN (agent said drain), NOLB, MAINT; "UP 1/2" while going down */
  readonly status: string;
  /** the last health check's outcome in words ("Layer4 timeout", "Layer7 wrong status: HTTP 500"), null before one */
  readonly check: string | null;
  /** seconds since it last went up or down, null when it never changed */
  readonly changedAgoS: number | null;
  /** requests that failed on it before an answer and were sent to another replica (wredis) */
  readonly retried: number;
  /** answers it had begun and never finished: it died or was cut off mid-answer (srv_abrt) */
  readonly lost: number;
}

/** `show stat` rows as objects keyed by the header's field names. */
export function parseShowStat(csv: string): Record<string, string>[] {
  const [header, ...rows] = csv.split("\n").filter((line) => line.trim() !== "");
  if (!header?.startsWith("# ")) return [];
  const fields = header.slice(2).split(",");
  return rows.map((row) => {
    const values = row.split(",");
    return Object.fromEntries(fields.map((field, i) => [field, values[i] ?? ""]));
  });
}

const count = (value: string | undefined) => {
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
};

/**
 * Each replica's view from `show stat` rows: status and check from the backend whose health check the
 * others track (`checked`), counters summed over every backend in `backends`.
 */
export function balancerViews(
  rows: readonly Record<string, string>[],
  replicas: readonly string[],
  checked: string,
  backends: readonly string[],
): Map<string, BalancerView> {
  const views = new Map<string, BalancerView>();
  for (const name of replicas) {
    const own = rows.filter((r) => r["svname"] === name && backends.includes(r["pxname"] ?? ""));
    const main = own.find((r) => r["pxname"] === checked);
    if (!main) continue;
    const description = main["check_desc"] || null;
    const detail = main["last_chk"] || null;
    views.set(name, {
      status: main["status"] ?? "",
      check: description && detail && detail !== description ? `${description}: ${detail}` : description,
      changedAgoS: main["lastchg"] === "" || main["lastchg"] === undefined ? null : count(main["lastchg"]),
      retried: own.reduce((n, r) => n + count(r["wredis"]), 0),
      lost: own.reduce((n, r) => n + count(r["srv_abrt"]), 0),
    });
  }
  return views;
}

/** The `show stat` CSV from the socket at `path` (a leading NUL: Linux's abstract namespace), or null. */
export function readShowStat(path: string, timeoutMs: number): Promise<string | null> {
  return new Promise((done) => {
    const socket = connect({ path });
    let text = "";
    const finish = (value: string | null) => {
      clearTimeout(timer);
      socket.destroy();
      done(value);
    };
    const timer = setTimeout(() => finish(null), timeoutMs);
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write("show stat\n"));
    socket.on("data", (chunk: string) => {
      text += chunk;
    });
    socket.on("end", () => finish(text));
    socket.on("error", () => finish(null));
  });
}
