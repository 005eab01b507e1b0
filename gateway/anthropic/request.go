package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Options are what a translation needs besides the body. The zero value maps every model to the
// pool's default and derives no prompt_cache_key.
type Options struct {
	// Models maps the client's model name to the pool's (see ModelMap.Resolve).
	Models ModelMap
	// Served are the model names the pool serves as they are.
	Served []string
	// SessionID is the X-Claude-Code-Session-Id header; AgentID X-Claude-Code-Agent-Id ("main"
	// when empty). They make the request's stable prompt_cache_key.
	SessionID, AgentID string
}

// Translated is a /v1/messages request in the pool's terms.
type Translated struct {
	// Body is the Responses create body for the pool, always "stream": true.
	Body []byte
	// Stream is the client's "stream".
	Stream bool
	// Model is the model name the client asked for; replies carry it.
	Model string
	// PoolModel is the model the body asks the pool for (Options.Models); CacheKey its
	// prompt_cache_key.
	PoolModel, CacheKey string
	// Names maps a shortened tool name back to the client's.
	Names wire.Names
}

// messagesRequest is the part of a /v1/messages body the translation reads. Fields the Codex
// backend refuses (metadata, temperature, top_p, top_k, max_tokens) are read
// only where they say something else (metadata.user_id) and never forwarded.
type messagesRequest struct {
	Model        string          `json:"model"`
	System       json.RawMessage `json:"system"`
	Messages     []message       `json:"messages"`
	Tools        []tool          `json:"tools"`
	ToolChoice   *toolChoice     `json:"tool_choice"`
	Thinking     *thinking       `json:"thinking"`
	OutputConfig *outputConfig   `json:"output_config"`
	// OutputFormat is the structured-outputs beta's name for output_config.format.
	OutputFormat  *outputFormat `json:"output_format"`
	StopSequences []string      `json:"stop_sequences"`
	Stream        bool          `json:"stream"`
	ServiceTier   string        `json:"service_tier"`
	Speed         string        `json:"speed"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type outputConfig struct {
	Effort string        `json:"effort"`
	Format *outputFormat `json:"format"`
}

// outputFormat asks for structured output: json_schema with its schema, or json_object.
type outputFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// Translate maps a /v1/messages body to the pool's Responses create body.
func Translate(body []byte, opts Options) (Translated, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Translated{}, badRequest("the request body is not a valid Messages request: " + err.Error())
	}
	if len(req.Messages) == 0 {
		return Translated{}, badRequest("messages: at least one message is required")
	}
	if len(req.StopSequences) > 0 {
		return Translated{}, badRequest("stop_sequences: not supported: the origin cannot stop at a sequence, so the pool would answer past it; remove stop_sequences")
	}
	toolNames := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		toolNames = append(toolNames, t.Name)
	}
	names := wire.NewNames(toolNames)
	input, err := inputItems(req.Messages, names)
	if err != nil {
		return Translated{}, err
	}
	parallel := req.ToolChoice == nil || !req.ToolChoice.DisableParallelToolUse
	out := wire.Request{
		Model:             opts.Models.Resolve(req.Model, opts.Served),
		Instructions:      systemText(req.System),
		Input:             input,
		Tools:             mapTools(req.Tools, names),
		ToolChoice:        mapToolChoice(req.ToolChoice, req.Tools, names),
		ParallelToolCalls: &parallel,
		Reasoning:         capForCompaction(mapReasoning(req.Thinking, req.OutputConfig), body),
		Text:              textFormat(req.format()),
		Include:           []string{"reasoning.encrypted_content"},
		ServiceTier:       serviceTier(req.ServiceTier, req.Speed),
		PromptCacheKey:    cacheKey(opts, req.metadataUserID()),
		Stream:            true, // the gateway streams from the pool, whatever the client asked
	}
	b, err := wire.Marshal(out)
	if err != nil {
		return Translated{}, badRequest("the request cannot be translated: " + err.Error())
	}
	return Translated{Body: b, Stream: req.Stream, Model: req.Model, PoolModel: out.Model, CacheKey: out.PromptCacheKey, Names: names}, nil
}

// format is the structured output asked for: output_config.format, else output_format.
func (r *messagesRequest) format() *outputFormat {
	if r.OutputConfig != nil && r.OutputConfig.Format != nil {
		return r.OutputConfig.Format
	}
	return r.OutputFormat
}

func (r *messagesRequest) metadataUserID() string {
	if r.Metadata == nil {
		return ""
	}
	return r.Metadata.UserID
}

// serviceTier maps speed "fast", or a service_tier of fast or priority, to the priority tier.
func serviceTier(tier, speed string) string {
	if speed == "fast" || tier == "fast" || tier == "priority" {
		return "priority"
	}
	return ""
}

// systemText joins the system prompt's text blocks with blank lines, without Claude Code's
// billing attribution line (it varies per request and would break the prompt cache).
func systemText(raw json.RawMessage) string {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type != "text" || strings.HasPrefix(b.Text, "x-anthropic-billing-header:") {
			continue
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n\n")
}

// cacheKey is a stable prompt_cache_key per conversation: a digest of the Claude Code session
// and agent, or of the session named in metadata.user_id; "" without either.
func cacheKey(opts Options, userID string) string {
	session := opts.SessionID
	if session == "" {
		session = sessionFromUserID(userID)
	}
	if session == "" {
		return ""
	}
	agent := opts.AgentID
	if agent == "" {
		agent = "main"
	}
	sum := sha256.Sum256([]byte("codexpool-anthropic\x00" + session + "\x00" + agent))
	return "cc-" + hex.EncodeToString(sum[:16])
}

// sessionFromUserID reads the session from metadata.user_id: JSON with "session_id", or a
// "..._session_<id>" suffix.
func sessionFromUserID(u string) string {
	var j struct {
		SessionID string `json:"session_id"`
	}
	if strings.HasPrefix(u, "{") && json.Unmarshal([]byte(u), &j) == nil {
		return j.SessionID
	}
	if i := strings.LastIndex(u, "_session_"); i >= 0 {
		return u[i+len("_session_"):]
	}
	return ""
}
