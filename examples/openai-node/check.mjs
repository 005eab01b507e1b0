// The CI check of the official OpenAI Node SDK against a codexpool gateway: create, stream, a
// wrong key, a refused request, a usage limit, and an error after the stream began. The SDK is
// used unchanged; only baseURL and apiKey point at the gateway. Exits 1 on any failure.
//
//   CODEXPOOL_GATEWAY_URL=http://127.0.0.1:8080/v1 CODEXPOOL_GATEWAY_KEY=sk-... node check.mjs
// CODEXPOOL_EXPECT_ANSWER, when set, is the answer "Say hello" must get (ci.sh asks the pool
// directly over NATS for it).
import assert from "node:assert/strict";
import OpenAI, { APIError, AuthenticationError, BadRequestError, RateLimitError } from "openai";

const baseURL = process.env.CODEXPOOL_GATEWAY_URL ?? "http://127.0.0.1:8080/v1";
const apiKey = process.env.CODEXPOOL_GATEWAY_KEY ?? "";
const expected = process.env.CODEXPOOL_EXPECT_ANSWER;
const model = "gpt-5.1-codex";

const client = new OpenAI({ baseURL, apiKey }); // the one changed line

try {
  const one = await client.responses.create({ model, input: "Say hello" });
  assert.equal(one.status, "completed");
  assert.ok(one.output_text.length > 0, "one-shot answer is empty");
  if (expected) assert.equal(one.output_text, expected, "the gateway's answer differs from the pool's");
  console.log(`create: ${JSON.stringify(one.output_text)} (x-request-id on every answer)`);

  const stream = await client.responses.create({ model, input: "Say hello", stream: true });
  let deltas = "";
  let completed = null;
  const types = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") deltas += ev.delta;
    if (ev.type === "response.completed") completed = ev.response;
  }
  assert.equal(types[0], "response.created");
  assert.ok(completed, "stream ended without response.completed");
  assert.equal(deltas, one.output_text, "the deltas do not add up to the answer");
  console.log(`stream: ${types.length} events, deltas joined = the answer`);

  await assert.rejects(new OpenAI({ baseURL, apiKey: "sk-wrong" }).responses.create({ model, input: "x" }), (err) => {
    assert.ok(err instanceof AuthenticationError, `want AuthenticationError, got ${err}`);
    assert.equal(err.status, 401);
    assert.equal(err.code, "invalid_api_key");
    return true;
  });
  console.log("wrong key: AuthenticationError (401)");

  await assert.rejects(client.responses.create({ model, input: "" }), (err) => {
    assert.ok(err instanceof BadRequestError, `want BadRequestError, got ${err}`);
    assert.equal(err.param, "input");
    assert.equal(err.code, "invalid_request");
    assert.match(err.message, /input/);
    return true;
  });
  console.log("empty input: BadRequestError with param \"input\"");

  // A usage limit resetting in 60 s: a RateLimitError at once, not retried (x-should-retry: false).
  const t0 = Date.now();
  await assert.rejects(
    client.responses.create({ model, input: "x", metadata: { sim_fault: "error:429" } }, { maxRetries: 3 }),
    (err) => {
      assert.ok(err instanceof RateLimitError, `want RateLimitError, got ${err}`);
      assert.equal(err.code, "upstream_rate_limited");
      assert.equal(err.headers.get("x-should-retry"), "false");
      assert.equal(err.headers.get("retry-after"), "60");
      return true;
    },
  );
  assert.ok(Date.now() - t0 < 5000, "the usage limit was retried");
  console.log("usage limit: RateLimitError, not retried");

  // The origin drops the socket after response.created: the events so far, then an APIError.
  const broken = await client.responses.create({ model, input: "x", stream: true, metadata: { sim_fault: "drop" } });
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const ev of broken) seen.push(ev.type);
    })(),
    (err) => {
      assert.ok(err instanceof APIError, `want APIError, got ${err}`);
      assert.equal(err.code, "upstream_error");
      return true;
    },
  );
  assert.equal(seen[0], "response.created");
  console.log("error mid-stream: APIError upstream_error after the events so far");
  console.log("openai-node example: all checks passed");
} catch (err) {
  console.error(`openai-node example failed: ${err.stack || err}`);
  process.exitCode = 1;
}
