// Package chat translates the OpenAI Chat Completions API to the pool's Responses API and back.
// It is pure: no NATS, no HTTP server; the gateway calls it around its pool request.
//
// Call [Translate] first, with a POST /v1/chat/completions body: it returns the [Request] whose
// Body goes to the pool (a Responses create body), or a *[RequestError] naming the field at
// fault, answered 400. Then feed every pool event to a [Stream] made with [NewStream]; each call
// returns the [Chunk]s to send, one "data: <chunk JSON>" line each, and once [Stream.Done]
// reports true the stream ends with "data: [DONE]". A non-streamed request folds the same chunks
// with a [Completion] into one chat.completion object.
//
// # Request mapping
//
// system and developer messages become instructions (joined by a blank line; "" when there are
// none); user content becomes input_text / input_image / input_file parts; assistant content an
// output_text message; each assistant tool call a function_call item and each tool message a
// function_call_output item. Function tools become Responses function tools with strict false
// unless the client set it (the Responses API defaults strict to true, Chat Completions to
// false). tool_choice (a named function or allowed_tools too), parallel_tool_calls,
// reasoning_effort (reasoning.effort), verbosity and response_format (text.format) are mapped;
// prompt_cache_key is kept. Every other field is
// dropped: temperature, top_p, max_tokens, max_completion_tokens, metadata, stream_options, user,
// stop, … — the Codex backend refuses or ignores them. An n other than 1 is refused: the pool
// answers with one choice.
//
// Call ids longer than 64 characters are shortened to their first 47 characters, "_" and 16 hex
// digits of their SHA-256; tool names longer than 64 characters to "mcp__<last part>" for MCP
// names, else their first 64 characters, with "_1", "_2", … on collisions. Streamed tool calls
// carry the original name again.
//
// # Event mapping
//
// The first chunk carries role "assistant"; text deltas become delta.content, refusal deltas
// delta.refusal; a function call becomes delta.tool_calls entries with its index, id, type and
// name first (held back until the origin names the call), its argument pieces after. Calls are
// matched on output_index, item id and call_id, whichever an event carries. The terminal event
// fills in what was not streamed, then a chunk with finish_reason: tool_calls when a call was
// sent, length on response.incomplete for max_output_tokens, content_filter for a content
// filter, else stop; with Options.IncludeUsage one more chunk with no choices and the usage.
// error and response.failed events produce nothing: the pool's error that follows them is what
// the client gets, in the OpenAI error shape.
package chat
