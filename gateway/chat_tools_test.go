package gateway_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/codexpool/codexpool/schemas"
)

// replay is a pool generator that answers with a recorded event sequence of gateway/chat's
// testdata: the two parallel tool calls, or, once the request carries tool results, the text.
// It records the upstream frames it was sent.
type replay struct {
	frames chan []byte
}

func (g replay) Generate(_ context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	frame, err := r.Upstream("gpt-5.1-codex")
	if err != nil {
		return nil, err
	}
	g.frames <- frame
	name := "parallel_tools"
	if bytes.Contains(frame, []byte(`"function_call_output"`)) {
		name = "text"
	}
	b, err := os.ReadFile(filepath.Join("chat", "testdata", name+".events"))
	if err != nil {
		return nil, err
	}
	for _, ev := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if err := emit(ev); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func weatherTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time"}),
	}
}

// A tool loop through the pool with openai-go: the answer asks for two tools at once
// (finish_reason tool_calls, streamed and not), the client sends their results back, and they
// reach the pool as function_call and function_call_output items.
func TestChatToolRoundTrip(t *testing.T) {
	g := replay{frames: make(chan []byte, 8)}
	p := newPool(t, poolOptions{gen: g})
	c := sdk(t, p, key)
	ps := chatParams(openai.UserMessage("Weather and time in Paris?"))
	ps.Tools = weatherTools()

	resp, err := c.Chat.Completions.New(ctxT(t, waitTimeout), ps)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	checkCalls(t, resp.Choices[0].FinishReason, msg.ToolCalls)
	if up := <-g.frames; !bytes.Contains(up, []byte(`"tools":[{"type":"function","name":"get_weather"`)) {
		t.Errorf("upstream frame %s, want the function tools", up)
	}

	s := c.Chat.Completions.NewStreaming(ctxT(t, waitTimeout), ps)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	checkCalls(t, acc.Choices[0].FinishReason, acc.Choices[0].Message.ToolCalls)
	<-g.frames

	ps.Messages = append(ps.Messages, msg.ToParam(),
		openai.ToolMessage("sunny", msg.ToolCalls[0].ID), openai.ToolMessage("noon", msg.ToolCalls[1].ID))
	resp, err = c.Chat.Completions.New(ctxT(t, waitTimeout), ps)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; resp.Choices[0].FinishReason != "stop" || got != "Hello there <friend> & co" {
		t.Errorf("after the tool results: %q finish_reason %q, want the text and stop", got, resp.Choices[0].FinishReason)
	}
	up := <-g.frames
	for _, want := range []string{
		`{"type":"function_call","call_id":"call_a","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`,
		`{"type":"function_call","call_id":"call_b","name":"get_time","arguments":"{\"tz\":\"UTC\"}"}`,
		`{"type":"function_call_output","call_id":"call_a","output":"sunny"}`,
		`{"type":"function_call_output","call_id":"call_b","output":"noon"}`,
	} {
		if !strings.Contains(string(up), want) {
			t.Errorf("upstream frame %s\nlacks %s", up, want)
		}
	}
}

func checkCalls(t *testing.T, finish string, calls []openai.ChatCompletionMessageToolCallUnion) {
	t.Helper()
	if finish != "tool_calls" || len(calls) != 2 {
		t.Fatalf("finish_reason %q with %d tool calls, want tool_calls with 2", finish, len(calls))
	}
	want := [][3]string{{"call_a", "get_weather", `{"city":"Paris"}`}, {"call_b", "get_time", `{"tz":"UTC"}`}}
	for i, w := range want {
		got := [3]string{calls[i].ID, calls[i].Function.Name, calls[i].Function.Arguments}
		if got != w || calls[i].Type != "function" {
			t.Errorf("tool call %d: got %q type %q, want %q function", i, got, calls[i].Type, w)
		}
	}
}
