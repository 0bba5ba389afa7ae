/**
 * The coding-agent harnesses `npm run harness-check` installs from npm and runs headless against
 * `continuum serve`: the pinned package, its binary, the settings each documents for a custom base URL
 * (environment variables or a config file written into an isolated home), two turns of one session (a
 * first run, then a continued one), and how to find a client-side error in its output.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

export type HarnessName = "claude-code" | "codex" | "qwen-code" | "opencode";

/** What a harness is told about the server and its scratch space. */
export interface HarnessContext {
  /** the recording proxy in front of `serve` (`http://127.0.0.1:<port>`, no path) */
  readonly baseUrl: string;
  readonly apiKey: string;
  /** the served model id (`GET /v1/models`) */
  readonly model: string;
  /** the served model's context (`max_model_len`) */
  readonly contextTokens: number;
  /** the harness's own output cap per reply; null: its default */
  readonly maxOutputTokens: number | null;
  /** the isolated HOME (config, sessions, caches) */
  readonly home: string;
  /** the working directory the harness runs in */
  readonly workDir: string;
  /**
   * how long the harness may wait on one response (its request or stream-idle timeout): a long prompt's
   * first prefill on a CPU takes minutes, longer than some harnesses' defaults, with no byte in between
   */
  readonly requestTimeoutMs: number;
}

export interface Invocation {
  readonly argv: readonly string[];
  /** written to its stdin, which is then closed (default: no stdin) */
  readonly stdin?: string;
}

/** What a harness's own output says went wrong with the API (not the model's words). */
export interface OutputFindings {
  /** client-side protocol or parse errors (an API error it reports, a stream it could not read) */
  readonly errors: string[];
  /** outcomes that are not protocol errors, e.g. a reply cut at the output cap we set */
  readonly notes: string[];
  /** the harness's own session id, where its output names one */
  readonly sessionId: string | null;
  /** the non-zero exit is explained by the output cap alone (the model's reply never ended in time) */
  readonly exitFromOutputCap: boolean;
}

export interface Harness {
  readonly name: HarnessName;
  readonly pkg: string;
  /** pinned: what was checked; bump deliberately */
  readonly version: string;
  /** the binary under node_modules/.bin */
  readonly bin: string;
  /** the API it speaks to the server, as the docs list it */
  readonly api: string;
  /** how the output cap is given to it; null: it has no setting for it */
  readonly outputCapSetting: string | null;
  /** writes config files under ctx.home / ctx.workDir; returns the harness's environment additions */
  prepare(ctx: HarnessContext): Promise<Record<string, string>>;
  /** first the run, then the same session continued */
  invocations(ctx: HarnessContext): Invocation[];
  findings(stdout: string, stderr: string): OutputFindings;
}

/** The agent's tasks: short, so a turn's cost is its prompt, not its answer. */
export const TASKS = ["Reply with the single word OK.", "Now reply with the single word DONE."] as const;

/** Lines of a JSONL output that parse as objects. */
function jsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (!t.startsWith("{")) continue;
    try {
      const v: unknown = JSON.parse(t);
      if (typeof v === "object" && v !== null && !Array.isArray(v)) out.push(v as Record<string, unknown>);
    } catch {
      // not a JSON line (progress, warnings)
    }
  }
  return out;
}

/**
 * The objects of an output that is one JSON document (an object or an array of events) or, failing that,
 * JSON lines.
 */
function jsonObjects(text: string): Record<string, unknown>[] {
  const t = text.trim();
  if (t === "") return [];
  let doc: unknown;
  try {
    doc = JSON.parse(t);
  } catch {
    return jsonLines(t);
  }
  return (Array.isArray(doc) ? doc : [doc]).filter(
    (e): e is Record<string, unknown> => typeof e === "object" && e !== null,
  );
}

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const clip = (s: string, n = 300) => (s.length > n ? `${s.slice(0, n)}...` : s);

/** Lines of stderr that read as an API or parse failure. */
const STDERR_ERROR =
  /(api error|unexpected status|stream (error|disconnected)|failed to parse|json parse|unexpected token|syntaxerror|invalid_request_error|econnreset|socket hang up|\b[45]\d\d (bad request|not found|internal server error|unprocessable))/i;

function stderrErrors(stderr: string): string[] {
  return stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => STDERR_ERROR.test(l))
    .slice(0, 5)
    .map((l) => clip(l));
}

/** Environment variables every harness gets besides its own: no telemetry, no update checks, no colour. */
export const COMMON_ENV: Record<string, string> = {
  NO_COLOR: "1",
  TERM: "dumb",
  CI: "1",
  DO_NOT_TRACK: "1",
};

const claudeCode: Harness = {
  name: "claude-code",
  pkg: "@anthropic-ai/claude-code",
  version: "2.1.332",
  bin: "claude",
  api: "Anthropic Messages",
  outputCapSetting: "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
  async prepare(ctx) {
    return {
      ANTHROPIC_BASE_URL: ctx.baseUrl,
      ANTHROPIC_API_KEY: ctx.apiKey,
      ANTHROPIC_MODEL: ctx.model,
      // its side requests (titles, summaries) use the "small fast" model: the served one too
      ANTHROPIC_DEFAULT_HAIKU_MODEL: ctx.model,
      ANTHROPIC_DEFAULT_SONNET_MODEL: ctx.model,
      ANTHROPIC_DEFAULT_OPUS_MODEL: ctx.model,
      ANTHROPIC_SMALL_FAST_MODEL: ctx.model,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
      API_TIMEOUT_MS: String(ctx.requestTimeoutMs),
      ...(ctx.maxOutputTokens !== null ? { CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(ctx.maxOutputTokens) } : {}),
    };
  },
  invocations() {
    return [
      { argv: ["-p", TASKS[0], "--output-format", "json"] },
      { argv: ["-p", TASKS[1], "--continue", "--output-format", "json"] },
    ];
  },
  findings(stdout, stderr) {
    const errors: string[] = [];
    const notes: string[] = [];
    let sessionId: string | null = null;
    let exitFromOutputCap = false;
    const results = jsonObjects(stdout).filter((e) => e["type"] === "result");
    const result = results[results.length - 1];
    if (!result) {
      errors.push(`no result object on stdout: ${clip(stdout.trim() || stderr.trim())}`);
    } else {
      sessionId = str(result["session_id"]);
      const apiError = str(result["api_error"]);
      const status = result["api_error_status"];
      const text = str(result["result"]) ?? "";
      if (apiError === "max_output_tokens") {
        notes.push(`reply cut at the output cap: ${clip(text, 160)}`);
        exitFromOutputCap = true;
      } else if (typeof status === "number" || apiError !== null || /^API Error/i.test(text)) {
        errors.push(`${status ?? apiError ?? "API error"}: ${clip(text)}`);
      } else if (result["is_error"] === true) {
        errors.push(`is_error: ${clip(text)}`);
      }
    }
    return { errors: [...errors, ...stderrErrors(stderr)], notes, sessionId, exitFromOutputCap };
  },
};

/** TOML string (basic string, escaped). */
const toml = (s: string) => JSON.stringify(s);

const codex: Harness = {
  name: "codex",
  pkg: "@openai/codex",
  version: "0.171.0",
  bin: "codex",
  api: "OpenAI Responses",
  outputCapSetting: null,
  async prepare(ctx) {
    const codexHome = join(ctx.home, ".codex");
    await mkdir(codexHome, { recursive: true });
    await writeFile(
      join(codexHome, "config.toml"),
      [
        `model = ${toml(ctx.model)}`,
        `model_provider = "continuum"`,
        `model_context_window = ${ctx.contextTokens}`,
        `approval_policy = "never"`,
        `sandbox_mode = "read-only"`,
        "",
        "[model_providers.continuum]",
        `name = "continuum"`,
        `base_url = ${toml(`${ctx.baseUrl}/v1`)}`,
        `wire_api = "responses"`,
        `env_key = "CONTINUUM_API_KEY"`,
        `stream_idle_timeout_ms = ${ctx.requestTimeoutMs}`,
        "",
      ].join("\n"),
    );
    return { CODEX_HOME: codexHome, CONTINUUM_API_KEY: ctx.apiKey };
  },
  invocations() {
    return [
      { argv: ["exec", "--skip-git-repo-check", "--json", TASKS[0]] },
      { argv: ["exec", "resume", "--last", "--skip-git-repo-check", "--json", TASKS[1]] },
    ];
  },
  findings(stdout, stderr) {
    const errors: string[] = [];
    const notes: string[] = [];
    let sessionId: string | null = null;
    for (const event of jsonLines(stdout)) {
      const type = str(event["type"]);
      if (type === "thread.started") sessionId = str(event["thread_id"]) ?? sessionId;
      const item = event["item"] as { type?: unknown; message?: unknown } | undefined;
      // a warning it shows as an item (e.g. no model metadata for a model it does not know), not an API error
      if (type === "item.completed" && item?.type === "error")
        notes.push(`warning: ${clip(str(item.message) ?? "")}`);
      if (type === "error")
        errors.push(`error event: ${clip(str(event["message"]) ?? JSON.stringify(event))}`);
      if (type === "turn.failed") {
        const error = event["error"] as { message?: unknown } | undefined;
        errors.push(`turn.failed: ${clip(str(error?.message) ?? JSON.stringify(event))}`);
      }
    }
    if (!jsonLines(stdout).some((e) => e["type"] === "turn.completed") && errors.length === 0) {
      errors.push(`no turn.completed event: ${clip(stderr.trim() || stdout.trim())}`);
    }
    return { errors: [...errors, ...stderrErrors(stderr)], notes, sessionId, exitFromOutputCap: false };
  },
};

const qwenCode: Harness = {
  name: "qwen-code",
  pkg: "@qwen-code/qwen-code",
  version: "0.24.4",
  bin: "qwen",
  api: "OpenAI chat completions",
  outputCapSetting: "QWEN_CODE_MAX_OUTPUT_TOKENS",
  async prepare(ctx) {
    return {
      OPENAI_BASE_URL: `${ctx.baseUrl}/v1`,
      OPENAI_API_KEY: ctx.apiKey,
      OPENAI_MODEL: ctx.model,
      QWEN_STREAM_IDLE_TIMEOUT_MS: String(ctx.requestTimeoutMs),
      ...(ctx.maxOutputTokens !== null ? { QWEN_CODE_MAX_OUTPUT_TOKENS: String(ctx.maxOutputTokens) } : {}),
    };
  },
  /**
   * Both turns in one process (its stream-json input, one user message a line): `qwen --continue` resends
   * the history without the first turn's date reminder, so a resumed session's prompt no longer repeats
   * the last turn's and, sending no id, cannot continue its program (docs/bench.md).
   */
  invocations() {
    const message = (text: string) =>
      JSON.stringify({ type: "user", message: { role: "user", content: text } });
    return [
      {
        argv: ["--auth-type", "openai", "--input-format", "stream-json", "--output-format", "stream-json"],
        stdin: `${TASKS.map(message).join("\n")}\n`,
      },
    ];
  },
  findings(stdout, stderr) {
    const errors: string[] = [];
    const notes: string[] = [];
    let sessionId: string | null = null;
    let exitFromOutputCap = false;
    const events = jsonObjects(stdout);
    const results = events.filter((e) => e["type"] === "result");
    for (const e of events) {
      sessionId = str(e["session_id"]) ?? sessionId;
      if (e["type"] === "system" && e["subtype"] === "retry") {
        const data = e["data"] as { reason?: unknown } | undefined;
        notes.push(`retried a request (${str(data?.reason) ?? "no reason given"})`);
      }
    }
    if (results.length === 0)
      errors.push(`no result object on stdout: ${clip(stdout.trim() || stderr.trim())}`);
    for (const result of results) {
      if (result["is_error"] !== true) continue;
      const error = result["error"] as { message?: unknown } | undefined;
      const text = str(error?.message) ?? str(result["result"]) ?? JSON.stringify(result);
      if (/max(imum)?[ _]?(output )?tokens|output token limit/i.test(text)) {
        notes.push(`reply cut at the output cap: ${clip(text, 160)}`);
        exitFromOutputCap = true;
      } else errors.push(`is_error: ${clip(text)}`);
    }
    return { errors: [...errors, ...stderrErrors(stderr)], notes, sessionId, exitFromOutputCap };
  },
};

const opencode: Harness = {
  name: "opencode",
  pkg: "opencode-ai",
  version: "1.18.33",
  bin: "opencode",
  api: "OpenAI chat completions",
  outputCapSetting: "provider.continuum.models.<model>.limit.output",
  async prepare(ctx) {
    const configFile = join(ctx.home, "opencode.json");
    const config = {
      $schema: "https://opencode.ai/config.json",
      autoupdate: false,
      share: "disabled",
      model: `continuum/${ctx.model}`,
      small_model: `continuum/${ctx.model}`,
      provider: {
        continuum: {
          npm: "@ai-sdk/openai-compatible",
          name: "continuum",
          options: {
            baseURL: `${ctx.baseUrl}/v1`,
            apiKey: ctx.apiKey,
            timeout: ctx.requestTimeoutMs,
            headerTimeout: ctx.requestTimeoutMs,
            chunkTimeout: ctx.requestTimeoutMs,
          },
          models: {
            [ctx.model]: {
              name: ctx.model,
              tool_call: true,
              limit: { context: ctx.contextTokens, output: ctx.maxOutputTokens ?? 32000 },
            },
          },
        },
      },
    };
    await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
    return {
      OPENCODE_CONFIG: configFile,
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_SHARE: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    };
  },
  invocations() {
    return [
      { argv: ["run", "--format", "json", TASKS[0]] },
      { argv: ["run", "--format", "json", "--continue", TASKS[1]] },
    ];
  },
  findings(stdout, stderr) {
    const errors: string[] = [];
    let sessionId: string | null = null;
    for (const event of jsonLines(stdout)) {
      sessionId = str(event["sessionID"]) ?? sessionId;
      if (event["type"] === "error") {
        const error = event["error"] as { name?: unknown; data?: { message?: unknown } } | undefined;
        errors.push(
          `error event: ${clip(str(error?.data?.message) ?? str(error?.name) ?? JSON.stringify(event))}`,
        );
      }
    }
    return { errors: [...errors, ...stderrErrors(stderr)], notes: [], sessionId, exitFromOutputCap: false };
  },
};

export const HARNESSES: readonly Harness[] = [claudeCode, codex, qwenCode, opencode];
