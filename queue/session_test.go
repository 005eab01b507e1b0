package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// sessionSeen records, per worker, the sessions and previous_response_ids of the requests it got.
type sessionSeen struct {
	mu   sync.Mutex
	reqs map[string][]string // worker -> "session/previous"
}

func (s *sessionSeen) gen(worker string) genFunc {
	return func(_ context.Context, r *schemas.Request, _ func([]byte) error) ([]byte, error) {
		s.mu.Lock()
		s.reqs[worker] = append(s.reqs[worker], r.Session+"/"+r.PreviousResponseID())
		s.mu.Unlock()
		return []byte(`{"id":"resp_` + worker + `","output_text":"ok"}`), nil
	}
}

func (s *sessionSeen) of(worker string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs[worker]...)
}

func TestSessionTurnsGoToTheOwner(t *testing.T) {
	ns := startServer(t)
	seen := &sessionSeen{reqs: map[string][]string{}}
	svcs := map[string]*Service{}
	for _, id := range []string{"w1", "w2", "w3"} {
		svcs[id] = newService(t, ns, Config{WorkerID: id}, seen.gen(id))
	}
	c := client.New(connect(t, ns), client.Options{})
	sess := c.Session("s-1")
	ctx := context.Background()
	r, err := sess.Generate(ctx, []byte(goodRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	owner := r.Worker
	for i := range 5 {
		body := fmt.Sprintf(`{"input":"more","previous_response_id":"resp_%d"}`, i)
		if r, err = sess.Generate(ctx, []byte(body), nil); err != nil || r.Worker != owner {
			t.Fatalf("turn %d: worker %v, err %v; want %s", i+2, r, err, owner)
		}
	}
	if got := seen.of(owner); len(got) != 6 || got[0] != "s-1/" || got[5] != "s-1/resp_4" {
		t.Errorf("the owner saw %q, want 6 turns of s-1, the last continuing resp_4", got)
	}

	// The owner stops: the next continuation fails at once with previous_response_not_found,
	// and a full resend goes to another worker, the new owner.
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := svcs[owner].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = sess.Generate(ctx, []byte(`{"input":"more","previous_response_id":"resp_5"}`), nil)
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodePreviousResponseNotFound || e.Status != 400 {
		t.Fatalf("after the owner stopped: %v, want 400 previous_response_not_found", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("previous_response_not_found after %v, want within 1 s", d)
	}
	r, err = sess.Generate(ctx, []byte(goodRequest), nil)
	if err != nil || r.Worker == owner || sess.Worker() != r.Worker {
		t.Fatalf("full resend: %+v, %v; want another worker, now the owner", r, err)
	}
}

func TestSessionHeaderAdmission(t *testing.T) {
	ns := startServer(t)
	seen := &sessionSeen{reqs: map[string][]string{}}
	newService(t, ns, Config{WorkerID: "w1"}, seen.gen("w1"))
	nc := connect(t, ns)
	tests := []struct {
		name    string
		session string
		body    string
		refusal string // a substring of the 400's message; "" = accepted
	}{
		{"continuation in a session", "s", `{"input":"x","previous_response_id":"resp_1"}`, ""},
		{"continuation without a session", "", `{"input":"x","previous_response_id":"resp_1"}`, "only in a session"},
		{"session id too long", strings.Repeat("s", schemas.MaxSessionIDBytes+1), goodRequest, "Codex-Session-Id header is 257 bytes"},
		{"on the worker's own subject", "s", goodRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject := DefaultSubject
			if strings.Contains(tt.name, "own subject") {
				subject = schemas.WorkerSubject(DefaultSubject, "w1")
			}
			m := &nats.Msg{Subject: subject, Data: []byte(tt.body), Header: nats.Header{}}
			if tt.session != "" {
				m.Header.Set(schemas.HeaderSessionID, tt.session)
			}
			resp, err := nc.RequestMsg(m, waitTimeout)
			if err != nil {
				t.Fatal(err)
			}
			code := resp.Header.Get(schemas.HeaderServiceErrorCode)
			if tt.refusal == "" {
				if code != "" {
					t.Fatalf("refused %s: %s", code, resp.Data)
				}
				return
			}
			if code != "400" || !strings.Contains(string(resp.Data), tt.refusal) {
				t.Errorf("got %s %s, want 400 containing %q", code, resp.Data, tt.refusal)
			}
		})
	}
}

func TestNewServiceRefusesABadWorkerID(t *testing.T) {
	ns := startServer(t)
	_, err := NewService(connect(t, ns), Config{WorkerID: "a b"}, instant)
	if err == nil || !strings.Contains(err.Error(), "cannot end a subject") {
		t.Errorf("got %v, want a refusal of the worker id", err)
	}
}
