// The CI check of this example against a running worker: a one-shot answer, a stream that ends
// with the sentinel, and an error reply read from its headers and body. Exits 1 on any failure.
import assert from "node:assert/strict";
import { CodexpoolError, connectFromEnv, generate, outputText, stream } from "./codexpool.mjs";
import { submitJob, waitJob } from "./jobs.mjs";

const nc = await connectFromEnv();
try {
  const one = await generate(nc, { input: "Say hello", instructions: "Be brief." }, { requestId: "node-check-1" });
  assert.ok(outputText(one).length > 0, "one-shot answer is empty");
  console.log(`one-shot: ${JSON.stringify(outputText(one).slice(0, 60))}`);

  let deltas = "";
  let events = 0;
  const done = await stream(nc, { input: "Write a haiku about queues" }, (ev) => {
    events++;
    if (ev.type === "response.output_text.delta") deltas += ev.delta;
  });
  assert.ok(deltas.length > 0, "stream carried no text");
  assert.ok(done && done.status === "completed", "stream ended without response.completed");
  assert.equal(outputText(done), deltas, "the deltas do not add up to the completed response's text");
  console.log(`stream: ${events} events, ended with the sentinel`);

  await assert.rejects(generate(nc, { input: "" }), (err) => {
    assert.ok(err instanceof CodexpoolError, `want a CodexpoolError, got ${err}`);
    assert.equal(err.status, 400);
    assert.equal(err.code, "invalid_request");
    return true;
  });
  await assert.rejects(stream(nc, { input: 42 }, () => {}), (err) => err instanceof CodexpoolError && err.code === "invalid_request");
  console.log("errors: invalid_request read from the error headers and body (one-shot and stream)");
  // Durable jobs: a job stored with an id, its result watched in the KV bucket; the same id
  // submitted again is a duplicate (one generation, one result); a refused job stores its error.
  const id = `node-job-${Date.now()}`;
  const ack = await submitJob(nc, id, { input: "Say hello as a job" });
  assert.equal(ack.duplicate, false);
  const again = await submitJob(nc, id, { input: "Say hello as a job" });
  assert.equal(again.duplicate, true, "the second submission of one id is not a duplicate");
  const job = await waitJob(nc, id, { timeoutMs: 60_000 });
  assert.ok(outputText(job).length > 0, "job result has no text");
  console.log(`job: ${JSON.stringify(outputText(job).slice(0, 60))} (stored as ${id}, resubmission deduplicated)`);
  await assert.rejects(submitJob(nc, `${id}-bad`, { input: "" }).then(() => waitJob(nc, `${id}-bad`, { timeoutMs: 60_000 })),
    (err) => err instanceof CodexpoolError && err.code === "invalid_request");
  console.log("job errors: invalid_request stored as the result");
  console.log("node example: all checks passed");
} catch (err) {
  console.error(`node example failed: ${err.stack || err}`);
  process.exitCode = 1;
} finally {
  await nc.close();
}
