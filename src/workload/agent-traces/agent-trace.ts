/**
 * Agent session traces with block identity (docs/workloads.md, "Session traces with block ids"): each
 * model call carries the ids of its prompt's blocks, so prefix sharing inside a program, across its turns
 * and between a session and its subagents is exact. Read from the Weka capture format (AgentX's Claude
 * Code corpora) and Mooncake JSONL.
 */

/** One model call of a session or a subagent. */
export interface AgentCall {
  readonly kind: "call";
  /** seconds from the trace's start when the call was sent */
  readonly t: number;
  readonly input: number;
  readonly output: number;
  /** one id per `blockSize` tokens of the prompt; equal ids at equal positions after equal ids: equal text */
  readonly hashIds: readonly number[];
  /** recorded seconds from send to the last token (null: not recorded) */
  readonly apiTimeS: number | null;
  /** the client's gap before this call, from the end of the agent's previous call (0: none recorded) */
  readonly thinkTimeS: number;
  /** stop reason as recorded (`tool_use`, `end_turn`, ...; "" when absent) */
  readonly stop: string;
  readonly model: string | null;
  /** recorded as a streaming call (Weka `type: "s"`) */
  readonly streaming: boolean;
  /** fields the reader does not know, kept as they were */
  readonly extra: Readonly<Record<string, unknown>>;
}

/** A subagent spawned by its parent at `agent.t`. */
export interface AgentSpawn {
  readonly kind: "subagent";
  readonly agent: AgentNode;
  /** launched in the background (Weka `status: "async_launched"`): no parent call waits for it */
  readonly background: boolean;
  /** when the recording says it ended: `t + duration_ms`, else its calls' last end, else `t` */
  readonly recordedEndS: number;
  /** recorded fields kept for export: duration_ms, total_tokens, tool_use_count */
  readonly recorded: Readonly<Record<string, unknown>>;
}

export type AgentStep = AgentCall | AgentSpawn;

/** A session (the root) or a subagent: its calls and spawns in recorded order. */
export interface AgentNode {
  /** the trace id for the root, `<parent id>/<agent_id>` for a subagent */
  readonly id: string;
  readonly agentId: string | null;
  readonly subagentType: string | null;
  readonly status: string | null;
  readonly t: number;
  readonly models: readonly string[];
  readonly toolTokens: number;
  readonly systemTokens: number;
  readonly steps: readonly AgentStep[];
  readonly extra: Readonly<Record<string, unknown>>;
}

export type HashScope = "local" | "global";

/** One session tree: a root session and its subagents, sharing one block-id namespace when `local`. */
export interface AgentTrace {
  readonly id: string;
  readonly format: "weka" | "mooncake";
  /** tokens per hash id */
  readonly blockSize: number;
  /** `local`: ids name blocks of this trace only; `global`: ids are shared by every trace of the corpus */
  readonly hashScope: HashScope;
  readonly root: AgentNode;
  readonly extra: Readonly<Record<string, unknown>>;
}

/** Calls of a node, its own (not its subagents'). */
export function ownCalls(node: AgentNode): AgentCall[] {
  return node.steps.filter((s): s is AgentCall => s.kind === "call");
}

/** Subagents a node spawns directly. */
export function ownSpawns(node: AgentNode): AgentSpawn[] {
  return node.steps.filter((s): s is AgentSpawn => s.kind === "subagent");
}

/** Every node of a tree, the root first, then each subagent after its parent (depth first). */
export function treeNodes(root: AgentNode): AgentNode[] {
  const nodes: AgentNode[] = [];
  const visit = (node: AgentNode) => {
    nodes.push(node);
    for (const spawn of ownSpawns(node)) visit(spawn.agent);
  };
  visit(root);
  return nodes;
}

/** Every call of a tree with the node that makes it, in recorded time order (ties: tree order). */
export function callsInTimeOrder(root: AgentNode): { node: AgentNode; call: AgentCall }[] {
  const all = treeNodes(root).flatMap((node) => ownCalls(node).map((call) => ({ node, call })));
  return all
    .map((entry, order) => ({ entry, order }))
    .sort((a, b) => a.entry.call.t - b.entry.call.t || a.order - b.order)
    .map(({ entry }) => entry);
}

/** Seconds from a call's send to its recorded end (its api time, 0 when not recorded). */
export function recordedCallEndS(call: AgentCall): number {
  return call.t + (call.apiTimeS ?? 0);
}

/** When a node's last call ended in the recording, its subagents' too (its start when it made none). */
export function recordedNodeEndS(node: AgentNode): number {
  let end = node.t;
  for (const step of node.steps) {
    end = Math.max(end, step.kind === "call" ? recordedCallEndS(step) : step.recordedEndS);
  }
  return end;
}
