// The CI check of the OpenAI Agents SDK (@openai/agents) against a codexpool gateway, with
// tracing export off, through each of the SDK's ways to the model: the Responses API over HTTP,
// Chat Completions, and the Responses API over a WebSocket. For each: an agent with a function
// tool (run, and run streamed), and a triage agent handing off to a specialist, which then calls
// its own tool on the user's next turn. The SDK is used unchanged; only the OpenAI client's
// baseURL and apiKey point at the gateway. Every case runs; the last line counts them, and the
// exit code is 1 when any failed.
//
//   CODEXPOOL_GATEWAY_URL=http://127.0.0.1:8080/v1 CODEXPOOL_GATEWAY_KEY=sk-... node check.mjs
//
// CODEXPOOL_VERBOSE=1 prints each failure's whole error, not only its first line.
//
// The origin simulator answers a user message carrying `[sim:tool name=NAME args={JSON}]` with
// that function call, and a request that sends tool results back with "Tool NAME returned:
// OUTPUT".
import assert from "node:assert/strict";
import {
  Agent,
  handoff,
  run,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setOpenAIResponsesTransport,
  setTracingDisabled,
  tool,
  user,
} from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";

const baseURL = process.env.CODEXPOOL_GATEWAY_URL ?? "http://127.0.0.1:8080/v1";
const apiKey = process.env.CODEXPOOL_GATEWAY_KEY ?? "";
const model = "gpt-5.1-codex";

setTracingDisabled(true); // no trace export (it would go to the OpenAI platform)
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey, maxRetries: 0 })); // the changed line

// A fresh set of agents per case, so each records only its own tool calls.
function agents() {
  const calls = [];
  const getWeather = tool({
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `18C and sunny in ${city}`;
    },
  });
  const specialist = new Agent({
    name: "Weather specialist",
    instructions: "You answer questions about the weather, with your tool.",
    model,
    tools: [getWeather],
  });
  const toSpecialist = handoff(specialist);
  const triage = new Agent({
    name: "Triage",
    instructions: "Hand weather questions to the weather specialist.",
    model,
    handoffs: [toSpecialist],
  });
  return { calls, specialist, triage, handoffTool: toSpecialist.toolName };
}
const weatherAsk = 'What is the weather in Paris? [sim:tool name=get_weather args={"city":"Paris"}]';
const weatherAnswer = "Tool get_weather returned: 18C and sunny in Paris";

const cases = {
  // One agent, one function tool: the model calls it, the SDK runs it, the model answers.
  tool: async () => {
    const { calls, specialist } = agents();
    const r = await run(specialist, weatherAsk);
    assert.deepEqual(calls, ["Paris"], "the tool did not run with the arguments the simulator sent");
    assert.equal(r.finalOutput, weatherAnswer);
    return `get_weather(Paris), then ${JSON.stringify(r.finalOutput)}`;
  },
  // The same, streamed: text deltas add up to the final output.
  "tool-stream": async () => {
    const { calls, specialist } = agents();
    const r = await run(specialist, weatherAsk, { stream: true });
    let text = "";
    for await (const d of r.toTextStream()) text += d;
    await r.completed;
    assert.deepEqual(calls, ["Paris"], "the tool did not run with the arguments the simulator sent");
    assert.equal(r.finalOutput, weatherAnswer);
    assert.equal(text, weatherAnswer, "the streamed text differs from the final output");
    return `streamed, get_weather(Paris), then ${JSON.stringify(text)}`;
  },
  // Triage hands off to the specialist (the model calls the handoff tool); the user's next turn
  // goes to the agent that answered last, which calls its own tool.
  handoff: async () => {
    const { calls, specialist, triage, handoffTool } = agents();
    const first = await run(triage, `Is it sunny in Paris? [sim:tool name=${handoffTool} args={}]`);
    assert.equal(first.lastAgent?.name, specialist.name, "the triage agent did not hand off");
    assert.ok(first.newItems.some((i) => i.type === "handoff_output_item"), "no handoff in the run's items");
    assert.ok(first.finalOutput, "the specialist gave no answer");
    const second = await run(first.lastAgent, [...first.history, user(weatherAsk)]);
    assert.deepEqual(calls, ["Paris"], "the specialist's tool did not run");
    assert.equal(second.finalOutput, weatherAnswer);
    return `${triage.name} -> ${first.lastAgent.name} (${handoffTool}), then get_weather(Paris)`;
  },
};

const modes = {
  responses: () => {
    setOpenAIAPI("responses");
    setOpenAIResponsesTransport("http");
  },
  chat_completions: () => setOpenAIAPI("chat_completions"),
  "responses-websocket": () => {
    setOpenAIAPI("responses");
    setOpenAIResponsesTransport("websocket");
  },
};

let passed = 0;
let failed = 0;
for (const [mode, use] of Object.entries(modes)) {
  use();
  for (const [name, check] of Object.entries(cases)) {
    try {
      const what = await check();
      console.log(`PASS ${mode} ${name}: ${what}`);
      passed++;
    } catch (err) {
      console.log(`FAIL ${mode} ${name}: ${String(err.message || err).split("\n")[0]}`);
      if (process.env.CODEXPOOL_VERBOSE) console.log(err);
      failed++;
    }
  }
}
console.log(`openai-agents: ${passed} passed, ${failed} failed`);
if (failed > 0) process.exitCode = 1;
