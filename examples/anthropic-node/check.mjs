// The CI check of the official Anthropic TypeScript SDK against a codexpool gateway: create,
// stream, a tool round trip (stop_reason tool_use, then the result sent back), count_tokens with
// no generation at the origin, a wrong key, a refused request and a usage limit not retried. The
// SDK is used unchanged; only baseURL and apiKey point at the gateway. Exits 1 on any failure.
//
//   CODEXPOOL_GATEWAY_URL=http://127.0.0.1:8080 CODEXPOOL_GATEWAY_KEY=sk-... \
//   CODEXPOOL_SIM_CONTROL=http://127.0.0.1:8090/_sim node check.mjs
//
// CODEXPOOL_SIM_CONTROL is the origin simulator's control URL (ci.sh starts it): the check reads
// its counters and arms its faults there.
import assert from "node:assert/strict";
import Anthropic, { AuthenticationError, BadRequestError, RateLimitError } from "@anthropic-ai/sdk";

const baseURL = process.env.CODEXPOOL_GATEWAY_URL ?? "http://127.0.0.1:8080";
const apiKey = process.env.CODEXPOOL_GATEWAY_KEY ?? "";
const control = process.env.CODEXPOOL_SIM_CONTROL ?? "http://127.0.0.1:8090/_sim";
const model = "claude-sonnet-5-5"; // any Claude name: the gateway's model map decides

const client = new Anthropic({ baseURL, apiKey }); // the one changed line

async function sim(path, method = "GET") {
  const r = await fetch(control + path, { method });
  assert.equal(r.status, 200, `simulator control ${method} ${path}: ${r.status}`);
  return r.json();
}

const bash = {
  name: "Bash",
  description: "Run a shell command",
  input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
};
const ask = { role: "user", content: 'List it. [sim:tool name=Bash args={"command":"ls -1"}]' };

function textOf(msg) {
  return msg.content.filter((b) => b.type === "text").map((b) => b.text).join("");
}

try {
  const one = await client.messages.create({ model, max_tokens: 256, messages: [{ role: "user", content: "Say hello" }] });
  assert.equal(one.type, "message");
  assert.equal(one.role, "assistant");
  assert.equal(one.stop_reason, "end_turn");
  assert.ok(textOf(one).length > 0, "one-shot answer is empty");
  assert.ok(one.usage.input_tokens > 0 && one.usage.output_tokens > 0, `usage ${JSON.stringify(one.usage)}`);
  console.log(`create: ${JSON.stringify(textOf(one))} (${one.usage.input_tokens} in, ${one.usage.output_tokens} out)`);

  const stream = client.messages.stream({ model, max_tokens: 256, messages: [{ role: "user", content: "Say hello" }] });
  let deltas = "";
  stream.on("text", (t) => (deltas += t));
  const streamed = await stream.finalMessage();
  assert.equal(streamed.stop_reason, "end_turn");
  assert.equal(deltas, textOf(one), "the streamed text differs from the one-shot answer");
  console.log("stream: text deltas joined = the one-shot answer, stop_reason end_turn");

  // A tool loop: the simulator asks for Bash; the client runs nothing, sends a result back.
  const call = await client.messages.create({ model, max_tokens: 1024, tools: [bash], messages: [ask] });
  assert.equal(call.stop_reason, "tool_use");
  const use = call.content.find((b) => b.type === "tool_use");
  assert.ok(use, `no tool_use block in ${JSON.stringify(call.content)}`);
  assert.equal(use.name, "Bash");
  assert.deepEqual(use.input, { command: "ls -1" });
  const streamedCall = await client.messages.stream({ model, max_tokens: 1024, tools: [bash], messages: [ask] }).finalMessage();
  assert.equal(streamedCall.stop_reason, "tool_use");
  assert.deepEqual(streamedCall.content.find((b) => b.type === "tool_use")?.input, { command: "ls -1" });
  const done = await client.messages.create({
    model,
    max_tokens: 1024,
    tools: [bash],
    messages: [
      ask,
      { role: "assistant", content: call.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "a.txt\nb.txt" }] },
    ],
  });
  assert.equal(done.stop_reason, "end_turn");
  assert.match(textOf(done), /Tool Bash returned: a\.txt/);
  console.log(`tool round trip: stop_reason tool_use (also streamed), then ${JSON.stringify(textOf(done))}`);

  const before = (await sim("/stats")).responses;
  const counted = await client.messages.countTokens({ model, tools: [bash], messages: [ask] });
  assert.ok(counted.input_tokens > 0, `input_tokens ${counted.input_tokens}`);
  assert.equal((await sim("/stats")).responses, before, "count_tokens started a generation at the origin");
  console.log(`count_tokens: ${counted.input_tokens} input tokens, no generation at the origin`);

  await assert.rejects(
    new Anthropic({ baseURL, apiKey: "sk-wrong" }).messages.create({ model, max_tokens: 16, messages: [ask] }),
    (err) => {
      assert.ok(err instanceof AuthenticationError, `want AuthenticationError, got ${err}`);
      assert.equal(err.status, 401);
      assert.equal(err.error?.error?.type, "authentication_error");
      return true;
    },
  );
  console.log("wrong key: AuthenticationError (401)");

  await assert.rejects(client.messages.create({ model, max_tokens: 16, messages: [] }), (err) => {
    assert.ok(err instanceof BadRequestError, `want BadRequestError, got ${err}`);
    assert.equal(err.error?.error?.type, "invalid_request_error");
    assert.match(err.message, /messages/);
    return true;
  });
  console.log("no messages: BadRequestError (invalid_request_error)");

  // A usage limit whose reset is far off: a RateLimitError at once, not retried.
  await sim("/fault?kind=error:429", "POST");
  const t0 = Date.now();
  await assert.rejects(
    client.messages.create({ model, max_tokens: 16, messages: [{ role: "user", content: "x" }] }, { maxRetries: 3 }),
    (err) => {
      assert.ok(err instanceof RateLimitError, `want RateLimitError, got ${err}`);
      assert.equal(err.error?.error?.type, "rate_limit_error");
      assert.ok(Number(err.headers.get("retry-after")) >= 30, `retry-after ${err.headers.get("retry-after")}`);
      assert.equal(err.headers.get("x-should-retry"), "false");
      return true;
    },
  );
  assert.ok(Date.now() - t0 < 5000, "the usage limit was retried");
  console.log("usage limit: RateLimitError with retry-after, not retried");
  console.log("anthropic-node example: all checks passed");
} catch (err) {
  console.error(`anthropic-node example failed: ${err.stack || err}`);
  process.exitCode = 1;
}
