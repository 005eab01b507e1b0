// Durable jobs from Node.js: publish a request to codex.jobs.submit with a JetStream publish
// (the PubAck means it is stored; Nats-Msg-Id makes resubmitting it harmless), then watch its key
// in the results bucket. @nats-io/jetstream and @nats-io/kv; no SDK of ours.
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { headers } from "@nats-io/transport-node";
import { CodexpoolError } from "./codexpool.mjs";

export const JOBS_SUBJECT = (process.env.CODEXPOOL_JOBS_SUBJECT || "codex.jobs") + ".submit";
export const RESULTS_BUCKET = process.env.CODEXPOOL_RESULTS_BUCKET || "CODEXPOOL_RESULTS";

// submitJob stores body (a Responses API create body) as job id and resolves with its PubAck
// ({ seq, duplicate, ... }): duplicate is true when the stream already had that id.
export async function submitJob(nc, id, body, { replyTo } = {}) {
  const h = headers();
  if (replyTo) h.set("Codex-Reply-To", replyTo);
  return jetstream(nc).publish(JOBS_SUBJECT, JSON.stringify(body), { msgID: id, headers: h });
}

// resultOf decodes a stored result: the response object, or a thrown CodexpoolError for an error
// body ({"error": {...}} and nothing else).
function resultOf(entry) {
  const v = entry.json();
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0] === "error" && v.error) {
    throw new CodexpoolError(v.error.status, v.error.code, v.error.message, v.error.retry_after_ms);
  }
  return v;
}

// waitJob resolves with the job's result (the response object) as soon as it is stored, or
// rejects with its CodexpoolError, or with an Error after timeoutMs.
export async function waitJob(nc, id, { timeoutMs = 10 * 60_000 } = {}) {
  const kv = await new Kvm(nc).open(RESULTS_BUCKET);
  const now = await kv.get(id);
  if (now && now.operation === "PUT") return resultOf(now);
  const watch = await kv.watch({ key: id });
  const timer = setTimeout(() => watch.stop(), timeoutMs);
  try {
    for await (const e of watch) {
      if (e.operation === "PUT") return resultOf(e);
    }
  } finally {
    clearTimeout(timer);
    watch.stop();
  }
  throw new Error(`job ${id}: no result within ${timeoutMs} ms`);
}
