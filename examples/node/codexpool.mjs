// A small codexpool client for Node.js on plain NATS request-reply (@nats-io/transport-node).
// No SDK of ours: this file is the whole of it, to copy or to read.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { connect, credsAuthenticator, headers, errors } from "@nats-io/transport-node";

export const SUBJECT = process.env.CODEXPOOL_SUBJECT || "codex.generate";

// CodexpoolError is an error reply: the Nats-Service-Error-Code header and the JSON error body
// {"error": {"code", "message", "status", "retry_after_ms"?}}.
export class CodexpoolError extends Error {
  constructor(status, code, message, retryAfterMs) {
    super(`${status} ${code}: ${message}`);
    this.name = "CodexpoolError";
    this.status = status; // 400, 413, 429, 502, 503, 504, ...
    this.code = code; // invalid_request, worker_busy, upstream_error, unavailable, ...
    this.retryAfterMs = retryAfterMs; // set when the worker knows when to retry
  }
}

// errorOf returns a CodexpoolError when msg is an error reply, else null. The header says that
// it is one; the body carries the contract's code (the header's value is the HTTP-like status).
function errorOf(msg) {
  const status = msg.headers?.get("Nats-Service-Error-Code");
  if (!status) return null;
  try {
    const e = msg.json().error;
    return new CodexpoolError(e.status ?? Number(status), e.code, e.message, e.retry_after_ms);
  } catch {
    return new CodexpoolError(Number(status), "unknown", msg.headers.get("Nats-Service-Error") || msg.string());
  }
}

function noResponders(err) {
  return err instanceof errors.NoRespondersError || err?.cause instanceof errors.NoRespondersError;
}

function failed(err) {
  if (noResponders(err)) return new Error("no codexpool worker is serving " + SUBJECT);
  return err;
}

// connectFromEnv connects with the same CODEXPOOL_NATS_* settings a worker reads.
export async function connectFromEnv() {
  const env = process.env;
  const opts = { servers: (env.CODEXPOOL_NATS_URL || "nats://127.0.0.1:4222").split(","), name: "codexpool node example" };
  if (env.CODEXPOOL_NATS_CREDS) opts.authenticator = credsAuthenticator(readFileSync(env.CODEXPOOL_NATS_CREDS));
  if (env.CODEXPOOL_NATS_USER) Object.assign(opts, { user: env.CODEXPOOL_NATS_USER, pass: env.CODEXPOOL_NATS_PASSWORD });
  if (env.CODEXPOOL_NATS_TOKEN) opts.token = env.CODEXPOOL_NATS_TOKEN;
  if (!opts.authenticator && !opts.user && !opts.token) Object.assign(opts, localAuth(opts.servers));
  if (env.CODEXPOOL_NATS_TLS_CA || env.CODEXPOOL_NATS_TLS_CERT) {
    opts.tls = { caFile: env.CODEXPOOL_NATS_TLS_CA, certFile: env.CODEXPOOL_NATS_TLS_CERT, keyFile: env.CODEXPOOL_NATS_TLS_KEY };
  }
  return connect(opts);
}

// localAuth is the credential of a local embedded server (`codexpool worker` with no NATS URL): user
// "codexpool" and the password in $XDG_STATE_HOME/codexpool/nats-password (~/.local/state/...),
// offered only to servers on this machine's loopback.
function localAuth(servers) {
  const loopback = (s) => /^(nats:\/\/)?(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?$/.test(s.trim());
  if (!servers.every(loopback)) return {};
  const state = process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  try {
    return { user: "codexpool", pass: readFileSync(join(state, "codexpool", "nats-password"), "utf8").trim() };
  } catch {
    return {};
  }
}

function requestHeaders(timeoutMs, requestId) {
  const h = headers();
  h.set("Codex-Timeout", `${Math.ceil(timeoutMs / 1000)}s`); // the worker gives up when we do
  if (requestId) h.set("Codex-Request-Id", requestId);
  return h;
}

// generate sends a one-shot request (a Responses API create body) and returns the response
// object, whose output_text is the answer. It throws CodexpoolError on an error reply.
export async function generate(nc, body, { timeoutMs = 120_000, requestId } = {}) {
  let msg;
  try {
    msg = await nc.request(SUBJECT, JSON.stringify({ ...body, stream: false }), {
      timeout: timeoutMs,
      headers: requestHeaders(timeoutMs, requestId),
    });
  } catch (err) {
    throw failed(err);
  }
  const e = errorOf(msg);
  if (e) throw e;
  return msg.json();
}

// stream sends a streaming request and calls onEvent with every upstream event (parsed JSON)
// in order. It resolves with the response object of response.completed once the empty sentinel
// message has arrived, and throws CodexpoolError when the stream carries an error message, or
// an Error when the stream ended without the sentinel (timed out).
export async function stream(nc, body, onEvent, { timeoutMs = 120_000, requestId } = {}) {
  let it;
  try {
    it = await nc.requestMany(SUBJECT, JSON.stringify({ ...body, stream: true }), {
      strategy: "sentinel",
      maxWait: timeoutMs,
      headers: requestHeaders(timeoutMs, requestId),
    });
  } catch (err) {
    throw failed(err);
  }
  let response = null;
  let error = null;
  try {
    for await (const msg of it) {
      if (msg.data.length === 0) {
        // The sentinel: the stream is complete. An error message, if any, came just before it.
        if (error) throw error;
        return response;
      }
      const e = errorOf(msg);
      if (e) {
        error = e;
        continue;
      }
      const ev = msg.json();
      if (ev.type === "response.completed") response = ev.response;
      await onEvent(ev);
    }
  } catch (err) {
    throw failed(err);
  }
  throw error ?? new Error(`stream ended without the end-of-stream sentinel after ${timeoutMs} ms`);
}

// outputText is the concatenated text of a response's output_text parts (the worker adds
// output_text to one-shot replies; streamed ones carry the response as the origin sent it).
export function outputText(response) {
  if (typeof response?.output_text === "string") return response.output_text;
  return (response?.output ?? [])
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content ?? [])
    .filter((part) => part.type === "output_text")
    .map((part) => part.text)
    .join("");
}
