/**
 * What constrains a completion's text besides tools: OpenAI's `response_format`, or vLLM's structured
 * outputs (`structured_outputs` with one of `json`, `regex`, `choice`, `grammar`, `json_object`, or the
 * older top-level `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`), as one GBNF grammar.
 */
import { ApiError } from "../errors.js";
import { responseFormatGrammar } from "../generation/sampling.js";
import type { CommonBody } from "../schemas.js";
import { gbnfLiteral } from "./gbnf-literal.js";
import { jsonObjectGbnf, jsonSchemaToGbnf, SchemaConversionError } from "./json-schema-gbnf.js";
import { regexGbnf, UnsupportedPatternError } from "./pattern-gbnf.js";

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
        return checkedGrammar(value as string, param);
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

/** Groups nested deeper in a client's GBNF are refused: llama.cpp's parser recurses once per group and crashes the process thousands deep. */
const MAX_GRAMMAR_GROUP_DEPTH = 64;

/** How deep a GBNF grammar's groups nest: its parentheses outside literals, character classes and comments. */
export function gbnfGroupDepth(grammar: string): number {
  let depth = 0;
  let deepest = 0;
  let closer: string | null = null;
  for (let i = 0; i < grammar.length; i++) {
    const ch = grammar[i];
    if (closer !== null) {
      if (ch === "\\" && closer !== "\n") i++;
      else if (ch === closer) closer = null;
    } else if (ch === '"') closer = '"';
    else if (ch === "[") closer = "]";
    else if (ch === "#") closer = "\n";
    else if (ch === "(") deepest = Math.max(deepest, ++depth);
    else if (ch === ")") depth = Math.max(0, depth - 1);
  }
  return deepest;
}

function checkedGrammar(grammar: string, param: string): string {
  if (gbnfGroupDepth(grammar) > MAX_GRAMMAR_GROUP_DEPTH) {
    throw ApiError.badRequest(`${param}: groups nest deeper than ${MAX_GRAMMAR_GROUP_DEPTH} levels`, param);
  }
  return grammar;
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
