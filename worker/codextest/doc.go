// Package codextest is a local Codex origin: a WebSocket server that speaks the Codex / Responses
// WebSocket protocol (see the project's codex-protocol.md) for tests, benchmarks and `codexpool sim`.
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
//     sockets (503), a bearer-token check (401): [Options], [Server.SetUpgradeLimit];
//   - the next n upgrades rejected with any status: [Server.RejectNext];
//   - upgrade-level faults (never answer the upgrade, 101 then Close 1008, TCP close before the
//     101): [Server.InjectUpgradeFault];
//   - response-level faults for the next n responses server-wide ([Server.FaultNext]) or for one
//     request through its metadata: "sim_fault" (a [Fault], e.g. "failed", "error:429"),
//     "sim_latency_ms", "sim_ttft_ms" and "sim_words" (metadata values are strings);
//   - a maximum socket age that ends with the websocket_connection_limit_reached error event;
//   - dropping every socket: [Server.CloseClientConnections].
//
// Counters are read with [Server.Stats]. The same controls are served over HTTP under ControlURL
// (GET stats, POST reject, limit, fault, reset, close_clients), for `codexpool sim`.
//
// A socket serves one response at a time: a second response.create while one is in flight is
// answered with an error event (code conversation_already_has_active_response) and the first one
// carries on undisturbed.
package codextest
