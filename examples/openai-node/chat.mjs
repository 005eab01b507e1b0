// The CI check of the official OpenAI Node SDK's chat.completions against a codexpool gateway:
// create, stream with usage, a tool round trip (finish_reason tool_calls, then the result sent
// back), parallel tool calls, a wrong key and a refused request. The SDK is used unchanged; only
// baseURL and apiKey point at the gateway. Exits 1 on any failure.
//
//   CODEXPOOL_GATEWAY_URL=http://127.0.0.1:8080/v1 CODEXPOOL_GATEWAY_KEY=sk-... node chat.mjs
//
// The tool calls come from the origin simulator: a [sim:tool name=... args={...}] directive in
// the last user message asks it for one (several = parallel calls).
import assert from "node:assert/strict";
import OpenAI, { AuthenticationError, BadRequestError } from "openai";

const baseURL = process.env.CODEXPOOL_GATEWAY_URL ?? "http://127.0.0.1:8080/v1";
const apiKey = process.env.CODEXPOOL_GATEWAY_KEY ?? "";
const model = "gpt-5.1-codex";

const client = new OpenAI({ baseURL, apiKey }); // the one changed line

const fn = (name) => ({
  type: "function",
  function: { name, parameters: { type: "object", properties: { city: { type: "string" } } } },
});
const tools = [fn("get_weather"), fn("get_time")];
const weather = '[sim:tool name=get_weather args={"city":"Paris"}]';
const time = '[sim:tool name=get_time args={"city":"Paris"}]';

try {
  const hello = [{ role: "user", content: "Say hello" }];
  const one = await client.chat.completions.create({ model, messages: hello });
  assert.equal(one.object, "chat.completion");
  assert.equal(one.choices[0].finish_reason, "stop");
  const text = one.choices[0].message.content;
  assert.ok(text && text.length > 0, "one-shot answer is empty");
  assert.ok(one.usage.prompt_tokens > 0 && one.usage.completion_tokens > 0, `usage ${JSON.stringify(one.usage)}`);
  console.log(`chat create: ${JSON.stringify(text)}`);

  const stream = await client.chat.completions.create({
    model, messages: hello, stream: true, stream_options: { include_usage: true },
  });
  let deltas = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      deltas += c.delta.content ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(deltas, text, "the streamed deltas differ from the one-shot answer");
  assert.equal(finish, "stop");
  assert.ok(usage && usage.total_tokens > 0, "no usage chunk with include_usage");
  console.log(`chat stream: deltas joined = the answer, finish_reason stop, usage ${usage.total_tokens} tokens`);

  // A tool round trip: the answer asks for get_weather; the result goes back as a tool message.
  const ask = { role: "user", content: "Weather in Paris? " + weather };
  const call = await client.chat.completions.create({ model, messages: [ask], tools });
  assert.equal(call.choices[0].finish_reason, "tool_calls");
  const [tc] = call.choices[0].message.tool_calls;
  assert.equal(tc.type, "function");
  assert.equal(tc.function.name, "get_weather");
  assert.deepEqual(JSON.parse(tc.function.arguments), { city: "Paris" });
  const done = await client.chat.completions.create({
    model,
    tools,
    messages: [ask, call.choices[0].message, { role: "tool", tool_call_id: tc.id, content: "sunny, 21C" }],
  });
  assert.equal(done.choices[0].finish_reason, "stop");
  assert.match(done.choices[0].message.content, /Tool get_weather returned: sunny, 21C/);
  console.log(`chat tool round trip: finish_reason tool_calls, then ${JSON.stringify(done.choices[0].message.content)}`);

  // Two calls in one answer, streamed: each call's deltas carry its own index.
  const both = await client.chat.completions.create({
    model, tools, stream: true, messages: [{ role: "user", content: "Both, please. " + weather + time }],
  });
  const calls = [];
  finish = null;
  for await (const chunk of both) {
    for (const c of chunk.choices) {
      for (const d of c.delta.tool_calls ?? []) {
        calls[d.index] ??= { id: "", name: "", arguments: "" };
        calls[d.index].id += d.id ?? "";
        calls[d.index].name += d.function?.name ?? "";
        calls[d.index].arguments += d.function?.arguments ?? "";
      }
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(finish, "tool_calls");
  assert.deepEqual(calls.map((c) => c.name), ["get_weather", "get_time"]);
  assert.notEqual(calls[0].id, calls[1].id);
  for (const c of calls) assert.deepEqual(JSON.parse(c.arguments), { city: "Paris" });
  console.log("chat parallel tool calls (streamed): get_weather and get_time, finish_reason tool_calls");

  await assert.rejects(new OpenAI({ baseURL, apiKey: "sk-wrong" }).chat.completions.create({ model, messages: hello }), (err) => {
    assert.ok(err instanceof AuthenticationError, `want AuthenticationError, got ${err}`);
    assert.equal(err.status, 401);
    return true;
  });
  console.log("chat wrong key: AuthenticationError (401)");

  await assert.rejects(client.chat.completions.create({ model, messages: [] }), (err) => {
    assert.ok(err instanceof BadRequestError, `want BadRequestError, got ${err}`);
    assert.equal(err.param, "messages");
    return true;
  });
  console.log("chat no messages: BadRequestError with param \"messages\"");
  console.log("openai-node example (chat.completions): all checks passed");
} catch (err) {
  console.error(`openai-node example (chat.completions) failed: ${err.stack || err}`);
  process.exitCode = 1;
}
