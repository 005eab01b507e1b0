package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/schemas"
)

// fakeJobs is an in-memory gateway.Jobs: a job's id is its Codex-Request-Id, as the pool's store
// makes it; the test sets results.
type fakeJobs struct {
	mu      sync.Mutex
	bodies  map[string][]byte
	headers map[string]nats.Header
	results map[string][]byte
	// nLookups counts Result calls.
	nLookups int
}

func (f *fakeJobs) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nLookups
}

func newFakeJobs() *fakeJobs {
	return &fakeJobs{bodies: map[string][]byte{}, headers: map[string]nats.Header{}, results: map[string][]byte{}}
}

func (f *fakeJobs) Submit(_ context.Context, body []byte, hdr nats.Header) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := hdr.Get(schemas.HeaderRequestID)
	f.bodies[id], f.headers[id] = body, hdr
	return id, nil
}

func (f *fakeJobs) Result(_ context.Context, id string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nLookups++
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
	job1 := r.ID
	if !strings.HasPrefix(job1, "gw-") || r.Status != "queued" || !r.Background {
		t.Fatalf("got id %q status %q background %v, want gw-... queued true", r.ID, r.Status, r.Background)
	}
	// The job is the plain request: without "background", with the request id.
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(jobs.bodies[job1], &sent); err != nil {
		t.Fatal(err)
	}
	if _, found := sent["background"]; found || string(sent["input"]) != `"Say hello"` {
		t.Errorf("job body %s, want the request without background", jobs.bodies[job1])
	}
	if jobs.headers[job1].Get(schemas.HeaderRequestID) == "" {
		t.Error("job submitted without Codex-Request-Id")
	}

	r, err = c.Responses.Get(ctx, job1, responses.ResponseGetParams{})
	if err != nil || r.Status != "queued" {
		t.Fatalf("before the result: got %v, %v, want status queued", r, err)
	}

	jobs.finish(job1, []byte(`{"id":"resp_9","object":"response","status":"completed","error":null,"output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi there"}]}],"output_text":"Hi there"}`))
	r, err = c.Responses.Get(ctx, job1, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != job1 || r.Status != "completed" || r.OutputText() != "Hi there" || !r.Background {
		t.Errorf("done: got id %q status %q text %q background %v, want %s completed \"Hi there\" true", r.ID, r.Status, r.OutputText(), r.Background, job1)
	}

	r, err = c.Responses.New(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	job2 := r.ID
	jobs.finish(job2, schemas.Errorf(schemas.CodeUpstreamError, "the origin failed").Body())
	r, err = c.Responses.Get(ctx, job2, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "failed" || string(r.Error.Code) != "upstream_error" || r.Error.Message != "the origin failed" {
		t.Errorf("failed job: got status %q error %+v, want failed upstream_error", r.Status, r.Error)
	}

	for _, id := range []string{"gw-" + uuid.NewString(), "job-1", "bad id!"} {
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

// A background response is readable only with the key that made it: any other key is told it
// does not exist, in the very words an unknown id gets, and the store is not even asked.
func TestBackgroundOwner(t *testing.T) {
	const other = "sk-gateway-test-key-2"
	jobs := newFakeJobs()
	p := newPool(t, poolOptions{gw: gateway.Config{Jobs: jobs, Keys: []string{key, other}}})
	ctx := ctxT(t, waitTimeout)
	ps := params("Say hello", nil)
	ps.Background = openai.Bool(true)
	c := sdk(t, p, key)
	r, err := c.Responses.New(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID
	jobs.finish(id, []byte(`{"id":"resp_9","object":"response","status":"completed","output":[],"output_text":"mine"}`))
	if r, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{}); err != nil || r.Status != "completed" {
		t.Fatalf("the owner: got %v, want the completed stored response", err)
	}

	lookups := jobs.lookups()
	unknown := "gw-" + uuid.NewString()
	want := getAs(t, p, other, unknown)
	got := getAs(t, p, other, id)
	if got.status != http.StatusNotFound || got.code != "not_found" {
		t.Fatalf("another key: got %d %s, want 404 not_found", got.status, got.code)
	}
	if strings.ReplaceAll(got.message, id, unknown) != want.message {
		t.Errorf("another key: message %q, want the unknown id's %q", got.message, want.message)
	}
	if n := jobs.lookups(); n != lookups {
		t.Errorf("another key: the store was asked %d times, want 0", n-lookups)
	}
}

type answer struct {
	status        int
	code, message string
}

// getAs reads GET /v1/responses/{id} with apiKey.
func getAs(t *testing.T, p *pool, apiKey, id string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodGet, p.srv.URL+"/v1/responses/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp := do(t, req)
	body := readAll(t, resp.Body)
	if resp.StatusCode == http.StatusOK {
		return answer{status: resp.StatusCode}
	}
	msg, _, code, _ := openAIError(t, body)
	return answer{resp.StatusCode, code, msg}
}
