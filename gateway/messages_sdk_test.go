package gateway_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/codexpool/codexpool/worker/codextest"
)

// sdkModel is a Claude model name: the gateway maps it to the pool's default model.
const sdkModel anthropic.Model = "claude-sonnet-5-5"

// anthropicClient is the official Go SDK pointed at the pool's gateway with apiKey.
func anthropicClient(p *pool, apiKey string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(p.srv.URL), option.WithAPIKey(apiKey), option.WithMaxRetries(0))
}

// checkSDKMessage checks the simulator's answer: a signed thinking block (its reasoning item),
// then one text block of its words, ending end_turn.
func checkSDKMessage(t *testing.T, m *anthropic.Message) {
	t.Helper()
	if m.StopReason != anthropic.StopReasonEndTurn || len(m.Content) != 2 || m.Content[0].Type != "thinking" ||
		!strings.HasPrefix(m.Content[0].Signature, "codexpool:v1:") || len(strings.Fields(strings.TrimPrefix(m.Content[1].Text, codextest.AnswerPrefix))) != words {
		t.Errorf("got %s, want a signed thinking block and one text block of %d words ending end_turn", m.RawJSON(), words)
	}
}

// TestAnthropicSDK: anthropic-sdk-go creates, streams and counts tokens through the pool, and
// raises the gateway's 401 and 400 as *anthropic.Error with their statuses.
func TestAnthropicSDK(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := anthropicClient(p, key)
	params := anthropic.MessageNewParams{
		Model: sdkModel, MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
	t.Run("create", func(t *testing.T) {
		m, err := c.Messages.New(ctxT(t, waitTimeout), params)
		if err != nil {
			t.Fatal(err)
		}
		checkSDKMessage(t, m)
	})
	t.Run("stream", func(t *testing.T) {
		checkSDKMessage(t, streamMessage(t, c, params))
	})
	t.Run("count_tokens", func(t *testing.T) {
		before := p.sim.Stats().Responses
		n, err := c.Messages.CountTokens(ctxT(t, waitTimeout), anthropic.MessageCountTokensParams{
			Model: sdkModel, Messages: params.Messages,
		})
		if err != nil {
			t.Fatal(err)
		}
		if n.InputTokens <= 0 {
			t.Errorf("got %d input tokens, want > 0", n.InputTokens)
		}
		if d := p.sim.Stats().Responses - before; d != 0 {
			t.Errorf("got %d generations at the origin, want 0", d)
		}
	})
	t.Run("401", func(t *testing.T) {
		wrong := anthropicClient(p, "sk-wrong")
		_, err := wrong.Messages.New(ctxT(t, waitTimeout), params)
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized {
			t.Fatalf("got %v, want a 401 *anthropic.Error", err)
		}
	})
	t.Run("400", func(t *testing.T) {
		_, err := c.Messages.New(ctxT(t, waitTimeout), anthropic.MessageNewParams{Model: sdkModel, MaxTokens: 1})
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest {
			t.Fatalf("got %v, want a 400 *anthropic.Error", err)
		}
	})
}

// A tool loop with anthropic-sdk-go: the simulator asks for Bash (stop_reason tool_use, streamed
// and not), the client sends the assistant's content and a tool_result back, and the answer
// quotes the result.
func TestAnthropicSDKToolRoundTrip(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := anthropicClient(p, key)
	bash := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "Bash",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}}}}
	ask := anthropic.NewUserMessage(anthropic.NewTextBlock(`List it. [sim:tool name=Bash args={"command":"ls -1"}]`))
	params := anthropic.MessageNewParams{Model: sdkModel, MaxTokens: 1024, Tools: []anthropic.ToolUnionParam{bash},
		Messages: []anthropic.MessageParam{ask}}

	m, err := c.Messages.New(ctxT(t, waitTimeout), params)
	if err != nil {
		t.Fatal(err)
	}
	use := checkToolUse(t, m)
	checkToolUse(t, streamMessage(t, c, params))

	params.Messages = append(params.Messages, m.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "a.txt\nb.txt", false)))
	done, err := c.Messages.New(ctxT(t, waitTimeout), params)
	if err != nil {
		t.Fatal(err)
	}
	if done.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(done.RawJSON(), "Tool Bash returned: a.txt") {
		t.Errorf("got %s, want an end_turn answer quoting the tool's output", done.RawJSON())
	}
}

// checkToolUse checks m ends tool_use with one Bash call asking for `ls -1`, and returns it.
func checkToolUse(t *testing.T, m *anthropic.Message) anthropic.ToolUseBlock {
	t.Helper()
	for _, b := range m.Content {
		if use := b.AsToolUse(); b.Type == "tool_use" {
			if m.StopReason != anthropic.StopReasonToolUse || use.Name != "Bash" || string(use.Input) != `{"command":"ls -1"}` || use.ID == "" {
				t.Errorf("got %s, want stop_reason tool_use and a Bash call with {\"command\":\"ls -1\"}", m.RawJSON())
			}
			return use
		}
	}
	t.Fatalf("got %s, want a tool_use block", m.RawJSON())
	return anthropic.ToolUseBlock{}
}

// A usage limit resetting in 60 s is Anthropic's 429 rate_limit_error with retry-after and
// x-should-retry: false, and anthropic-sdk-go (which retries 429s by default) sends it once.
func TestAnthropicSDKUsageLimitNotRetried(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := anthropic.NewClient(option.WithBaseURL(p.srv.URL), option.WithAPIKey(key), option.WithMaxRetries(3))
	p.sim.Faults.Next(codextest.AtResponse, 1, "error:429")
	_, err := c.Messages.New(ctxT(t, waitTimeout), anthropic.MessageNewParams{Model: sdkModel, MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))}})
	var e *anthropic.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests || !strings.Contains(e.RawJSON(), `"rate_limit_error"`) {
		t.Fatalf("got %v, want a 429 rate_limit_error *anthropic.Error", err)
	}
	if h := e.Response.Header; h.Get("x-should-retry") != "false" || h.Get("retry-after") == "" {
		t.Errorf("headers x-should-retry %q retry-after %q, want false and a retry time", h.Get("x-should-retry"), h.Get("retry-after"))
	}
	if got := p.hits.Load(); got != 1 {
		t.Errorf("%d requests reached the gateway, want 1 (the SDK must not retry a long usage limit)", got)
	}
}

// streamMessage sends params with c as a stream and returns the message the SDK accumulates.
func streamMessage(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) *anthropic.Message {
	t.Helper()
	s := c.Messages.NewStreaming(ctxT(t, waitTimeout), params)
	var m anthropic.Message
	for s.Next() {
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return &m
}
