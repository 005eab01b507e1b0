package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/schemas"
)

// fakeJobs is an in-memory gateway.Jobs: jobs get the ids job-1, job-2, ...; the test sets results.
type fakeJobs struct {
	mu      sync.Mutex
	bodies  map[string][]byte
	headers map[string]nats.Header
	results map[string][]byte
}

func newFakeJobs() *fakeJobs {
	return &fakeJobs{bodies: map[string][]byte{}, headers: map[string]nats.Header{}, results: map[string][]byte{}}
}

func (f *fakeJobs) Submit(_ context.Context, body []byte, hdr nats.Header) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("job-%d", len(f.bodies)+1)
	f.bodies[id], f.headers[id] = body, hdr
	return id, nil
}

func (f *fakeJobs) Result(_ context.Context, id string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.bodies[id]; !ok {
		return nil, false, fmt.Errorf("fake: %w", gateway.ErrJobNotFound)
	}
	r, ok := f.results[id]
	return r, ok, nil
}

func (f *fakeJobs) finish(id string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[id] = body
}

func TestBackground(t *testing.T) {
	jobs := newFakeJobs()
	p := newPool(t, poolOptions{gw: gateway.Config{Jobs: jobs}})
	c := sdk(t, p, key)
	ctx := ctxT(t, waitTimeout)
	ps := params("Say hello", nil)
	ps.Background = openai.Bool(true)
	r, err := c.Responses.New(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "job-1" || r.Status != "queued" || !r.Background {
		t.Fatalf("got id %q status %q background %v, want job-1 queued true", r.ID, r.Status, r.Background)
	}
	// The job is the plain request: without "background", with the request id.
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(jobs.bodies["job-1"], &sent); err != nil {
		t.Fatal(err)
	}
	if _, found := sent["background"]; found || string(sent["input"]) != `"Say hello"` {
		t.Errorf("job body %s, want the request without background", jobs.bodies["job-1"])
	}
	if jobs.headers["job-1"].Get(schemas.HeaderRequestID) == "" {
		t.Error("job submitted without Codex-Request-Id")
	}

	r, err = c.Responses.Get(ctx, "job-1", responses.ResponseGetParams{})
	if err != nil || r.Status != "queued" {
		t.Fatalf("before the result: got %v, %v, want status queued", r, err)
	}

	jobs.finish("job-1", []byte(`{"id":"resp_9","object":"response","status":"completed","error":null,"output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi there"}]}],"output_text":"Hi there"}`))
	r, err = c.Responses.Get(ctx, "job-1", responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "job-1" || r.Status != "completed" || r.OutputText() != "Hi there" || !r.Background {
		t.Errorf("done: got id %q status %q text %q background %v, want job-1 completed \"Hi there\" true", r.ID, r.Status, r.OutputText(), r.Background)
	}

	if _, err := c.Responses.New(ctx, ps); err != nil {
		t.Fatal(err)
	}
	jobs.finish("job-2", schemas.Errorf(schemas.CodeUpstreamError, "the origin failed").Body())
	r, err = c.Responses.Get(ctx, "job-2", responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "failed" || string(r.Error.Code) != "upstream_error" || r.Error.Message != "the origin failed" {
		t.Errorf("failed job: got status %q error %+v, want failed upstream_error", r.Status, r.Error)
	}

	for _, id := range []string{"job-9", "bad id!"} {
		_, err = c.Responses.Get(ctx, id, responses.ResponseGetParams{})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("unknown job %q: got %v, want 404", id, err)
		}
	}

	// A background response cannot be streamed here.
	resp := post(t, p, "/v1/responses", `{"input":"x","background":true,"stream":true}`, nil)
	if _, _, code, param := openAIError(t, readAll(t, resp.Body)); resp.StatusCode != 400 || code != "invalid_request" || param == nil || *param != "stream" {
		t.Errorf("background + stream: got %d %s, want 400 naming stream", resp.StatusCode, code)
	}
}
