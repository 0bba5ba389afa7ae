/**
 * Hosts for multi-host tests, made of Linux network namespaces: one namespace per host, each with its
 * own address on an `eth0` that is one end of a veth pair whose other end is a port of a bridge in a
 * "switch" namespace. Everything lives in namespaces the test creates: nothing is added to the machine's
 * own network, and the hosts reach only each other. `remove()` deletes them all.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import type { Fetch } from "./cluster-cli.js";

function ip(args: readonly string[]): { ok: boolean; stderr: string; missing: boolean } {
  const run = spawnSync("ip", args, { encoding: "utf8" });
  return { ok: run.status === 0, stderr: (run.stderr ?? "").trim(), missing: run.error !== undefined };
}

function mustIp(args: readonly string[]): void {
  const run = ip(args);
  if (!run.ok) throw new Error(`ip ${args.join(" ")}: ${run.stderr}`);
}

/** Why namespaced hosts cannot be made here, or false. Makes and removes a probe namespace. */
export function netnsSkip(): string | false {
  if (process.platform !== "linux") return "network namespaces are a Linux feature";
  if (process.getuid?.() !== 0) return "creating network namespaces (ip netns add) needs root";
  const probe = `cnt-probe-${process.pid}`;
  const add = ip(["netns", "add", probe]);
  if (add.missing) return "iproute2's ip is not installed (apt-get install iproute2)";
  if (!add.ok) return `this machine does not allow network namespaces: ip netns add: ${add.stderr}`;
  try {
    const veth = ip(["-n", probe, "link", "add", "name", "probe0", "type", "veth", "peer", "name", "probe1"]);
    if (!veth.ok) return `this machine does not allow veth pairs: ip link add type veth: ${veth.stderr}`;
    const bridge = ip(["-n", probe, "link", "add", "br0", "type", "bridge"]);
    if (!bridge.ok) return `this machine does not allow bridges: ip link add type bridge: ${bridge.stderr}`;
    return false;
  } finally {
    ip(["netns", "del", probe]);
  }
}

export interface Host {
  readonly ns: string;
  readonly address: string;
  /** the command prefix that runs a program on this host */
  readonly exec: readonly string[];
}

export class Network {
  private readonly namespaces: string[] = [];
  private readonly switchNs: string;

  /** `tag` names the namespaces (`<tag>-sw`, `<tag>-<host>`); hosts get `<subnet>.<n>`/24. */
  constructor(
    private readonly tag: string,
    private readonly subnet: string,
  ) {
    this.switchNs = `${tag}-sw`;
    mustIp(["netns", "add", this.switchNs]);
    this.namespaces.push(this.switchNs);
    mustIp(["-n", this.switchNs, "link", "add", "br0", "type", "bridge"]);
    mustIp(["-n", this.switchNs, "link", "set", "br0", "up"]);
  }

  addHost(name: string, n: number): Host {
    const ns = `${this.tag}-${name}`;
    const address = `${this.subnet}.${n}`;
    mustIp(["netns", "add", ns]);
    this.namespaces.push(ns);
    const port = `p-${name}`;
    mustIp(["-n", this.switchNs, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns]);
    mustIp(["-n", this.switchNs, "link", "set", port, "master", "br0", "up"]);
    mustIp(["-n", ns, "addr", "add", `${address}/24`, "dev", "eth0"]);
    mustIp(["-n", ns, "link", "set", "eth0", "up"]);
    mustIp(["-n", ns, "link", "set", "lo", "up"]);
    return { ns, address, exec: ["ip", "netns", "exec", ns] };
  }

  /**
   * Pulls (false) or plugs back (true) the cable of `host`: its port on the switch goes down, so packets
   * to and from it are dropped without a word, as when a link or a host's network fails; its own
   * interface and processes stay as they are.
   */
  setLink(host: Host, up: boolean): void {
    mustIp([
      "-n",
      this.switchNs,
      "link",
      "set",
      `p-${host.ns.slice(this.tag.length + 1)}`,
      up ? "up" : "down",
    ]);
  }

  /** Deletes every namespace (the processes in them must be gone first). */
  remove(): void {
    for (const ns of this.namespaces.reverse()) ip(["netns", "del", ns]);
    this.namespaces.length = 0;
  }
}

/** An HTTP client running on `host` (a child process there), for the test in the machine's namespace. */
export class HostClient {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, (answer: { status: number; text: string } | Error) => void>();
  private next = 0;

  constructor(host: Host) {
    this.child = spawn(
      host.exec[0] as string,
      [
        ...host.exec.slice(1),
        process.execPath,
        "--import",
        "tsx",
        resolve("src/cluster/test-support/netns-client.ts"),
      ],
      { stdio: ["pipe", "pipe", "inherit"] },
    );
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      const answer = JSON.parse(line) as { id: number; status?: number; text?: string; error?: string };
      const done = this.pending.get(answer.id);
      this.pending.delete(answer.id);
      done?.(
        answer.error === undefined
          ? { status: answer.status as number, text: answer.text as string }
          : new Error(answer.error),
      );
    });
  }

  readonly fetch: Fetch = (url, init) =>
    new Promise((done, fail) => {
      const id = this.next++;
      this.pending.set(id, (answer) => (answer instanceof Error ? fail(answer) : done(answer)));
      this.child.stdin?.write(`${JSON.stringify({ id, url, ...init })}\n`);
    });

  close(): Promise<void> {
    const exited = new Promise<void>((done) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) done();
      else this.child.once("exit", () => done());
    });
    this.child.kill("SIGKILL");
    return exited;
  }
}
