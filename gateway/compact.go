package gateway

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codexpool/codexpool/schemas"
)

// POST /v1/responses/compact: the Responses compaction endpoint, which Codex CLIs before the
// streamed compaction called (docs/compaction.md). The pool has no such operation: the gateway
// asks for the compaction the way the Codex CLI 0.169 asks the origin itself, as a generation
// whose input ends with {"type":"compaction_trigger"}, answered with one "compaction" item, and
// replies with the compacted window as the endpoint returns it: the request's user messages
// (newest first, within a token budget) and the compaction item.

// compactFields are the request fields the endpoint takes: the ones the Codex CLI's compaction
// body has ever carried (model, input, instructions, tools, parallel_tool_calls, reasoning, text)
// and the Responses fields that mean the same in a generation. Any other is refused by name.
var compactFields = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "parallel_tool_calls": true,
	"reasoning": true, "text": true, "prompt_cache_key": true, "service_tier": true,
	"tool_choice": true, "include": true, "store": true,
}

// compactRetainedTokens is the budget, in approximate tokens (4 bytes each), of the user
// messages the reply keeps before the compaction item: the Codex CLI keeps 64 000 when it
// builds the window itself ("the current /responses/compact retained-message default").
const compactRetainedTokens = 64_000

// compactTrigger is the input item that asks the origin for a compaction.
var compactTrigger = json.RawMessage(`{"type":"compaction_trigger"}`)

// compactResponses serves POST /v1/responses/compact.
func (g *Gateway) compactResponses(w http.ResponseWriter, r *http.Request, id string) outcome {
	raw, a := g.readBody(w, r)
	if a != nil {
		a.write(w)
		return failed(a)
	}
	pb, input, a := compactRequest(raw)
	if a != nil {
		a.write(w)
		return failed(a)
	}
	ctx, hdr, done := g.poolCall(r, id)
	defer done()
	reply, err := g.generate(ctx, pb, hdr)
	if err != nil {
		a := g.poolError(ctx, err)
		a.write(w)
		return failed(a)
	}
	body, a := compactReply(input, reply.Response)
	if a != nil {
		a.write(w)
		return failed(a)
	}
	writeJSON(w, http.StatusOK, body)
	return ok(http.StatusOK)
}

// compactRequest reads a compaction request body: the generation the pool is asked for, and
// the input items it compacts. Top-level nulls count as absent.
func compactRequest(raw []byte) (poolBody, []json.RawMessage, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return poolBody{}, nil, newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "",
			"the request body must be a JSON object with \"input\" (the conversation to compact)")
	}
	for k, v := range fields {
		if bytes.Equal(v, []byte("null")) {
			delete(fields, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !compactFields[k] {
			return poolBody{}, nil, newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, k,
				strconv.Quote(k)+": not supported by the compaction endpoint of this pool; remove it")
		}
	}
	var pb poolBody
	if v, found := fields["model"]; found && json.Unmarshal(v, &pb.model) != nil {
		return poolBody{}, nil, fieldError("model", "must be a string")
	}
	if v, found := fields["prompt_cache_key"]; found && json.Unmarshal(v, &pb.cacheKey) != nil {
		return poolBody{}, nil, fieldError("prompt_cache_key", "must be a string")
	}
	if v, found := fields["instructions"]; found {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return poolBody{}, nil, fieldError("instructions", "must be a string")
		}
	}
	input, a := compactInput(fields["input"])
	if a != nil {
		return poolBody{}, nil, a
	}
	fields["input"] = marshalRaw(append(append([]json.RawMessage{}, input...), compactTrigger))
	delete(fields, "store") // the worker always sends false
	pb.body = marshalRaw(fields)
	return pb, input, nil
}

// compactInput is the request's input as items: a string is one user message.
func compactInput(v json.RawMessage) ([]json.RawMessage, *apiError) {
	if len(v) == 0 {
		return nil, fieldError("input", "is required: the conversation to compact, a string or an array of items")
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return nil, fieldError("input", "is empty: there is nothing to compact")
		}
		msg := marshalRaw(map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": s}}})
		return []json.RawMessage{msg}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return nil, fieldError("input", "must be a string or an array of items")
	}
	if len(items) == 0 {
		return nil, fieldError("input", "is empty: there is nothing to compact")
	}
	for i, it := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(it, &m) != nil || m == nil {
			return nil, fieldError("input["+strconv.Itoa(i)+"]", "must be an object (an input item)")
		}
	}
	return items, nil
}

func fieldError(field, what string) *apiError {
	return newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, field, strconv.Quote(field)+": "+what)
}

// compactResult is the endpoint's reply: the compacted window in output.
type compactResult struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Output    []json.RawMessage `json:"output"`
	Usage     json.RawMessage   `json:"usage,omitempty"`
}

// compactReply builds the reply from the request's input items and the pool's response: the
// user messages kept (compactRetained) and then the response's one compaction item. A response
// without exactly one is the origin failing the compaction: 502.
func compactReply(input []json.RawMessage, response []byte) ([]byte, *apiError) {
	var resp struct {
		ID        string            `json:"id"`
		CreatedAt int64             `json:"created_at"`
		Output    []json.RawMessage `json:"output"`
		Usage     json.RawMessage   `json:"usage"`
	}
	if err := json.Unmarshal(response, &resp); err != nil {
		return nil, newAPIError(http.StatusBadGateway, schemas.CodeUpstreamError, "", "gateway: the pool's response to the compaction is not a response object")
	}
	var compaction []json.RawMessage
	for _, it := range resp.Output {
		if itemType(it) == "compaction" {
			compaction = append(compaction, it)
		}
	}
	if len(compaction) != 1 {
		return nil, newAPIError(http.StatusBadGateway, schemas.CodeUpstreamError, "",
			"gateway: the origin answered the compaction with "+strconv.Itoa(len(compaction))+" compaction items, want exactly one")
	}
	out := compactResult{ID: resp.ID, Object: "response.compaction", CreatedAt: resp.CreatedAt,
		Output: append(compactRetained(input, compactRetainedTokens), compaction[0]), Usage: resp.Usage}
	if out.CreatedAt == 0 {
		out.CreatedAt = time.Now().Unix()
	}
	return marshalRaw(out), nil
}

// marshalRaw encodes v (of raw JSON values the client sent, which always encode) leaving its
// text as it came: no HTML escaping of <, > and &.
func marshalRaw(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// compactRetained returns the user messages of input, newest first while they fit in budget
// tokens (a message's text bytes / 4, at least 1), in their order. A message that does not fit
// ends the window: older ones are not kept either. Context the client writes itself as a user
// message, one tagged block such as <environment_context>...</environment_context>, is not
// kept: the Codex CLI drops it from a compacted window and sends it afresh.
func compactRetained(input []json.RawMessage, budget int) []json.RawMessage {
	var kept []json.RawMessage
	for i := len(input) - 1; i >= 0; i-- {
		var m struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(input[i], &m) != nil || (m.Type != "" && m.Type != "message") || m.Role != "user" {
			continue
		}
		text := contentText(m.Content)
		if taggedBlock(text) {
			continue
		}
		cost := max(1, len(text)/4)
		if cost > budget {
			break
		}
		budget -= cost
		kept = append(kept, input[i])
	}
	slices.Reverse(kept)
	return kept
}

// contentText is a message content's text: a string, or its parts' text joined.
func contentText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// taggedBlock reports whether text is one <name ...>...</name> block.
func taggedBlock(text string) bool {
	text = strings.TrimSpace(text)
	rest, ok := strings.CutPrefix(text, "<")
	if !ok {
		return false
	}
	end := strings.IndexAny(rest, " >")
	if end <= 0 {
		return false
	}
	return strings.HasSuffix(text, "</"+rest[:end]+">")
}

// itemType is an item's "type".
func itemType(item json.RawMessage) string {
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(item, &m)
	return m.Type
}
