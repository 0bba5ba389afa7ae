import type { AgentNode, AgentStep, AgentTrace } from "./agent-trace.js";

/**
 * A trace with every token count times `tokenScale` and every recorded time times `timeScale` (the
 * simulator's --token-scale and --tool-time-scale). Block ids keep their meaning: a block then stands for
 * `blockSize x tokenScale` tokens (fractional sizes are fine, ids only ever divide positions), so prefix
 * sharing stays exact. Counts round to whole tokens.
 */
export function scaleAgentTrace(trace: AgentTrace, tokenScale: number, timeScale: number): AgentTrace {
  if (tokenScale === 1 && timeScale === 1) return trace;
  const tokens = (n: number) => Math.round(n * tokenScale);
  const node = (n: AgentNode): AgentNode => ({
    ...n,
    t: n.t * timeScale,
    toolTokens: tokens(n.toolTokens),
    systemTokens: tokens(n.systemTokens),
    steps: n.steps.map((step): AgentStep => {
      if (step.kind === "call") {
        return {
          ...step,
          t: step.t * timeScale,
          input: tokens(step.input),
          output: tokens(step.output),
          apiTimeS: step.apiTimeS === null ? null : step.apiTimeS * timeScale,
          thinkTimeS: step.thinkTimeS * timeScale,
        };
      }
      return { ...step, agent: node(step.agent), recordedEndS: step.recordedEndS * timeScale };
    }),
  });
  return { ...trace, blockSize: trace.blockSize * tokenScale, root: node(trace.root) };
}
