package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/schemas"
)

// post sends body to path with the test key and returns the response, closed at cleanup.
func post(t *testing.T, p *pool, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func get(t *testing.T, p *pool, path string, auth bool) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodGet, p.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(t, req)
}

// do sends req on a new transport, which each opt may adjust first.
func do(t *testing.T, req *http.Request, opts ...func(*http.Transport)) *http.Response {
	t.Helper()
	tr := &http.Transport{}
	for _, o := range opts {
		o(tr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openAIError decodes an error body in the OpenAI shape, failing on any other shape.
func openAIError(t *testing.T, body []byte) (msg, typ, code string, param *string) {
	t.Helper()
	var b struct {
		Error *struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
			Code    *string `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil || b.Error == nil || b.Error.Message == nil || b.Error.Type == nil || b.Error.Code == nil {
		t.Fatalf("body %s is not {\"error\":{\"message\",\"type\",\"code\",\"param\"}}", body)
	}
	if !bytes.Contains(body, []byte(`"param":`)) {
		t.Errorf("body %s has no param", body)
	}
	return *b.Error.Message, *b.Error.Type, *b.Error.Code, b.Error.Param
}

func TestErrorShapes(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{MaxBodyBytes: 200}})
	cases := []struct {
		name        string
		method      string
		path        string
		body        string
		noAuth      bool
		status      int
		typ, code   string
		param       string
		wantMessage string
	}{
		{"no key", "POST", "/v1/responses", `{"input":"hi"}`, true, 401, "authentication_error", "invalid_api_key", "", "API key"},
		{"empty input", "POST", "/v1/responses", `{"input":""}`, false, 400, "invalid_request_error", "invalid_request", "input", "input"},
		{"empty input streamed", "POST", "/v1/responses", `{"input":"","stream":true}`, false, 400, "invalid_request_error", "invalid_request", "input", "input"},
		{"no input", "POST", "/v1/responses", `{"model":"m"}`, false, 400, "invalid_request_error", "invalid_request", "input", "required"},
		{"metadata", "POST", "/v1/responses", `{"input":"x","metadata":{"a":1}}`, false, 400, "invalid_request_error", "invalid_request", "metadata.a", "string"},
		{"not JSON", "POST", "/v1/responses", `{"input":`, false, 400, "invalid_request_error", "invalid_request", "", "JSON"},
		{"previous_response_id", "POST", "/v1/responses", `{"input":"x","previous_response_id":"resp_1"}`, false, 400, "invalid_request_error", "invalid_request", "previous_response_id", "only in a session"},
		{"background without jobs", "POST", "/v1/responses", `{"input":"x","background":true}`, false, 400, "invalid_request_error", "invalid_request", "background", "job"},
		{"too large", "POST", "/v1/responses", `{"input":"` + strings.Repeat("x", 300) + `"}`, false, 413, "invalid_request_error", "request_too_large", "", "200"},
		{"no route", "GET", "/v1/embeddings", "", false, 404, "invalid_request_error", "not_found", "", "no route"},
		{"wrong method", "GET", "/v1/responses", "", false, 405, "invalid_request_error", "method_not_allowed", "", "POST"},
		{"unknown model", "GET", "/v1/models/nope", "", false, 404, "invalid_request_error", "not_found", "model", "nope"},
		{"no stored responses", "GET", "/v1/responses/resp_1", "", false, 404, "invalid_request_error", "not_found", "", "not stored"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), tc.method, p.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.noAuth {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp := do(t, req)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("got status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no x-request-id")
			}
			msg, typ, code, param := openAIError(t, body)
			if typ != tc.typ || code != tc.code {
				t.Errorf("got type %q code %q, want %q %q", typ, code, tc.typ, tc.code)
			}
			gotParam := ""
			if param != nil {
				gotParam = *param
			}
			if gotParam != tc.param {
				t.Errorf("got param %q, want %q", gotParam, tc.param)
			}
			if !strings.Contains(msg, tc.wantMessage) {
				t.Errorf("got message %q, want it to mention %q", msg, tc.wantMessage)
			}
		})
	}
	if strings.Contains(p.logs.String(), key) {
		t.Error("the gateway logged a client key")
	}
}

// Chunked bodies have no Content-Length: the limit holds while reading.
func TestBodyLimitChunked(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{MaxBodyBytes: 100}})
	body := io.MultiReader(strings.NewReader(`{"input":"`), strings.NewReader(strings.Repeat("y", 500)), strings.NewReader(`"}`))
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+"/v1/responses", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+key)
	resp := do(t, req)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %d, want 413", resp.StatusCode)
	}
	if _, _, code, _ := openAIError(t, readAll(t, resp.Body)); code != "request_too_large" {
		t.Errorf("got code %q, want request_too_large", code)
	}
}

func TestNoResponders(t *testing.T) {
	p := newPool(t, poolOptions{noWorker: true})
	for _, body := range []string{`{"input":"hi"}`, `{"input":"hi","stream":true}`} {
		resp := post(t, p, "/v1/responses", body, nil)
		b := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s: got %d %s, want 503", body, resp.StatusCode, b)
		}
		if _, typ, code, _ := openAIError(t, b); code != "unavailable" || typ != "server_error" {
			t.Errorf("%s: got %s %s, want server_error unavailable", body, typ, code)
		}
	}
}

// TestRequestID: every response carries the gateway's own request id, never the client's (a
// client-chosen id could name another client's request, and a disconnect cancels by id), and the
// pool request carried it as Codex-Request-Id.
func TestRequestID(t *testing.T) {
	p := newPool(t, poolOptions{})
	seen := map[string]bool{}
	for _, in := range []string{"", "someone-elses-id", "a b"} {
		hdr := map[string]string{}
		if in != "" {
			hdr["X-Request-Id"] = in
		}
		resp := post(t, p, "/v1/responses", `{"input":"hi"}`, hdr)
		if resp.StatusCode != 200 {
			t.Fatalf("got %d, want 200", resp.StatusCode)
		}
		got := resp.Header.Get("X-Request-Id")
		if !strings.HasPrefix(got, "gw-") || got == in || seen[got] {
			t.Errorf("X-Request-Id %q in, %q out: want a new gw- id each time", in, got)
		}
		seen[got] = true
		testutil.WaitFor(t, waitTimeout, "the request's log line", func() bool {
			return strings.Contains(p.logs.String(), `"request_id":"`+got+`"`)
		})
	}
}

func TestModelsAndHealth(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{Models: []string{"gpt-5.1-codex", "gpt-5.1-codex-mini"}}})
	c := sdk(t, p, key)
	page, err := c.Models.List(ctxT(t, waitTimeout))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "gpt-5.1-codex,gpt-5.1-codex-mini" {
		t.Errorf("got models %v, want the configured two", ids)
	}
	m, err := c.Models.Get(ctxT(t, waitTimeout), "gpt-5.1-codex-mini")
	if err != nil || m.ID != "gpt-5.1-codex-mini" {
		t.Errorf("got %v, %v, want gpt-5.1-codex-mini", m, err)
	}
	bad := sdk(t, p, "wrong")
	if _, err := bad.Models.List(ctxT(t, waitTimeout)); err == nil {
		t.Error("models with a wrong key: got no error, want 401")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp := get(t, p, path, false); resp.StatusCode != 200 {
			t.Errorf("%s without a key: got %d, want 200", path, resp.StatusCode)
		}
	}
}

func TestReadyz(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{ReadyTTL: 100 * time.Millisecond, ReadyTimeout: 200 * time.Millisecond}})
	if resp := get(t, p, "/readyz", false); resp.StatusCode != 200 {
		t.Fatalf("with a worker: got %d %s, want 200", resp.StatusCode, readAll(t, resp.Body))
	}
	// Probes inside the TTL reuse the verdict; once the worker is gone it turns to 503.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.svc.Shutdown(ctx)
	testutil.WaitFor(t, waitTimeout, "/readyz to answer 503", func() bool {
		return get(t, p, "/readyz", false).StatusCode == http.StatusServiceUnavailable
	})

	q := newPool(t, poolOptions{noWorker: true})
	resp := get(t, q, "/readyz", false)
	if b := readAll(t, resp.Body); resp.StatusCode != 503 || !bytes.Contains(b, []byte("no codexpool worker")) {
		t.Errorf("without a worker: got %d %s, want 503 naming the missing worker", resp.StatusCode, b)
	}
	q.nc.Close()
	resp = get(t, q, "/readyz", false)
	testutil.WaitFor(t, waitTimeout, "/readyz to say NATS is down", func() bool {
		resp = get(t, q, "/readyz", false)
		return bytes.Contains(readAll(t, resp.Body), []byte("not connected to NATS"))
	})
}

// The gateway's request timeout is the deadline the pool works to (Codex-Timeout).
func TestDeadlineReachesPool(t *testing.T) {
	deadlines := make(chan time.Duration, 1)
	p := newPool(t, poolOptions{gw: gateway.Config{RequestTimeout: 5 * time.Second},
		gen: genFunc(func(ctx context.Context, _ *schemas.Request, _ func([]byte) error) ([]byte, error) {
			dl, _ := ctx.Deadline()
			deadlines <- time.Until(dl)
			return []byte(`{"id":"r","status":"completed","output":[],"output_text":""}`), nil
		})})
	if resp := post(t, p, "/v1/responses", `{"input":"hi"}`, nil); resp.StatusCode != 200 {
		t.Fatalf("got %d, want 200", resp.StatusCode)
	}
	if left := <-deadlines; left <= 3*time.Second || left > 5*time.Second {
		t.Errorf("the generation had %s left, want just under the gateway's 5s", left)
	}
}

// Nulls and "background": false mean "absent" in the Responses API; the pool would refuse them.
func TestNullsDropped(t *testing.T) {
	p := newPool(t, poolOptions{})
	resp := post(t, p, "/v1/responses", `{"input":"hi","instructions":null,"background":false,"previous_response_id":null,"max_output_tokens":null}`, nil)
	if b := readAll(t, resp.Body); resp.StatusCode != 200 {
		t.Fatalf("got %d %s, want 200", resp.StatusCode, b)
	}
}

// The wire never carries a top-level "error" key outside errors: a completed response has
// "error": null, which the gateway removes from one-shot replies and from every event.
func TestNoTopLevelErrorKey(t *testing.T) {
	p := newPool(t, poolOptions{gen: genFunc(func(_ context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		resp := `{"id":"resp_1","object":"response","status":"completed","error":null,"output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}]}`
		if emit == nil {
			return schemas.WithOutputText([]byte(resp))
		}
		for _, ev := range []string{
			`{"type":"response.created","error":null,"response":{"id":"resp_1","status":"in_progress","error":null,"output":[]}}`,
			`{"error":null,"type":"response.output_text.delta","delta":"Hi"}`,
			`{"type":"response.completed","response":` + resp + `,"error":null}`,
		} {
			if err := emit([]byte(ev)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})})

	resp := post(t, p, "/v1/responses", `{"input":"hi"}`, nil)
	body := readAll(t, resp.Body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("one-shot body %s: %v", body, err)
	}
	if _, found := top["error"]; found || string(top["output_text"]) != `"Hi"` {
		t.Errorf("one-shot body %s: want output_text and no top-level error", body)
	}

	resp = post(t, p, "/v1/responses", `{"input":"hi","stream":true}`, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("got Content-Type %q, want text/event-stream", ct)
	}
	frames := readFrames(t, resp.Body)
	if len(frames) != 3 {
		t.Fatalf("got %d frames %v, want 3", len(frames), frames)
	}
	for _, f := range frames {
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(f.data), &top); err != nil {
			t.Fatalf("frame data %s: %v", f.data, err)
		}
		if _, found := top["error"]; found {
			t.Errorf("frame %s has a top-level error", f.data)
		}
		if want, _ := json.Marshal(f.event); string(top["type"]) != string(want) {
			t.Errorf("frame event %q, data type %s", f.event, top["type"])
		}
	}

	// And the SDK, which fails on any top-level "error", reads the stream to its end.
	c := sdk(t, p, key)
	s := c.Responses.NewStreaming(ctxT(t, waitTimeout), params("hi", nil))
	n := 0
	for s.Next() {
		n++
	}
	if err := s.Err(); err != nil || n != 3 {
		t.Errorf("openai-go stream: %d events, error %v; want 3 and none", n, err)
	}
}

// genFunc is a queue.Generator the tests script, in place of a worker.
type genFunc func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error)

func (f genFunc) Generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	return f(ctx, r, emit)
}

type frame struct {
	event, data string
	comment     bool
}

// readFrames parses a text/event-stream body into frames (comments included).
func readFrames(t *testing.T, r io.Reader) []frame {
	t.Helper()
	var out []frame
	var cur frame
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (frame{}) {
				out = append(out, cur)
			}
			cur = frame{}
		case strings.HasPrefix(line, ":"):
			out = append(out, frame{data: strings.TrimSpace(line[1:]), comment: true})
		case strings.HasPrefix(line, "event: "):
			cur.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				t.Errorf("frame with two data lines: %q", line)
			}
			cur.data = line[len("data: "):]
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A silent origin gets keep-alive comments between events; one that is slow to send its first
// event starts the stream with one, and an error after that comes as an SSE error event.
func TestKeepAlive(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{KeepAlive: 30 * time.Millisecond}})
	resp := post(t, p, "/v1/responses", `{"input":"hi","stream":true,"metadata":{"sim_ttft_ms":"200","sim_latency_ms":"400"}}`, nil)
	frames := readFrames(t, resp.Body)
	var deltas, keepAlives int
	for _, f := range frames {
		switch {
		case f.comment && f.data == "keep-alive":
			keepAlives++
		case f.event == "response.output_text.delta":
			deltas++
		}
	}
	if keepAlives < 3 || deltas != words || frames[len(frames)-1].event != "response.completed" {
		t.Errorf("got %d keep-alives, %d deltas, last %+v; want >= 3, %d, response.completed", keepAlives, deltas, frames[len(frames)-1], words)
	}

	slow := newPool(t, poolOptions{gw: gateway.Config{KeepAlive: 30 * time.Millisecond},
		gen: genFunc(func(ctx context.Context, _ *schemas.Request, _ func([]byte) error) ([]byte, error) {
			select { // an origin that takes 150ms to fail
			case <-time.After(150 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, schemas.Errorf(schemas.CodeOriginForbidden, "the origin refused the upgrade")
		})})
	resp = post(t, slow, "/v1/responses", `{"input":"hi","stream":true}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("slow start: got %d, want 200 (the stream began with a keep-alive)", resp.StatusCode)
	}
	frames = readFrames(t, resp.Body)
	if len(frames) < 2 || !frames[0].comment || frames[len(frames)-1].event != "error" ||
		!strings.Contains(frames[len(frames)-1].data, `"code":"origin_forbidden"`) {
		t.Errorf("slow start: frames %v, want keep-alives then an origin_forbidden error event", frames)
	}

	// A stalled origin after response.created: the idle timeout is the worker's, so here the
	// request deadline ends it, as an SSE error event after the keep-alives.
	q := newPool(t, poolOptions{gw: gateway.Config{KeepAlive: 30 * time.Millisecond, RequestTimeout: 300 * time.Millisecond}})
	resp = post(t, q, "/v1/responses", `{"input":"hi","stream":true,"metadata":{"sim_fault":"stall"}}`, nil)
	frames = readFrames(t, resp.Body)
	last := frames[len(frames)-1]
	if last.event != "error" {
		t.Fatalf("frames %v, want an error event last", frames)
	}
	var ev struct {
		Type  string `json:"type"`
		Code  string `json:"code"`
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last.data), &ev); err != nil || ev.Type != "error" || ev.Code != "upstream_timeout" ||
		ev.Error.Code != "upstream_timeout" || ev.Error.Type != "server_error" {
		t.Errorf("error event %s (%v), want type error, code upstream_timeout and the error object", last.data, err)
	}
}
