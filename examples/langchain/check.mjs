// The CI check of LangChain JS (@langchain/openai's ChatOpenAI) against a codexpool gateway,
// through Chat Completions and through the Responses API (useResponsesApi): bindTools, the
// model's tool call, the tool run and its result sent back as a ToolMessage, the final answer;
// and .stream() giving the answer in chunks. LangChain is used unchanged; only
// configuration.baseURL and apiKey point at the gateway. Every case runs; the last line counts
// them, and the exit code is 1 when any failed.
//
//   CODEXPOOL_GATEWAY_URL=http://127.0.0.1:8080/v1 CODEXPOOL_GATEWAY_KEY=sk-... node check.mjs
//
// CODEXPOOL_VERBOSE=1 prints each failure's whole error, not only its first line.
//
// The origin simulator answers a user message carrying `[sim:tool name=NAME args={JSON}]` with
// that function call, and a request that sends tool results back with "Tool NAME returned:
// OUTPUT"; anything else with "[codexpool sim] " and words drawn from the prompt.
import assert from "node:assert/strict";
import { HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const baseURL = process.env.CODEXPOOL_GATEWAY_URL ?? "http://127.0.0.1:8080/v1";
const apiKey = process.env.CODEXPOOL_GATEWAY_KEY ?? "";

function chat(useResponsesApi) {
  // the changed lines: configuration.baseURL and apiKey
  return new ChatOpenAI({ model: "gpt-5.1-codex", apiKey, configuration: { baseURL }, useResponsesApi, maxRetries: 0 });
}

function textOf(msg) {
  return typeof msg.content === "string" ? msg.content : msg.content.map((p) => p.text ?? "").join("");
}

const cases = {
  // bindTools -> the model's tool call -> the tool, its ToolMessage -> the final answer.
  tools: async (llm) => {
    const calls = [];
    const getWeather = tool(
      async ({ city }) => {
        calls.push(city);
        return `18C and sunny in ${city}`;
      },
      { name: "get_weather", description: "Get the current weather in a city", schema: z.object({ city: z.string() }) },
    );
    const withTools = llm.bindTools([getWeather]);
    const messages = [new HumanMessage('What is the weather in Paris? [sim:tool name=get_weather args={"city":"Paris"}]')];
    const ai = await withTools.invoke(messages);
    assert.equal(ai.tool_calls?.length, 1, `want one tool call, got ${JSON.stringify(ai.tool_calls)}`);
    const [call] = ai.tool_calls;
    assert.equal(call.name, "get_weather");
    assert.deepEqual(call.args, { city: "Paris" }, "the call's arguments differ from what the simulator sent");
    assert.ok(call.id, "the tool call has no id");
    messages.push(ai);
    const toolMessage = await getWeather.invoke(call); // a ToolCall in, a ToolMessage out
    assert.equal(toolMessage.tool_call_id, call.id);
    messages.push(toolMessage);
    const final = await withTools.invoke(messages);
    assert.deepEqual(calls, ["Paris"], "the tool did not run once");
    assert.equal(final.tool_calls?.length ?? 0, 0, "the final answer asks for another tool call");
    assert.equal(textOf(final), "Tool get_weather returned: 18C and sunny in Paris");
    return `get_weather({"city":"Paris"}) -> ToolMessage -> ${JSON.stringify(textOf(final))}`;
  },
  // .stream(): more than one chunk, adding up to what invoke answers the same prompt.
  stream: async (llm) => {
    const prompt = "Say hello";
    const whole = textOf(await llm.invoke(prompt));
    assert.ok(whole.startsWith("[codexpool sim] "), `unexpected answer ${JSON.stringify(whole)}`);
    const chunks = [];
    for await (const chunk of await llm.stream(prompt)) chunks.push(textOf(chunk));
    const texts = chunks.filter((t) => t !== "");
    assert.ok(texts.length > 1, `want more than one text chunk, got ${texts.length}`);
    assert.equal(texts.join(""), whole, "the chunks do not add up to the answer");
    return `${texts.length} text chunks (${chunks.length} in all) = ${JSON.stringify(whole)}`;
  },
};

let passed = 0;
let failed = 0;
for (const [api, llm] of Object.entries({ chat_completions: chat(false), responses: chat(true) })) {
  for (const [name, check] of Object.entries(cases)) {
    try {
      const what = await check(llm);
      console.log(`PASS ${api} ${name}: ${what}`);
      passed++;
    } catch (err) {
      console.log(`FAIL ${api} ${name}: ${String(err.message || err).split("\n")[0]}`);
      if (process.env.CODEXPOOL_VERBOSE) console.log(err);
      failed++;
    }
  }
}
console.log(`langchain: ${passed} passed, ${failed} failed`);
if (failed > 0) process.exitCode = 1;
