// Package codextest is a local Codex origin: a server that speaks the Codex / Responses
// WebSocket protocol (JSON text frames: response.create in, the response.* event sequence out)
// and its HTTP streaming fallback (POST, server-sent events) for tests, benchmarks and
// `codexpool sim`.
//
// Call [NewServer] first, the way net/http/httptest is used: it listens on 127.0.0.1:0, is already
// serving, and its URL field is the address a client dials. Close it when done:
//
//	srv := codextest.NewServer(codextest.Options{Words: 5})
//	defer srv.Close()
//	// dial srv.URL, send {"type":"response.create","input":"hi"}, read events...
//
// Every response.create is answered with the full event sequence of a streamed response whose text
// is [Answer]([PromptOf](frame), words), so tests can compute the expected text. Beyond the happy
// path the server can hurt clients on purpose:
//
//   - an upgrade-rate limit (token bucket, 403 with a JSON body and Retry-After), a cap on open
//     sockets (503), a bearer-token check (401): [Options], [Limits.SetUpgradeRate];
//   - the next n upgrades (or HTTP streaming requests) rejected with any status:
//     [Faults.Reject];
//   - upgrade-level faults (never answer the upgrade, 101 then Close 1008, TCP close before the
//     101): [Faults.Next] AtUpgrade;
//   - response-level faults for the next n responses server-wide ([Faults.Next] AtResponse) or
//     for one request through its metadata: "sim_fault" (a [Fault], e.g. "failed", "error:429"),
//     "sim_latency_ms", "sim_ttft_ms" and "sim_words" (metadata values are strings);
//   - a maximum socket age that ends with the websocket_connection_limit_reached error event;
//   - dropping every socket and HTTP stream: [Server.CloseClientConnections];
//   - WebSockets switched off (426 on every upgrade, as an origin without them): Options.WSOff,
//     [Limits.SetWSOff].
//
// Beyond text, answers speak more of the real origin:
//
//   - tool calls: each directive `[sim:tool name=NAME args={JSON}]` in the text of the last user
//     message (or, without one, each of Options.ToolCalls) becomes a function_call output item
//     (call_id, name, arguments streamed as response.function_call_arguments.delta/done) — several
//     are parallel calls; the name must be declared in the request's tools, else the answer is
//     text saying so. Input that sends function_call_output items back (each after its function_call;
//     an unknown call_id is a 400), with no assistant message and no user message with a
//     directive after them, is answered with the text "Tool NAME returned: OUTPUT", a line per
//     output;
//   - web search: a request that declares the web_search tool (or web_search_preview) and whose
//     last user message has the word "search" in it (any case) is answered with a web_search_call
//     item (added, response.web_search_call.in_progress/searching/completed, done with action
//     {type:"search", query}) and a message citing [SearchResults] as url_citation annotations;
//     the query is the text after the last "query:", else the whole message (websearch.go).
//     Stats.WebSearches counts them, [Server.WebSearchTools] lists the tools declared;
//   - reasoning: with include ["reasoning.encrypted_content"] the answer starts with a reasoning
//     item (its summary streamed, an opaque encrypted_content, output_tokens_details.
//     reasoning_tokens); reasoning items sent back must carry content the server issued (else 400);
//   - a prompt cache per account (Options.NoPromptCache switches it off): the longest
//     previously seen prefix, in whole 256-byte blocks, of a request's instructions, tools and
//     input is its share of input_tokens reported as input_tokens_details.cached_tokens;
//   - connection-local continuation: each socket remembers its responses, and a
//     previous_response_id made on the same socket continues that conversation (the answer and
//     the prompt cache see all of it); any other id, and any over HTTP streaming, is answered
//     400 previous_response_not_found. [Server.Turns] lists the frames received (socket, bytes);
//   - an overloaded origin inside a 200 stream: faults "overloaded" (an error event with code
//     server_is_overloaded) and "overloaded_failed" (response.failed with that code);
//   - a context overflow: faults "context_length" (response.failed with code
//     context_length_exceeded) and "context_length_error" (that code in a 400 error event).
//
// The Server is a shell, as httptest.Server is; each kind of harm has its own field and type:
// Server.Faults ([Faults]: what the next requests suffer), Server.Limits ([Limits]: what gets
// through), Server.Accounts ([Accounts]) and Server.Logins ([Logins]).
//
// HTTP streaming: a POST of the response.create body (without "type", with "stream": true or
// Accept: text/event-stream) to HTTPURL is answered with server-sent events, "event: <type>" and
// "data: <the event JSON a socket would carry>", on the same schedule, with the same Answer,
// metadata and queued response faults (faults only a socket can show become a dropped connection).
//
// Accounts ([Options].Accounts, [Account], [LoadAccounts] for files) make the server a
// multi-account origin: each request is served as the account whose token it carries (401
// otherwise), each account has its own upgrade bucket and usage windows ([Window]: a budget of
// completed responses per period), reported the way the real origin does, keyed by window
// length: x-codex-primary-* / x-codex-secondary-* headers on the 101 and on HTTP responses, a
// codex.rate_limits event before each response, and usage_limit_reached (an error event, or HTTP
// 429 with Retry-After) once a window is spent. [Accounts.SetUsage] fills a window;
// [Accounts.Stats] reads an account's counters.
//
// Logins: [Logins.Issue] issues ChatGPT-style credentials ([Login], [Login.AuthJSON] for a
// Codex CLI auth.json) whose access tokens are JWTs expiring after Options.TokenLifetime (then
// 401 token_expired; sockets already open carry on). RefreshURL (POST /oauth/token) rotates them:
// every refresh token is single-use, and reusing one answers refresh_token_reused and revokes its
// whole family. [Faults.Refresh] makes the endpoint slow, failing, garbled or buggy.
//
// Counters are read with [Server.Stats] (InputTokens, CachedTokens and ToolCalls sum the usage
// and function calls of the responses started, per account too); [Server.WaitAborts] waits for clients that gave up
// mid-response. The same controls are served over HTTP under ControlURL (GET stats, accounts,
// login, turns; POST reject, limit, fault, refresh_fault, usage, ws, reset, close_clients), for
// `codexpool sim`.
//
// A socket serves one response at a time: a second response.create while one is in flight is
// answered with an error event (code conversation_already_has_active_response) and the first one
// carries on undisturbed.
package codextest
