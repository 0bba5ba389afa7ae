/**
 * What constrains a completion's text besides tools: OpenAI's `response_format`, or vLLM's structured
 * outputs (`structured_outputs` with one of `json`, `regex`, `choice`, `grammar`, `json_object`, or the
 * older top-level `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`), as one GBNF grammar.
 */
import { ApiError } from "./errors.js";
import { gbnfLiteral } from "./gbnf-literal.js";
import { jsonObjectGbnf, jsonSchemaToGbnf, SchemaConversionError } from "./json-schema-gbnf.js";
import { regexGbnf, UnsupportedPatternError } from "./pattern-gbnf.js";
import { responseFormatGrammar } from "./sampling.js";
import type { CommonBody } from "./schemas.js";

/** A grammar the output must follow, and the request field it came from (named by errors about it). */
export interface OutputGrammar {
  readonly grammar: string;
  readonly param: string;
}

type Constraint = {
  param: string;
  kind: "json" | "regex" | "choice" | "grammar" | "json_object";
  value: unknown;
};

/** The structured-output constraints the request names, each with its field. */
function constraintsOf(body: CommonBody): Constraint[] {
  const out: Constraint[] = [];
  const so = body.structured_outputs;
  if (so) {
    for (const kind of ["json", "regex", "choice", "grammar"] as const) {
      if (so[kind] != null) out.push({ param: `structured_outputs.${kind}`, kind, value: so[kind] });
    }
    if (so.json_object)
      out.push({ param: "structured_outputs.json_object", kind: "json_object", value: true });
  }
  const legacy = {
    json: body.guided_json,
    regex: body.guided_regex,
    choice: body.guided_choice,
    grammar: body.guided_grammar,
  } as const;
  for (const kind of ["json", "regex", "choice", "grammar"] as const) {
    if (legacy[kind] != null) out.push({ param: `guided_${kind}`, kind, value: legacy[kind] });
  }
  return out;
}

function grammarOf({ param, kind, value }: Constraint): string {
  try {
    switch (kind) {
      case "json": {
        const schema = typeof value === "string" ? parseSchema(value, param) : value;
        return jsonSchemaToGbnf(schema);
      }
      case "regex":
        return `root ::= ${regexGbnf(value as string)}`;
      case "choice":
        return `root ::= ${(value as string[]).map(gbnfLiteral).join(" | ")}`;
      case "grammar":
        return value as string;
      case "json_object":
        return jsonObjectGbnf();
    }
  } catch (error) {
    if (error instanceof SchemaConversionError) throw ApiError.badRequest(error.message, param);
    if (error instanceof UnsupportedPatternError) {
      throw ApiError.badRequest(`regex ${JSON.stringify(value)} cannot be enforced: ${error.message}`, param);
    }
    throw error;
  }
}

function parseSchema(text: string, param: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw ApiError.badRequest(`${param} is a string that is not JSON: give the schema as an object`, param);
  }
}

/**
 * The grammar of the request's output (`response_format` or vLLM's structured outputs), or null for free
 * text. More than one constraint is a 400, as on vLLM; so is a schema or regex that cannot be enforced (a
 * GBNF `grammar` llama.cpp cannot parse fails the request when it is set up).
 */
export function outputGrammar(body: CommonBody): OutputGrammar | null {
  const fromFormat = responseFormatGrammar(body.response_format);
  const constraints = constraintsOf(body);
  const named = [...(fromFormat === null ? [] : ["response_format"]), ...constraints.map((c) => c.param)];
  if (named.length > 1) {
    throw ApiError.badRequest(`give one output constraint, not ${named.join(" and ")}`, named[1]!);
  }
  if (fromFormat !== null) return { grammar: fromFormat, param: "response_format" };
  const only = constraints[0];
  return only === undefined ? null : { grammar: grammarOf(only), param: only.param };
}
