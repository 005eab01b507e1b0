// Package anthropic translates the Anthropic Messages API to the pool's OpenAI Responses API and
// back. It is pure: no NATS, no HTTP server; the gateway calls it around its pool request.
//
// Call order for one POST /v1/messages:
//
//  1. [Translate] the body with [Options] (model map, session): a Responses create body for the
//     pool and the tool-name map for the way back. A bad request is a *[Error] with status 400.
//  2. Streamed (Translated.Stream): feed every pool event to a [Stream] made by [NewStream] and
//     write the [Frame]s it returns as SSE; [Stream.Done] reports the end. Not streamed: [Message]
//     turns the completed response object into one Anthropic message.
//  3. Errors: [FromStatus] makes the Anthropic error; [Error.Body] and [Error.Frame] are its JSON
//     and its mid-stream SSE frame.
//
// [CountTokens] counts a translated body's input locally with the o200k encoding, for
// POST /v1/messages/count_tokens: no generation.
//
// The rules are design/clients.md §1–5. A thinking block's signature is the reasoning item's id
// and encrypted content ([signaturePrefix]); signatures in other formats (a real Anthropic one
// left from a model switch) are dropped on the way in, as are redacted_thinking blocks. The web
// search server tool maps to the Responses web_search tool, and each search of the answer to a
// server_tool_use and a web_search_tool_result block (websearch.go, docs/web-search.md).
package anthropic
