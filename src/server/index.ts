/** The OpenAI-compatible HTTP server over an EngineService. */
export { type AppOptions, type ContinuumApp, createApp } from "./app.js";
export { ApiError, type OpenAIErrorBody, toApiError } from "./errors.js";
export {
  jsonObjectGbnf,
  jsonSchemaToGbnf,
  SchemaConversionError,
  toolCallGbnf,
} from "./grammars/json-schema-gbnf.js";
export { ServerMetrics } from "./observability/metrics.js";
export {
  type ParsedToolCall,
  parseToolCalls,
  type ToolCallParse,
  type ToolSpec,
} from "./output/tool-calls.js";
export {
  type NamedProgram,
  PROGRAM_ID_SOURCES,
  type ProgramApi,
  type ProgramIdSource,
  programIdOf,
  type RequestProgram,
  requestProgramOf,
  scopeToTenant,
} from "./programs/program-identity.js";
export { type CloseOptions, type RunningServer, type StartServerOptions, startServer } from "./server.js";
