package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Request is a translated POST /v1/chat/completions body.
type Request struct {
	// Body is the pool's request: a Responses API create body, always "stream": true (the
	// gateway streams from the pool whatever the client asked).
	Body []byte
	// Model is the model the client named ("" for the pool's default); replies carry it.
	Model string
	// Stream is the client's "stream": true.
	Stream bool
	// IncludeUsage is the client's stream_options.include_usage.
	IncludeUsage bool
	// CacheKey is the body's prompt_cache_key.
	CacheKey string

	names wire.Names
}

// RequestError is a body Translate refuses: answered 400 invalid_request with Param as the
// OpenAI error's param.
type RequestError struct {
	Param   string // e.g. "messages[2].role"
	Message string
}

func (e *RequestError) Error() string { return "chat: " + e.Param + ": " + e.Message }

func refuse(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// chatRequest is the part of a Chat Completions body that is translated; the rest is dropped.
type chatRequest struct {
	Model             string          `json:"model"`
	Messages          []message       `json:"messages"`
	Tools             []tool          `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Stream            bool            `json:"stream"`
	StreamOptions     *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ReasoningEffort string          `json:"reasoning_effort"`
	Verbosity       string          `json:"verbosity"`
	ResponseFormat  json.RawMessage `json:"response_format"`
	PromptCacheKey  string          `json:"prompt_cache_key"`
	N               *int            `json:"n"`
	Stop            json.RawMessage `json:"stop"`
}

// Translate maps a Chat Completions request body to the pool's Responses request.
func Translate(body []byte) (*Request, error) {
	var cr chatRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, refuse("", "the body is not a Chat Completions request: %v", err)
	}
	if cr.N != nil && *cr.N != 1 {
		return nil, refuse("n", "must be 1: the pool answers with one choice")
	}
	if hasStop(cr.Stop) {
		return nil, refuse("stop", "stop sequences are not supported: the origin cannot stop at one, so the pool would answer past it; remove stop")
	}
	if len(cr.Messages) == 0 {
		return nil, refuse("messages", "must be a non-empty array of messages")
	}
	toolNames := make([]string, 0, len(cr.Tools))
	for _, t := range cr.Tools {
		toolNames = append(toolNames, t.Function.Name)
	}
	req := &Request{Model: cr.Model, Stream: cr.Stream, CacheKey: cr.PromptCacheKey, names: wire.NewNames(toolNames)}
	req.IncludeUsage = cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage
	pr := wire.Request{Model: cr.Model, ParallelToolCalls: cr.ParallelToolCalls, PromptCacheKey: cr.PromptCacheKey, Stream: true}
	var err error
	if pr.Instructions, pr.Input, err = input(req.names, cr.Messages); err != nil {
		return nil, err
	}
	if pr.Tools, err = tools(req.names, cr.Tools); err != nil {
		return nil, err
	}
	if pr.ToolChoice, err = toolChoice(req.names, cr.ToolChoice); err != nil {
		return nil, err
	}
	if cr.ReasoningEffort != "" {
		pr.Reasoning = &wire.Reasoning{Effort: cr.ReasoningEffort}
	}
	if pr.Text, err = text(cr.ResponseFormat, cr.Verbosity); err != nil {
		return nil, err
	}
	req.Body, err = wire.Marshal(pr)
	return req, err
}

// text maps response_format and verbosity to the Responses text options.
func text(format json.RawMessage, verbosity string) (*wire.TextOptions, error) {
	t := &wire.TextOptions{Verbosity: verbosity}
	if len(format) > 0 && !bytes.Equal(format, []byte("null")) {
		var f struct {
			Type       string          `json:"type"`
			JSONSchema json.RawMessage `json:"json_schema"`
		}
		if err := json.Unmarshal(format, &f); err != nil {
			return nil, refuse("response_format", "must be an object with a type")
		}
		switch f.Type {
		case "text":
		case "json_object":
			t.Format = json.RawMessage(`{"type":"json_object"}`)
		case "json_schema":
			var err error
			if t.Format, err = jsonSchemaFormat(f.JSONSchema); err != nil {
				return nil, err
			}
		default:
			return nil, refuse("response_format.type", "must be text, json_object or json_schema, not %q", f.Type)
		}
	}
	if t.Format == nil && t.Verbosity == "" {
		return nil, nil
	}
	return t, nil
}

// jsonSchemaFormat turns {name, description, schema, strict} into the Responses format object.
func jsonSchemaFormat(js json.RawMessage) (json.RawMessage, error) {
	var s struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Schema      json.RawMessage `json:"schema,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	if err := json.Unmarshal(js, &s); err != nil || s.Name == "" {
		return nil, refuse("response_format.json_schema", "must be an object with a name")
	}
	return wire.MustMarshal(struct {
		Type string          `json:"type"`
		Name string          `json:"name"`
		Desc string          `json:"description,omitempty"`
		Sch  json.RawMessage `json:"schema,omitempty"`
		Str  *bool           `json:"strict,omitempty"`
	}{"json_schema", s.Name, s.Description, s.Schema, s.Strict}), nil
}

// joinText joins the system and developer texts.
func joinText(parts []string) string { return strings.Join(parts, "\n\n") }

// hasStop reports whether stop names a sequence: null, "" and [] do not.
func hasStop(stop json.RawMessage) bool {
	var one string
	var many []string
	switch {
	case len(stop) == 0 || bytes.Equal(stop, []byte("null")):
		return false
	case json.Unmarshal(stop, &one) == nil:
		return one != ""
	case json.Unmarshal(stop, &many) == nil:
		return len(many) > 0
	}
	return true
}
