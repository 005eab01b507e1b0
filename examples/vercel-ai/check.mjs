// The CI check of the Vercel AI SDK against a codexpool gateway, through each of its three ways
// in: @ai-sdk/openai's Responses model (POST /v1/responses), its chat model (POST
// /v1/chat/completions) and @ai-sdk/anthropic (POST /v1/messages). For each: a tool over two
// steps (generateText, stopWhen isStepCount), the same loop streamed, a text stream (streamText)
// and a structured object (generateObject, and generateText with Output.object). The SDK is used
// unchanged; only baseURL and apiKey point at the gateway. Every case runs; the last line counts
// them, and the exit code is 1 when any failed.
//
//   CODEXPOOL_GATEWAY_URL=http://127.0.0.1:8080/v1 CODEXPOOL_GATEWAY_KEY=sk-... node check.mjs
//
// CODEXPOOL_VERBOSE=1 prints each failure's whole error, not only its first line.
//
// The origin simulator answers a user message carrying `[sim:tool name=NAME args={JSON}]` with
// that function call, and a request that sends tool results back with "Tool NAME returned:
// OUTPUT", a line per result; anything else with "[codexpool sim] " and words drawn from the
// prompt.
import assert from "node:assert/strict";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, isStepCount, Output, streamText, tool } from "ai";
import { z } from "zod";

const baseURL = process.env.CODEXPOOL_GATEWAY_URL ?? "http://127.0.0.1:8080/v1";
const apiKey = process.env.CODEXPOOL_GATEWAY_KEY ?? "";

const openai = createOpenAI({ baseURL, apiKey }); // the changed lines: baseURL and apiKey
const anthropic = createAnthropic({ baseURL, apiKey });
const models = {
  responses: openai.responses("gpt-5.1-codex"),
  chat: openai.chat("gpt-5.1-codex"),
  anthropic: anthropic("claude-sonnet-4-5"), // any Claude name: the gateway's model map decides
};

const simPrefix = "[codexpool sim] ";
const cities = ["Paris", "Oslo"];

// weather is the tool every loop offers; calls records the arguments each run was called with.
function weatherTool(calls) {
  return tool({
    description: "Get the current weather in a city",
    inputSchema: z.object({ city: z.string().describe("The city") }),
    execute: async ({ city }) => {
      calls.push(city);
      return `18C and sunny in ${city}`;
    },
  });
}
// The ask: the simulator calls weather for both cities at once (parallel calls), then answers
// with the two results.
const toolAsk = "What is the weather in Paris and Oslo? " +
  cities.map((c) => `[sim:tool name=weather args={"city":"${c}"}]`).join(" ");
const toolAnswer = cities.map((c) => `Tool weather returned: 18C and sunny in ${c}`).join("\n");

function checkLoop(steps, calls, text) {
  assert.deepEqual(calls, cities, "the tool did not run with the arguments the simulator sent");
  assert.equal(steps.length, 2, `want 2 steps (the calls, then the answer), got ${steps.length}`);
  assert.equal(steps[0].finishReason, "tool-calls");
  assert.deepEqual(steps[0].toolCalls.map((c) => c.input), cities.map((city) => ({ city })));
  assert.equal(steps[1].finishReason, "stop");
  assert.equal(text, toolAnswer, "the final answer does not quote the tool's results");
}

const weatherSchema = z.object({
  city: z.string(),
  temperature: z.number(),
  conditions: z.enum(["sunny", "cloudy", "rain", "snow"]),
});
const objectAsk = "Describe the weather in Paris as an object.";

function checkObject(object) {
  const parsed = weatherSchema.safeParse(object);
  assert.ok(parsed.success, `the object does not match the schema: ${JSON.stringify(object)}`);
}

const cases = {
  // generateText: step 1 the two calls, the SDK runs the tool, step 2 the answer.
  tools: async (model) => {
    const calls = [];
    const r = await generateText({ model, tools: { weather: weatherTool(calls) }, stopWhen: isStepCount(5), prompt: toolAsk, maxRetries: 0 });
    checkLoop(r.steps, calls, r.text);
    return `${r.steps.length} steps, weather(${calls.join(", ")}), then ${JSON.stringify(r.text)}`;
  },
  // The same loop streamed.
  "stream-tools": async (model) => {
    const calls = [];
    const r = streamText({ model, tools: { weather: weatherTool(calls) }, stopWhen: isStepCount(5), prompt: toolAsk, maxRetries: 0, onError: () => {} });
    let text = "";
    for await (const d of r.textStream) text += d;
    checkLoop(await r.steps, calls, text);
    return `${(await r.steps).length} steps streamed, weather(${calls.join(", ")})`;
  },
  // streamText: more than one delta, adding up to what generateText answers the same prompt.
  stream: async (model) => {
    const prompt = "Say hello";
    const whole = await generateText({ model, prompt, maxRetries: 0 });
    assert.ok(whole.text.startsWith(simPrefix), `unexpected answer ${JSON.stringify(whole.text)}`);
    const r = streamText({ model, prompt, maxRetries: 0, onError: () => {} });
    const deltas = [];
    for await (const d of r.textStream) deltas.push(d);
    assert.ok(deltas.length > 1, `want more than one text delta, got ${deltas.length}`);
    assert.equal(deltas.join(""), whole.text, "the deltas do not add up to the answer");
    assert.equal(await r.finishReason, "stop");
    return `${deltas.length} deltas = ${JSON.stringify(whole.text)}`;
  },
  // generateObject: the answer parses as an instance of the zod schema.
  object: async (model) => {
    const r = await generateObject({ model, schema: weatherSchema, prompt: objectAsk, maxRetries: 0 });
    checkObject(r.object);
    return JSON.stringify(r.object);
  },
  // The same through generateText's structured output (the SDK's recommended way since v6).
  output: async (model) => {
    const r = await generateText({ model, output: Output.object({ schema: weatherSchema }), prompt: objectAsk, maxRetries: 0 });
    checkObject(r.output);
    return JSON.stringify(r.output);
  },
};

let passed = 0;
let failed = 0;
for (const [route, model] of Object.entries(models)) {
  for (const [name, run] of Object.entries(cases)) {
    try {
      const what = await run(model);
      console.log(`PASS ${route} ${name}: ${what}`);
      passed++;
    } catch (err) {
      console.log(`FAIL ${route} ${name}: ${String(err.message || err).split("\n")[0]}`);
      if (process.env.CODEXPOOL_VERBOSE) console.log(err);
      failed++;
    }
  }
}
console.log(`vercel-ai: ${passed} passed, ${failed} failed`);
if (failed > 0) process.exitCode = 1;
