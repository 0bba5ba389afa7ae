/**
 * HAProxy's agent check: HAProxy connects to this TCP port every few seconds and reads one line. "ready
 * up" keeps the replica in rotation; "drain" sets its weight to 0, so no new program is placed here
 * while programs that already live here still reach it through the balancer's stick table.
 */
import { createServer, type Server } from "node:net";

export interface AgentCheck {
  readonly port: number;
  close(): Promise<void>;
}

export async function startAgentCheck(
  host: string,
  port: number,
  draining: () => boolean,
): Promise<AgentCheck> {
  const server: Server = createServer((socket) => {
    socket.on("error", () => {});
    socket.end(draining() ? "drain\n" : "ready up\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
