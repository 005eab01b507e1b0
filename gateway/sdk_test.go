package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The official Go SDK (github.com/openai/openai-go/v3), unchanged, against a real pool: only its
// base URL and key point at the gateway.

func sdk(t *testing.T, p *pool, apiKey string, opts ...option.RequestOption) openai.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(p.url), option.WithAPIKey(apiKey),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	}, opts...)...)
}

func params(prompt string, metadata map[string]string) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model: "gpt-5.1-codex",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
	}
	if metadata != nil {
		p.Metadata = shared.Metadata(metadata)
	}
	return p
}

func TestSDKCreate(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key)
	resp, err := c.Responses.New(ctxT(t, waitTimeout), params("Say hello", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.OutputText(), codextest.Answer("Say hello", words); got != want {
		t.Errorf("output text %q, want %q", got, want)
	}
	if resp.Status != "completed" {
		t.Errorf("status %q, want completed", resp.Status)
	}
}

func TestSDKStream(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key)
	stream := c.Responses.NewStreaming(ctxT(t, waitTimeout), params("Say hello", nil))
	var deltas strings.Builder
	var types []string
	completed := false
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			completed = true
			if got, want := ev.Response.OutputText(), codextest.Answer("Say hello", words); got != want {
				t.Errorf("completed response text %q, want %q", got, want)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v (events %v)", err, types)
	}
	if got, want := deltas.String(), codextest.Answer("Say hello", words); got != want {
		t.Errorf("deltas joined %q, want %q", got, want)
	}
	if !completed || types[0] != "response.created" {
		t.Errorf("events %v, want response.created first and response.completed", types)
	}
}

func TestSDKWrongKey(t *testing.T) {
	p := newPool(t, poolOptions{})
	for _, k := range []string{"sk-wrong", ""} {
		c := sdk(t, p, k)
		_, err := c.Responses.New(ctxT(t, waitTimeout), params("Say hello", nil))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("key %q: got %v, want an *openai.Error", k, err)
		}
		if apiErr.StatusCode != http.StatusUnauthorized || apiErr.Type != "authentication_error" || apiErr.Code != "invalid_api_key" {
			t.Errorf("key %q: got %d %s %s, want 401 authentication_error invalid_api_key", k, apiErr.StatusCode, apiErr.Type, apiErr.Code)
		}
	}
}

func TestSDKEmptyInput(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key)
	_, err := c.Responses.New(ctxT(t, waitTimeout), params("", nil))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want an *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "input" || apiErr.Code != "invalid_request" ||
		apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "input") {
		t.Errorf("got %d type %q code %q param %q message %q, want 400 invalid_request_error invalid_request naming input",
			apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, apiErr.Message)
	}
	if got := p.hits.Load(); got != 1 {
		t.Errorf("%d requests reached the gateway, want 1 (a 400 is not retried)", got)
	}
}

// A usage limit resetting in 60 s is answered 429 with x-should-retry: false, and the SDK (which
// retries 429s by default) sends it once.
func TestSDKUsageLimitNotRetried(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-shot", true: "stream"}[stream], func(t *testing.T) {
			p := newPool(t, poolOptions{})
			c := sdk(t, p, key, option.WithMaxRetries(3))
			ps := params("Say hello", map[string]string{"sim_fault": "error:429"})
			var err error
			if stream {
				s := c.Responses.NewStreaming(ctxT(t, waitTimeout), ps)
				for s.Next() {
					t.Errorf("got event %q, want none", s.Current().Type)
				}
				err = s.Err()
			} else {
				_, err = c.Responses.New(ctxT(t, waitTimeout), ps)
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v, want an *openai.Error", err)
			}
			if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "upstream_rate_limited" || apiErr.Type != "rate_limit_error" {
				t.Errorf("got %d %s %s, want 429 rate_limit_error upstream_rate_limited", apiErr.StatusCode, apiErr.Type, apiErr.Code)
			}
			h := apiErr.Response.Header
			if h.Get("x-should-retry") != "false" || h.Get("retry-after") == "" || h.Get("retry-after-ms") == "" {
				t.Errorf("headers x-should-retry %q retry-after %q retry-after-ms %q, want false and both retry times",
					h.Get("x-should-retry"), h.Get("retry-after"), h.Get("retry-after-ms"))
			}
			if got := p.hits.Load(); got != 1 {
				t.Errorf("%d requests reached the gateway, want 1 (the SDK must not retry a long usage limit)", got)
			}
		})
	}
}

// worker_busy is answered with x-should-retry: true and the SDK retries until a slot is free.
func TestSDKWorkerBusyRetried(t *testing.T) {
	// One slot, and a client that passes worker_busy straight on, so the SDK sees it.
	p := newPool(t, poolOptions{maxInflight: 1, client: client.Options{RetryBusy: -1}})
	cl := client.New(p.nc, client.Options{RetryBusy: -1})
	var wg sync.WaitGroup
	wg.Add(1)
	busyErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		_, err := cl.Generate(context.Background(), []byte(`{"input":"hold","metadata":{"sim_latency_ms":"1500"}}`), nil)
		busyErr <- err
	}()
	t.Cleanup(wg.Wait)
	waitInflight(t, p, 1)

	c := sdk(t, p, key, option.WithMaxRetries(6))
	resp, err := c.Responses.New(ctxT(t, waitTimeout), params("Say hello", nil))
	if err != nil {
		t.Fatalf("got %v, want success once the slot is free", err)
	}
	if got, want := resp.OutputText(), codextest.Answer("Say hello", words); got != want {
		t.Errorf("output text %q, want %q", got, want)
	}
	if got := p.hits.Load(); got < 2 {
		t.Errorf("%d requests reached the gateway, want at least 2 (worker_busy retried)", got)
	}
	if !strings.Contains(p.logs.String(), `"code":"worker_busy"`) {
		t.Errorf("no worker_busy answer in the gateway log:\n%s", p.logs.String())
	}
	if err := <-busyErr; err != nil {
		t.Errorf("the request holding the slot: %v", err)
	}
}

func waitInflight(t *testing.T, p *pool, n int64) {
	t.Helper()
	testutil.WaitFor(t, waitTimeout, fmt.Sprintf("%d generations in flight", n), func() bool { return p.svc.Stats().Inflight == n })
}

// An origin that drops the socket after response.created: the stream has begun, so the SDK gets
// the events so far and then an error it raises.
func TestSDKStreamErrorAfterStart(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := sdk(t, p, key, option.WithMaxRetries(0))
	s := c.Responses.NewStreaming(ctxT(t, waitTimeout), params("Say hello", map[string]string{"sim_fault": "drop"}))
	var types []string
	for s.Next() {
		types = append(types, s.Current().Type)
	}
	err := s.Err()
	if err == nil || !strings.Contains(err.Error(), "upstream_error") {
		t.Fatalf("got error %v, want one naming upstream_error", err)
	}
	if len(types) == 0 || types[0] != "response.created" {
		t.Errorf("events %v before the error, want response.created", types)
	}
}
