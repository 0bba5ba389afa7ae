/**
 * End to end on the built-in tiny model (real llama.cpp engine, threads 1): request features clients
 * rely on, checked where a user sees them in the response.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { sseEvents } from "../../server/test-support/test-server.js";
import { type LlamaServer, startLlamaServer } from "../test-support/llama-server.js";

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
type Json = any;

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

function postJson(s: LlamaServer, path: string, body: unknown): Promise<Response> {
  return fetch(`${s.server.url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer unused" },
    body: JSON.stringify(body),
  });
}

// byte-level BPE (Llama 3, Qwen: `<tool_call>` one user-defined token) beside the built-in tokenizer
for (const tokenizer of ["spm", "bpe"] as const)
  describe(`request features against the llama.cpp engine (tiny model, ${tokenizer} tokenizer)`, {
    skip: llamaSkip,
  }, () => {
    let s: LlamaServer;
    const post = (path: string, body: unknown) => postJson(s, path, body);

    before(async () => {
      const model =
        tokenizer === "spm" ? [] : ["--model", await ensureBuiltinModel({ preset: "tiny", tokenizer })];
      s = await startLlamaServer(["--kv-cache-tokens", "2048", ...model]);
    });
    after(() => s?.close());

    test("a forced tool call cut by any max_tokens is a call with finish_reason length, never markup", async () => {
      for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
        for (let maxTokens = 1; maxTokens <= 8; maxTokens++) {
          const request = {
            model: s.model,
            messages: [{ role: "user", content: "Weather in Paris?" }],
            tools: [weatherTool],
            tool_choice,
            max_tokens: maxTokens,
            temperature: 0,
          };
          const label = `${JSON.stringify(tool_choice)}, max_tokens ${maxTokens}`;
          const body = (await (await post("/v1/chat/completions", request)).json()) as Json;
          const choice = body.choices[0];
          assert.equal(choice.finish_reason, "length", label);
          assert.equal(choice.message.content, null, label);
          assert.equal(choice.message.tool_calls[0].function.name, "get_weather", label);

          const chunks = sseEvents(
            await (await post("/v1/chat/completions", { ...request, stream: true })).text(),
          )
            .slice(0, -1)
            .map((e) => JSON.parse(e) as Json);
          const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
          assert.equal(content, "", `streamed content, ${label}`);
          const names = chunks
            .flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])
            .map((c: Json) => c.function.name);
          assert.equal(names.join(""), "get_weather", `streamed call, ${label}`);
          assert.equal(chunks.at(-1)!.choices[0].finish_reason, "length", `streamed, ${label}`);
        }
      }
    });

    test("logit_bias +100 on one token makes a greedy completion repeat it; an unknown token id is a 400", async () => {
      const runner = s.engine.runner;
      const token = runner.tokenize(" banana").at(-1)!;
      const piece = Buffer.from(runner.tokenPiece(token)).toString("utf8");
      const request = { model: s.model, prompt: "Hello", max_tokens: 3, temperature: 0 };
      const plain = (await (await post("/v1/completions", request)).json()) as Json;
      assert.notEqual(plain.choices[0].text, piece.repeat(3), "the bias, not the model, picks the token");
      const biased = (await (
        await post("/v1/completions", { ...request, logit_bias: { [String(token)]: 100 } })
      ).json()) as Json;
      assert.equal(biased.choices[0].text, piece.repeat(3));

      const chat = (await (
        await post("/v1/chat/completions", {
          model: s.model,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 2,
          temperature: 0,
          logit_bias: { [String(token)]: 100 },
        })
      ).json()) as Json;
      assert.equal(chat.choices[0].message.content, piece.repeat(2));

      const tooLarge = String(runner.vocabSize);
      const refused = await post("/v1/completions", { ...request, logit_bias: { [tooLarge]: 5 } });
      assert.equal(refused.status, 400);
      const error = ((await refused.json()) as Json).error;
      assert.equal(error.param, "logit_bias");
      assert.match(error.message, new RegExp(`"${tooLarge}"`));
    });

    test("frequency_penalty and presence_penalty take a greedy completion off a token it keeps taking", async () => {
      // a +30 bias makes greedy take one token every time; a frequency penalty of 2 takes 2 off its logit for
      // each time taken, so after some (12 here: the bias less the token's gap to the best other, over 2)
      // another token wins, and with a presence penalty of 2 besides, one sooner
      const runner = s.engine.runner;
      const token = runner.tokenize(" banana").at(-1)!;
      const piece = Buffer.from(runner.tokenPiece(token)).toString("utf8");
      const request = { model: s.model, prompt: "Hello", max_tokens: 24, temperature: 0 };
      const run = async (extra: object): Promise<number> => {
        const text: string = (
          (await (
            await post("/v1/completions", { ...request, logit_bias: { [String(token)]: 30 }, ...extra })
          ).json()) as Json
        ).choices[0].text;
        let taken = 0;
        while (text.startsWith(piece.repeat(taken + 1))) taken++;
        return taken;
      };
      assert.equal(await run({}), 24);
      const byFrequency = await run({ frequency_penalty: 2 });
      assert.ok(byFrequency >= 4 && byFrequency < 24, `taken ${byFrequency} times with frequency_penalty 2`);
      const withPresence = await run({ frequency_penalty: 2, presence_penalty: 2 });
      assert.ok(withPresence < byFrequency, `taken ${withPresence} times with presence_penalty 2 besides`);
    });

    test("min_tokens holds off the end of generation, stop tokens and stop strings until that many tokens are out", async () => {
      // a +100 bias makes greedy end at once (its end-of-generation token) or take one token every time
      const runner = s.engine.runner;
      const eos = runner.eogTokens()[0]!;
      const token = runner.tokenize(" banana").at(-1)!;
      const piece = Buffer.from(runner.tokenPiece(token)).toString("utf8");
      const complete = async (extra: object): Promise<Json> =>
        (await (
          await post("/v1/completions", {
            model: s.model,
            prompt: "Hello",
            max_tokens: 12,
            temperature: 0,
            ...extra,
          })
        ).json()) as Json;
      const toEos = { logit_bias: { [String(eos)]: 100 } };
      assert.equal((await complete(toEos)).usage.completion_tokens, 1);
      for (const temperature of [0, 1]) {
        const held = await complete({ ...toEos, temperature, min_tokens: 5 });
        assert.equal(held.usage.completion_tokens, 6, "five tokens, then the end of generation");
        assert.equal(held.choices[0].finish_reason, "stop");
      }
      const toToken = { logit_bias: { [String(token)]: 100 } };
      const stopToken = await complete({ ...toToken, stop_token_ids: [token], min_tokens: 3 });
      assert.equal(stopToken.usage.completion_tokens, 4, "three tokens, then the stop token");
      assert.equal(stopToken.choices[0].finish_reason, "stop");
      // as vLLM: a stop string is looked for from the min_tokens-th token on, in that token's text
      assert.equal((await complete({ ...toToken, stop: [piece] })).choices[0].text, "");
      const stopString = await complete({ ...toToken, stop: [piece], min_tokens: 3 });
      assert.equal(stopString.choices[0].text, piece.repeat(2));
      assert.equal(stopString.usage.completion_tokens, 3);
      const refused = await post("/v1/completions", {
        model: s.model,
        prompt: "Hello",
        max_tokens: 4,
        min_tokens: 5,
      });
      assert.equal(refused.status, 400);
      assert.equal(((await refused.json()) as Json).error.param, "min_tokens");
    });

    test("repetition_penalty counts the prompt's tokens too: a biased token the prompt holds is not taken first", async () => {
      const runner = s.engine.runner;
      const token = runner.tokenize(" banana").at(-1)!;
      const piece = Buffer.from(runner.tokenPiece(token)).toString("utf8");
      const request = { model: s.model, prompt: "Hello banana", max_tokens: 4, temperature: 0 };
      const first = async (extra: object): Promise<string> =>
        (
          (await (
            await post("/v1/completions", { ...request, logit_bias: { [String(token)]: 30 }, ...extra })
          ).json()) as Json
        ).choices[0].text;
      assert.ok((await first({})).startsWith(piece));
      assert.ok(!(await first({ repetition_penalty: 20 })).startsWith(piece));
      const refused = await post("/v1/completions", { ...request, repetition_penalty: 0 });
      assert.equal(refused.status, 400);
    });

    test("logprobs and token ids: one entry per generated token, greedy takes the top one, streamed the same", async () => {
      const request = {
        model: s.model,
        messages: [{ role: "user", content: "Count to ten." }],
        max_tokens: 12,
        temperature: 0,
        logprobs: true,
        top_logprobs: 5,
      };
      const body = (await (
        await post("/v1/chat/completions", { ...request, return_token_ids: true })
      ).json()) as Json;
      const choice = body.choices[0];
      const entries: Json[] = choice.logprobs.content;
      assert.equal(entries.length, body.usage.completion_tokens);
      // an RL trainer's view: the ids it trains on are the ids sampled, each with its logprob
      assert.equal(body.prompt_token_ids.length, body.usage.prompt_tokens);
      assert.deepEqual(
        choice.token_ids.map((id: number) => Array.from(s.engine.runner.templatePiece(id))),
        entries.map((e) => e.bytes),
      );
      for (const e of entries) {
        assert.ok(e.logprob <= 0 && e.top_logprobs.length === 5);
        assert.equal(e.token, e.top_logprobs[0].token, "greedy takes the most likely token");
        assert.equal(e.logprob, e.top_logprobs[0].logprob);
        assert.ok(e.top_logprobs[1].logprob <= e.top_logprobs[0].logprob);
      }
      // the tokens' bytes spell the text (an end-of-generation token, last, adds none to it)
      const spelled = entries
        .slice(0, choice.finish_reason === "length" ? undefined : -1)
        .flatMap((e) => e.bytes);
      assert.deepEqual(Buffer.from(spelled).toString("utf8"), choice.message.content);
      const chunks = sseEvents(
        await (
          await post("/v1/chat/completions", { ...request, stream: true, return_token_ids: true })
        ).text(),
      )
        .slice(0, -1)
        .map((frame) => JSON.parse(frame) as Json);
      const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
      assert.deepEqual(
        streamed.map((e: Json) => [e.token, e.logprob]),
        entries.map((e) => [e.token, e.logprob]),
      );
      assert.deepEqual(
        chunks.flatMap((c) => c.choices[0]?.token_ids ?? []),
        choice.token_ids,
      );
      assert.deepEqual(chunks.map((c) => c.prompt_token_ids).filter(Boolean), [body.prompt_token_ids]);
      const completion = (await (
        await post("/v1/completions", {
          model: s.model,
          prompt: "One, two,",
          max_tokens: 6,
          logprobs: 2,
          return_token_ids: true,
        })
      ).json()) as Json;
      assert.equal(completion.choices[0].logprobs.tokens.length, completion.choices[0].token_ids.length);
    });

    test("skip_special_tokens false writes control tokens into the text as their names (vLLM's field)", async () => {
      const start = s.engine.runner.tokenize("<|im_start|>").at(-1)!;
      const request = {
        model: s.model,
        prompt: "Hello",
        max_tokens: 2,
        temperature: 0,
        logit_bias: { [String(start)]: 100 },
      };
      const skipped = (await (await post("/v1/completions", request)).json()) as Json;
      assert.equal(skipped.choices[0].text, "");
      assert.equal(skipped.usage.completion_tokens, 2);
      const kept = (await (
        await post("/v1/completions", { ...request, skip_special_tokens: false })
      ).json()) as Json;
      assert.equal(kept.choices[0].text, "<|im_start|><|im_start|>");
    });

    test("structured outputs (vLLM's): the text is one of the choices, matches the regex whole, follows the grammar", async () => {
      const complete = async (extra: object) => {
        const response = await post("/v1/completions", {
          model: s.model,
          prompt: "Answer:",
          max_tokens: 24,
          seed: 3,
          ...extra,
        });
        const body = (await response.json()) as Json;
        return { status: response.status, body, text: body.choices?.[0]?.text as string };
      };
      for (const seed of [1, 2, 3]) {
        const choice = await complete({ seed, structured_outputs: { choice: ["alpha", "beta gamma"] } });
        assert.ok(["alpha", "beta gamma"].includes(choice.text), choice.text);
        const regex = await complete({ seed, guided_regex: "[0-9]{3}-[a-z]{2}" });
        assert.match(regex.text, /^[0-9]{3}-[a-z]{2}$/);
        const grammar = await complete({ seed, structured_outputs: { grammar: 'root ::= "x" [0-9] "!"' } });
        assert.match(grammar.text, /^x[0-9]!$/);
      }
      const broken = await complete({ structured_outputs: { grammar: "root ::= (" } });
      assert.equal(broken.status, 400, JSON.stringify(broken.body));
      assert.match(broken.body.error.message, /grammar/);
    });

    test("echo with logprobs scores the prompt as generation scored the same tokens (lm-evaluation-harness's loglikelihood)", async () => {
      // greedy tokens with their logprobs, then the prompt and those tokens sent back as token ids with echo:
      // each of them scored from the prompt gets the logprob it was generated with
      const context = Array.from(s.engine.runner.tokenize("The capital of France is"));
      const generated = (await (
        await post("/v1/completions", {
          model: s.model,
          prompt: context,
          max_tokens: 6,
          temperature: 0,
          logprobs: 1,
          return_token_ids: true,
          ignore_eos: true,
        })
      ).json()) as Json;
      const ids: number[] = generated.choices[0].token_ids;
      const sampled: number[] = generated.choices[0].logprobs.token_logprobs;
      const scored = (await (
        await post("/v1/completions", {
          model: s.model,
          prompt: [...context, ...ids],
          max_tokens: 1,
          temperature: 0,
          logprobs: 1,
          echo: true,
        })
      ).json()) as Json;
      const { token_logprobs, top_logprobs } = scored.choices[0].logprobs;
      assert.equal(token_logprobs.length, context.length + ids.length + 1);
      assert.equal(token_logprobs[0], null);
      const continuation: number[] = token_logprobs.slice(context.length, -1);
      for (const [i, logprob] of continuation.entries()) {
        assert.ok(
          Math.abs(logprob - sampled[i]!) < 0.02,
          `token ${i}: scored ${logprob}, generated ${sampled[i]}`,
        );
        // greedy: each continuation token is its position's most likely one
        const top: Record<string, number> = top_logprobs[context.length + i];
        assert.ok(Math.max(...Object.values(top)) <= logprob + 1e-6);
      }
      // vLLM's prompt_logprobs of the same prompt: the same values, by token id, ranked
      const vllm = (await (
        await post("/v1/completions", {
          model: s.model,
          prompt: [...context, ...ids],
          max_tokens: 1,
          prompt_logprobs: 3,
        })
      ).json()) as Json;
      const prompt: number[] = [...context, ...ids];
      const entries: Json[] = vllm.choices[0].prompt_logprobs;
      assert.equal(entries[0], null);
      for (const [i, entry] of entries.entries()) {
        if (i === 0) continue;
        const own = entry[String(prompt[i])];
        assert.ok(Math.abs(own.logprob - token_logprobs[i]) < 1e-4, `token ${i}`);
        const ranked = Object.values(entry) as Json[];
        assert.ok(
          ranked.some((e) => e.rank === 1),
          "the most likely token is there, ranked 1",
        );
        assert.ok(own.rank >= 1 && (own.rank > 3 || ranked.filter((e) => e.rank <= 3).length === 3));
      }
      // greedy: each continuation token ranks first (prefill and decode may round a near tie apart)
      for (const k of ids.keys()) {
        const entry = entries[context.length + k];
        const own = entry[String(ids[k])];
        const best = Math.max(...(Object.values(entry) as Json[]).map((e) => e.logprob));
        assert.ok(own.rank === 1 || best - own.logprob < 1e-3, `continuation token ${k}: rank ${own.rank}`);
      }
    });

    test("a token-id prompt completes as its text does; return_token_ids gives the prompt's and the output's ids", async () => {
      const runner = s.engine.runner;
      const ids = Array.from(runner.tokenize("The sky is"));
      const request = { model: s.model, max_tokens: 5, temperature: 0, return_token_ids: true };
      const byText = (await (
        await post("/v1/completions", { ...request, prompt: "The sky is" })
      ).json()) as Json;
      const byIds = (await (
        await post("/v1/completions", { ...request, prompt: [ids, ids] })
      ).json()) as Json;
      assert.deepEqual(
        byIds.choices.map((c: Json) => [c.index, c.text]),
        [
          [0, byText.choices[0].text],
          [1, byText.choices[0].text],
        ],
      );
      const choice = byText.choices[0];
      assert.deepEqual(choice.prompt_token_ids, ids);
      assert.equal(choice.token_ids.length, byText.usage.completion_tokens);
      const detokenized = Buffer.concat(choice.token_ids.map((t: number) => runner.tokenPiece(t))).toString(
        "utf8",
      );
      assert.equal(detokenized, choice.text);
      assert.deepEqual(byIds.choices[1].token_ids, choice.token_ids);
    });

    test("/tokenize counts a chat as its chat completion's prompt_tokens; /detokenize gives a prompt back", async () => {
      const chat = {
        model: s.model,
        messages: [
          { role: "system", content: "You are terse." },
          { role: "user", content: "What is the weather in Oslo today?" },
        ],
        tools: [weatherTool],
      };
      const tokenized = (await (await post("/tokenize", chat)).json()) as Json;
      const completion = (await (
        await post("/v1/chat/completions", { ...chat, max_tokens: 1 })
      ).json()) as Json;
      assert.equal(tokenized.count, completion.usage.prompt_tokens);

      const text = "Hello, naïve world";
      const prompt = (await (
        await post("/tokenize", { prompt: text, add_special_tokens: false })
      ).json()) as Json;
      const detokenized = (await (await post("/detokenize", { tokens: prompt.tokens })).json()) as Json;
      assert.deepEqual(detokenized, { prompt: text, content: text });
      const llama = (await (await post("/tokenize", { content: text, with_pieces: true })).json()) as Json;
      assert.deepEqual(
        llama.tokens.map((t: Json) => t.id),
        prompt.tokens,
      );
      assert.ok(
        llama.tokens.some((t: Json) => Array.isArray(t.piece)),
        "ï split across tokens: its pieces are bytes",
      );
    });
  });

describe("serve --logit-bias against the llama.cpp engine (tiny model)", { skip: llamaSkip }, () => {
  let s: LlamaServer;
  const post = (path: string, body: unknown) => postJson(s, path, body);

  before(async () => {
    s = await startLlamaServer(["--kv-cache-tokens", "2048", "--logit-bias", "eos+100"]);
  });
  after(() => s?.close());

  test("eos+100 ends every reply at once, in each API; a request's own logit_bias for the token wins", async () => {
    const messages = [{ role: "user", content: "Tell me a long story." }];
    const chat = (await (
      await post("/v1/chat/completions", { model: s.model, messages, max_tokens: 20 })
    ).json()) as Json;
    assert.equal(chat.choices[0].finish_reason, "stop");
    assert.equal(chat.choices[0].message.content, "");

    const anthropic = (await (
      await post("/v1/messages", { model: s.model, messages, max_tokens: 20 })
    ).json()) as Json;
    assert.equal(anthropic.stop_reason, "end_turn");

    const eos = s.engine.chatTemplate.eosTokenId as number;
    const overridden = (await (
      await post("/v1/chat/completions", {
        model: s.model,
        messages,
        max_tokens: 20,
        logit_bias: { [String(eos)]: -100 },
      })
    ).json()) as Json;
    assert.equal(overridden.choices[0].finish_reason, "length");
    assert.equal(overridden.usage.completion_tokens, 20);
  });
});
