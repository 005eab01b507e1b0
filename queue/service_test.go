package queue

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

func TestOneShotReply(t *testing.T) {
	ns := startServer(t)
	var seen atomic.Pointer[schemas.Request]
	var sawEmit atomic.Bool
	gen := genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		seen.Store(r)
		sawEmit.Store(emit != nil)
		return instant(ctx, r, nil)
	})
	newService(t, ns, Config{WorkerID: "w1"}, gen)
	nc := connect(t, ns)

	m := request(t, nc, DefaultSubject, goodRequest, nats.Header{schemas.HeaderRequestID: {"rid-1"}})
	if got, want := string(m.Data), `{"id":"resp_1","output_text":"hi rid-1"}`; got != want {
		t.Errorf("payload = %s, want %s", got, want)
	}
	if got := m.Header.Get(schemas.HeaderRequestID); got != "rid-1" {
		t.Errorf("%s = %q, want rid-1", schemas.HeaderRequestID, got)
	}
	if got := m.Header.Get(schemas.HeaderWorker); got != "w1" {
		t.Errorf("%s = %q, want w1", schemas.HeaderWorker, got)
	}
	if got := m.Header.Get(schemas.HeaderServiceErrorCode); got != "" {
		t.Errorf("success reply carries %s %q", schemas.HeaderServiceErrorCode, got)
	}
	if r := seen.Load(); r == nil || r.Stream || sawEmit.Load() {
		t.Errorf("one-shot generation: request %+v, emit given %v; want Stream false and no emit", r, sawEmit.Load())
	}

	// Without an id the worker makes one, tells the generator, and echoes it.
	m = request(t, nc, DefaultSubject, goodRequest, nil)
	id := m.Header.Get(schemas.HeaderRequestID)
	if id == "" || id != seen.Load().ID {
		t.Errorf("generated %s = %q, generator saw %q", schemas.HeaderRequestID, id, seen.Load().ID)
	}
}

// streamReplies sends a request with a reply inbox and collects every message up to and
// including the sentinel (an empty payload with no headers).
func streamReplies(t *testing.T, nc *nats.Conn, payload string, hdr nats.Header) []*nats.Msg {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishMsg(&nats.Msg{Subject: DefaultSubject, Reply: inbox, Data: []byte(payload), Header: hdr}); err != nil {
		t.Fatal(err)
	}
	var out []*nats.Msg
	for {
		m, err := sub.NextMsg(waitTimeout)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(out), err)
		}
		out = append(out, m)
		if len(m.Data) == 0 && len(m.Header) == 0 {
			return out
		}
	}
}

func TestStreamReply(t *testing.T) {
	ns := startServer(t)
	var saved atomic.Pointer[func([]byte) error]
	gen := genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		if !r.Stream || emit == nil {
			t.Errorf("stream request: Stream=%v, emit nil=%v", r.Stream, emit == nil)
			return nil, errors.New("not streaming")
		}
		saved.Store(&emit)
		for _, ev := range []string{`{"n":1}`, ``, `{"n":2}`, `{"n":3}`} {
			if err := emit([]byte(ev)); err != nil {
				return nil, err
			}
		}
		return []byte("ignored"), nil
	})
	newService(t, ns, Config{WorkerID: "w1"}, gen)
	nc := connect(t, ns)

	msgs := streamReplies(t, nc, `{"input":"hi","stream":true}`, nats.Header{schemas.HeaderRequestID: {"rid-s"}})
	want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, ``}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages, want %d (3 events, sentinel)", len(msgs), len(want))
	}
	for i, m := range msgs[:3] {
		if string(m.Data) != want[i] {
			t.Errorf("message %d payload = %q, want %q", i, m.Data, want[i])
		}
		if got := m.Header.Get(schemas.HeaderSeq); got != strconv.Itoa(i+1) {
			t.Errorf("message %d %s = %q, want %d", i, schemas.HeaderSeq, got, i+1)
		}
		if m.Header.Get(schemas.HeaderRequestID) != "rid-s" || m.Header.Get(schemas.HeaderWorker) != "w1" {
			t.Errorf("message %d headers = %v", i, m.Header)
		}
	}
	if emit := saved.Load(); emit == nil || !errors.Is((*emit)([]byte(`{"late":true}`)), errStreamClosed) {
		t.Error("emit after Generate returned was not refused with errStreamClosed")
	}
}

func TestStreamFailure(t *testing.T) {
	tests := []struct {
		name     string
		hdr      nats.Header
		err      func(ctx context.Context) error
		wantCode schemas.Code
	}{
		{"typed error", nil, func(context.Context) error { return schemas.Errorf(schemas.CodeUpstreamRateLimited, "slow down") }, schemas.CodeUpstreamRateLimited},
		{"untyped error", nil, func(context.Context) error { return errors.New("socket closed") }, schemas.CodeUpstreamError},
		{"deadline", nats.Header{schemas.HeaderTimeout: {"50ms"}}, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, schemas.CodeUpstreamTimeout},
	}
	ns := startServer(t)
	nc := connect(t, ns)
	var current atomic.Pointer[func(context.Context) error]
	newService(t, ns, Config{}, genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		_ = emit([]byte(`{"n":1}`))
		_ = emit([]byte(`{"n":2}`))
		return nil, (*current.Load())(ctx)
	}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current.Store(&tt.err)
			msgs := streamReplies(t, nc, `{"input":"hi","stream":true}`, tt.hdr)
			if len(msgs) != 4 {
				t.Fatalf("got %d messages, want 4 (2 events, error, sentinel)", len(msgs))
			}
			for i, m := range msgs[:3] {
				if got := m.Header.Get(schemas.HeaderSeq); got != strconv.Itoa(i+1) {
					t.Errorf("message %d %s = %q, want %d", i, schemas.HeaderSeq, got, i+1)
				}
				if len(m.Data) == 0 {
					t.Errorf("message %d has an empty payload before the sentinel", i)
				}
			}
			if e := errorOf(t, msgs[2]); e.Code != tt.wantCode || e.Status != tt.wantCode.Status() {
				t.Errorf("error = %d %s, want %d %s", e.Status, e.Code, tt.wantCode.Status(), tt.wantCode)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	ns := startServer(t)
	gen := &counted{Generator: instant}
	s := newService(t, ns, Config{MaxRequestBytes: 256}, gen)
	nc := connect(t, ns)

	tests := []struct {
		name    string
		payload string
		hdr     nats.Header
		want    schemas.Code
		inMsg   string
	}{
		{"not JSON", `nope`, nil, schemas.CodeInvalidRequest, ""},
		{"no input", `{"model":"m"}`, nil, schemas.CodeInvalidRequest, "input"},
		{"timeout not a duration", goodRequest, nats.Header{schemas.HeaderTimeout: {"soon"}}, schemas.CodeInvalidRequest, schemas.HeaderTimeout},
		{"timeout negative", goodRequest, nats.Header{schemas.HeaderTimeout: {"-5s"}}, schemas.CodeInvalidRequest, schemas.HeaderTimeout},
		{"timeout zero", goodRequest, nats.Header{schemas.HeaderTimeout: {"0s"}}, schemas.CodeInvalidRequest, schemas.HeaderTimeout},
		{"too large", `{"input":"` + strings.Repeat("x", 300) + `"}`, nil, schemas.CodeRequestTooLarge, "256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			m := request(t, nc, DefaultSubject, tt.payload, tt.hdr)
			took := time.Since(start)
			e := errorOf(t, m)
			if e.Code != tt.want || e.Status != tt.want.Status() {
				t.Errorf("got %d %s, want %d %s", e.Status, e.Code, tt.want.Status(), tt.want)
			}
			if !strings.Contains(e.Message, tt.inMsg) {
				t.Errorf("message %q does not mention %q", e.Message, tt.inMsg)
			}
			if m.Header.Get(schemas.HeaderRequestID) == "" || m.Header.Get(schemas.HeaderWorker) != s.WorkerID() {
				t.Errorf("refusal headers = %v, want a request id and worker %s", m.Header, s.WorkerID())
			}
			// Generous for a shared machine; a refusal that waited on anything would take seconds.
			if took > time.Second {
				t.Errorf("refusal took %v", took)
			}
			// The worker keeps serving.
			if m := request(t, nc, DefaultSubject, goodRequest, nil); m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
				t.Errorf("good request after the refusal failed: %s", m.Data)
			}
		})
	}
	if got, want := gen.calls.Load(), int64(len(tests)); got != want {
		t.Errorf("generator ran %d times, want %d (refused requests must never reach it)", got, want)
	}

	// No reply subject: counted, never generated. The handler takes messages in order, so once the
	// next request is answered, the first one has been handled.
	calls := gen.calls.Load()
	if err := nc.Publish(DefaultSubject, []byte(goodRequest)); err != nil {
		t.Fatal(err)
	}
	request(t, nc, DefaultSubject, goodRequest, nil)
	st := s.Stats()
	if st.NoReply != 1 {
		t.Errorf("no_reply = %d, want 1", st.NoReply)
	}
	if got := gen.calls.Load() - calls; got != 1 {
		t.Errorf("generator ran %d times for one good and one reply-less request, want 1", got)
	}
	if got := st.Errors[schemas.CodeInvalidRequest]; got != 5 {
		t.Errorf("errors[invalid_request] = %d, want 5", got)
	}
	if got := st.Errors[schemas.CodeRequestTooLarge]; got != 1 {
		t.Errorf("errors[request_too_large] = %d, want 1", got)
	}
}

func TestDeadline(t *testing.T) {
	tests := []struct {
		name           string
		header         string
		requestTimeout time.Duration
		want           time.Duration
	}{
		{"header shorter", "100ms", time.Hour, 100 * time.Millisecond},
		{"config shorter", "1h", 100 * time.Millisecond, 100 * time.Millisecond},
		{"no header", "", 100 * time.Millisecond, 100 * time.Millisecond},
	}
	ns := startServer(t)
	nc := connect(t, ns)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject := "deadline." + strconv.Itoa(i)
			got := make(chan time.Time, 1)
			newService(t, ns, Config{Subject: subject, RequestTimeout: tt.requestTimeout}, genFunc(
				func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
					dl, _ := ctx.Deadline()
					got <- dl
					<-ctx.Done()
					return nil, ctx.Err()
				}))
			hdr := nats.Header{}
			if tt.header != "" {
				hdr.Set(schemas.HeaderTimeout, tt.header)
			}
			sent := time.Now()
			m := request(t, nc, subject, goodRequest, hdr)
			answered := time.Now()
			if e := errorOf(t, m); e.Code != schemas.CodeUpstreamTimeout || e.Status != 504 {
				t.Errorf("got %d %s, want 504 upstream_timeout", e.Status, e.Code)
			}
			dl := <-got
			if dl.IsZero() {
				t.Fatal("generator's context has no deadline")
			}
			// The deadline counts from receipt, which lies between sending and the answer.
			if dl.Before(sent.Add(tt.want)) || dl.After(answered.Add(tt.want)) {
				t.Errorf("deadline %v after sending, want %v from receipt", dl.Sub(sent), tt.want)
			}
		})
	}
}

func TestGeneratorPanicAnswers502(t *testing.T) {
	ns := startServer(t)
	newService(t, ns, Config{}, genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		if r.ID == "boom" {
			panic("bug in the generator")
		}
		return instant(ctx, r, emit)
	}))
	nc := connect(t, ns)
	m := request(t, nc, DefaultSubject, goodRequest, nats.Header{schemas.HeaderRequestID: {"boom"}})
	if e := errorOf(t, m); e.Code != schemas.CodeUpstreamError || !strings.Contains(e.Message, "panicked") {
		t.Errorf("got %d %s %q, want 502 upstream_error about the panic", e.Status, e.Code, e.Message)
	}
	if m := request(t, nc, DefaultSubject, goodRequest, nil); m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
		t.Errorf("after the panic: %s", m.Data)
	}
}
