package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The openai-go SDK's chat.completions, unchanged, against a real pool through the gateway.

func chatParams(msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-5.1-codex", Messages: msgs}
}

func TestChatSDKCreate(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key)
	ps := chatParams(openai.SystemMessage("Be brief."), openai.UserMessage("Say hello"))
	ps.Temperature = openai.Float(0.2) // dropped on the way: the Codex backend refuses it
	ps.MaxCompletionTokens = openai.Int(100)
	resp, err := c.Chat.Completions.New(ctxT(t, waitTimeout), ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("%d choices, want 1", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if got, want := ch.Message.Content, codextest.Answer("Say hello", words); got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if ch.FinishReason != "stop" || ch.Message.Role != "assistant" || resp.Object != "chat.completion" || resp.Model != "gpt-5.1-codex" {
		t.Errorf("finish_reason %q role %q object %q model %q, want stop assistant chat.completion gpt-5.1-codex",
			ch.FinishReason, ch.Message.Role, resp.Object, resp.Model)
	}
	if resp.Usage.CompletionTokens != words || resp.Usage.PromptTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+words {
		t.Errorf("usage %+v, want %d completion tokens, some prompt tokens and their sum", resp.Usage, words)
	}
	if !strings.HasPrefix(resp.ID, "chatcmpl-gw-") {
		t.Errorf("id %q, want chatcmpl-gw-…", resp.ID)
	}
}

func TestChatSDKStreamUsage(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key)
	ps := chatParams(openai.UserMessage("Say hello"))
	ps.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctxT(t, waitTimeout), ps)
	var acc openai.ChatCompletionAccumulator
	var chunks int
	var role string
	for s.Next() {
		ch := s.Current()
		if chunks == 0 && len(ch.Choices) == 1 {
			role = ch.Choices[0].Delta.Role
		}
		chunks++
		acc.AddChunk(ch)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if role != "assistant" {
		t.Errorf("first chunk's role %q, want assistant", role)
	}
	if chunks < words+3 {
		t.Errorf("%d chunks, want at least %d (role, one per word, finish, usage)", chunks, words+3)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("accumulated %d choices, want 1", len(acc.Choices))
	}
	if got, want := acc.Choices[0].Message.Content, codextest.Answer("Say hello", words); got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if acc.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason %q, want stop", acc.Choices[0].FinishReason)
	}
	if acc.Usage.CompletionTokens != words || acc.Usage.TotalTokens == 0 {
		t.Errorf("usage %+v, want %d completion tokens and a total", acc.Usage, words)
	}
}

// A conversation with a tool round trip in its history (assistant tool_calls, tool results)
// goes to the pool as function_call and function_call_output items, with the tools defined.
func TestChatToolHistory(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key)
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	ps := chatParams(
		openai.UserMessage("What is the weather in Paris?"),
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
		openai.ToolMessage("sunny, 21 C", "call_1"),
	)
	ps.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	ps.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	resp, err := c.Chat.Completions.New(ctxT(t, waitTimeout), ps)
	if err != nil {
		t.Fatal(err)
	}
	// The simulator answers a tool result by quoting it: the result reached the origin as the
	// function_call_output of call_1.
	if got, want := resp.Choices[0].Message.Content, "Tool get_weather returned: sunny, 21 C"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
}

func TestChatIncomplete(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-shot", true: "stream"}[stream], func(t *testing.T) {
			p := newPool(t, poolOptions{})
			p.sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultIncomplete)
			c := sdk(t, p, key, option.WithMaxRetries(0))
			ps := chatParams(openai.UserMessage("Say hello"))
			var content, finish string
			if stream {
				s := c.Chat.Completions.NewStreaming(ctxT(t, waitTimeout), ps)
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				content, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
			} else {
				resp, err := c.Chat.Completions.New(ctxT(t, waitTimeout), ps)
				if err != nil {
					t.Fatal(err)
				}
				content, finish = resp.Choices[0].Message.Content, resp.Choices[0].FinishReason
			}
			if want := codextest.Answer("Say hello", words); content != want || finish != "length" {
				t.Errorf("content %q finish_reason %q, want %q length", content, finish, want)
			}
		})
	}
}

func TestChatSDKWrongKey(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, "sk-wrong")
	_, err := c.Chat.Completions.New(ctxT(t, waitTimeout), chatParams(openai.UserMessage("Say hello")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want an *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusUnauthorized || apiErr.Type != "authentication_error" || apiErr.Code != "invalid_api_key" {
		t.Errorf("got %d %s %s, want 401 authentication_error invalid_api_key", apiErr.StatusCode, apiErr.Type, apiErr.Code)
	}
}

func TestChatSDKBadRequest(t *testing.T) {
	tests := []struct {
		name   string
		params openai.ChatCompletionNewParams
		param  string
	}{
		{"only a system message", chatParams(openai.SystemMessage("Be brief.")), "messages"},
		{"a tool result without its call", chatParams(openai.UserMessage("x"), openai.ToolMessage("out", "")), "messages[1].tool_call_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, poolOptions{})
			c := sdk(t, p, key)
			_, err := c.Chat.Completions.New(ctxT(t, waitTimeout), tt.params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v, want an *openai.Error", err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" ||
				apiErr.Code != "invalid_request" || apiErr.Param != tt.param {
				t.Errorf("got %d %s %s param %q, want 400 invalid_request_error invalid_request param %q",
					apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, tt.param)
			}
			if got := p.hits.Load(); got != 1 {
				t.Errorf("%d requests reached the gateway, want 1 (a 400 is not retried)", got)
			}
		})
	}
}

// A usage limit before the stream began is a real 429, not a stream that fails.
func TestChatStreamRateLimited(t *testing.T) {
	p := newPool(t, poolOptions{})
	p.sim.Faults.Next(codextest.AtResponse, 1, codextest.Fault("error:429"))
	c := sdk(t, p, key, option.WithMaxRetries(3))
	s := c.Chat.Completions.NewStreaming(ctxT(t, waitTimeout), chatParams(openai.UserMessage("Say hello")))
	for s.Next() {
		t.Errorf("got a chunk %+v, want none", s.Current())
	}
	var apiErr *openai.Error
	if err := s.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "rate_limit_error" {
		t.Fatalf("got %v, want a 429 rate_limit_error", err)
	}
	if got := p.hits.Load(); got != 1 {
		t.Errorf("%d requests reached the gateway, want 1 (x-should-retry: false)", got)
	}
}

// An origin that fails after the stream began: the SDK gets the chunks so far, then the error
// line, which it raises. (A failure right after response.created is a status: see
// TestChatStreamFailsBeforeContent.)
func TestChatStreamErrorAfterStart(t *testing.T) {
	p := newPool(t, poolOptions{gen: genFunc(func(_ context.Context, _ *schemas.Request, emit func([]byte) error) ([]byte, error) {
		for _, ev := range []string{
			`{"type":"response.created","response":{"id":"resp_1","status":"in_progress","model":"gpt-5.1-codex","output":[]}}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}`,
		} {
			if err := emit([]byte(ev)); err != nil {
				return nil, err
			}
		}
		return nil, &schemas.Error{Status: http.StatusBadGateway, Code: schemas.CodeUpstreamError, Message: "codex: the origin closed the socket"}
	})})
	c := sdk(t, p, key, option.WithMaxRetries(0))
	s := c.Chat.Completions.NewStreaming(ctxT(t, waitTimeout), chatParams(openai.UserMessage("Say hello")))
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "upstream_error") {
		t.Fatalf("got error %v, want one naming upstream_error", err)
	}
	if text.String() != "Hello" {
		t.Errorf("text before the error %q, want %q", text.String(), "Hello")
	}
}

// An origin that drops the socket right after response.created, before any content: the
// stream's first chunk was held, so the client gets a 502 status, not a 200 stream that fails.
func TestChatStreamFailsBeforeContent(t *testing.T) {
	p := newPool(t, poolOptions{})
	p.sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultDrop)
	body := `{"model":"gpt-5.1-codex","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	resp := post(t, p, "/v1/chat/completions", body, nil)
	raw := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(raw), `"code":"upstream_error"`) {
		t.Errorf("got %d %s, want 502 upstream_error", resp.StatusCode, raw)
	}
}

// The wire of a stream: text/event-stream, "data: " lines only, the last one "data: [DONE]".
func TestChatStreamWire(t *testing.T) {
	p := newPool(t, poolOptions{})
	body := `{"model":"gpt-5.1-codex","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.url+"chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content-type %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			t.Errorf("line %q, want only data lines", line)
		}
	}
	if len(data) < 2 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"finish_reason":"stop"`) {
		t.Errorf("data lines %q, want the finish chunk and [DONE] last", data)
	}
	for _, d := range data[:len(data)-1] {
		if strings.Contains(d, `"usage"`) {
			t.Errorf("chunk %s carries usage, want none without include_usage", d)
		}
	}
}

func TestChatMethod(t *testing.T) {
	p := newPool(t, poolOptions{})
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodGet, p.url+"chat/completions", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("status %d Allow %q, want 405 POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// A conversation over the origin's context window is OpenAI's 400 context_length_exceeded on
// this path, so chat clients trim their history instead of retrying.
func TestChatContextLength(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-shot", true: "stream"}[stream], func(t *testing.T) {
			p := newPool(t, poolOptions{gen: genFunc(func(context.Context, *schemas.Request, func([]byte) error) ([]byte, error) {
				return nil, &schemas.Error{Status: http.StatusBadRequest, Code: schemas.CodeUpstreamError, UpstreamCode: "context_length_exceeded",
					Message: "codex: origin error: Your input exceeds the context window of this model."}
			})})
			c := sdk(t, p, key, option.WithMaxRetries(2))
			ps := chatParams(openai.UserMessage("a very long conversation"))
			var err error
			if stream {
				s := c.Chat.Completions.NewStreaming(ctxT(t, waitTimeout), ps)
				for s.Next() {
					t.Errorf("got a chunk %+v, want none", s.Current())
				}
				err = s.Err()
			} else {
				_, err = c.Chat.Completions.New(ctxT(t, waitTimeout), ps)
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v, want an *openai.Error", err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" ||
				apiErr.Code != "context_length_exceeded" || apiErr.Param != "messages" || !strings.Contains(apiErr.Message, "context window") {
				t.Errorf("got %d %s %s param %q message %q, want 400 invalid_request_error context_length_exceeded messages with the origin's message",
					apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, apiErr.Message)
			}
			if got := p.hits.Load(); got != 1 {
				t.Errorf("%d requests reached the gateway, want 1", got)
			}
		})
	}
}
