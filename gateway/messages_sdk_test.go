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
		checkSDKMessage(t, &m)
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
