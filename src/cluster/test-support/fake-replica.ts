/**
 * A stand-in for a `continuum serve` replica behind the balancer, for tests of what the balancer and the
 * fleet view do when replicas fail: it answers /health, /metrics, /dashboard/state and chat completions
 * (naming itself), can hold chat requests until released, and can go silent (every request, health checks
 * included, left unanswered, as a host cut off by the network) or stop listening.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export class FakeReplica {
  /** chat requests it received, in order */
  readonly chats: string[] = [];
  /** hold chat requests unanswered until release() */
  holding = false;
  private silent = false;
  private held: (() => void)[] = [];
  private readonly server: Server;
  private readonly hung: ServerResponse[] = [];

  private constructor(
    readonly name: string,
    server: Server,
  ) {
    this.server = server;
  }

  /** Listens on 127.0.0.1:`port` (0: any free port). */
  static async start(name: string, port = 0): Promise<FakeReplica> {
    let replica: FakeReplica | null = null;
    const server = createServer((req, res) => replica?.handle(req, res));
    replica = new FakeReplica(name, server);
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(port, "127.0.0.1", done);
    });
    return replica;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Answers the chat requests it holds, and the next ones at once. */
  release(): void {
    this.holding = false;
    for (const answer of this.held.splice(0)) answer();
  }

  /** From now on it answers nothing: its host is cut off (connections still open, nothing comes back). */
  goSilent(): void {
    this.silent = true;
  }

  /** Stops listening and drops every connection (a dead process: connections refused). */
  async close(): Promise<void> {
    for (const res of this.hung) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.silent) {
      this.hung.push(res);
      req.resume();
      return;
    }
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/health") return void res.end();
    if (path === "/metrics") {
      res.setHeader("content-type", "text/plain; version=0.0.4");
      return void res.end(
        `# TYPE continuum:fake_chats_total counter\ncontinuum:fake_chats_total ${this.chats.length}\n`,
      );
    }
    if (path === "/dashboard/state") {
      res.setHeader("content-type", "application/json");
      return void res.end(JSON.stringify({ server: { model: "fake" }, programs: [], history: [] }));
    }
    if (path === "/v1/chat/completions") {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (chunk: string) => {
        body += chunk;
      });
      req.on("end", () => {
        this.chats.push(body);
        const answer = () => {
          if (this.silent) return void this.hung.push(res);
          res.setHeader("content-type", "application/json");
          res.end(JSON.stringify({ replica: this.name }));
        };
        if (this.holding) this.held.push(answer);
        else answer();
      });
      return;
    }
    res.statusCode = 404;
    res.end();
  }
}
