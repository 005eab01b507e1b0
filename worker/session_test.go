package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/validate"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// sessionTurn runs one one-shot turn of session sid: prompt as the only new item, continuing
// prev unless it is "". It returns the response id.
func sessionTurn(ctx context.Context, w *worker.Worker, sid, prev, prompt string) (string, error) {
	body := fmt.Sprintf(`{"input":%q`, prompt)
	if prev != "" {
		body += fmt.Sprintf(`,"previous_response_id":%q`, prev)
	}
	r, err := validate.SessionRequest([]byte(body + "}"))
	if err != nil {
		return "", err
	}
	r.ID, r.Session = "req-"+prompt, sid
	out, err := w.Generate(ctx, r, nil)
	if err != nil {
		return "", err
	}
	var resp struct{ ID string }
	err = json.Unmarshal(out, &resp)
	return resp.ID, err
}

func TestSessionTurnsStayOnOneSocket(t *testing.T) {
	sim := newAccountsSim(t, codextest.Options{Words: 2}, simAccount("a"), simAccount("b"), simAccount("c"))
	w := newAccountsWorker(t, sim, worker.Config{}, "a", "b", "c")
	ctx := testCtx(t)
	prev := ""
	for i := range 6 {
		id, err := sessionTurn(ctx, w, "s1", prev, fmt.Sprintf("turn %d", i))
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		prev = id
	}
	turns := sim.Turns()
	for i, tr := range turns {
		if tr.Socket != turns[0].Socket || tr.Continued != (i > 0) {
			t.Errorf("turn %d: %+v, want continued on socket %d", i, tr, turns[0].Socket)
		}
	}
	if st := w.UpstreamStats(); st.Pinned != 1 || w.Sessions() != 1 {
		t.Errorf("%d pinned sockets, %d sessions; want 1 and 1", st.Pinned, w.Sessions())
	}
}

func TestSessionContinuationNotFound(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, sim *codextest.Server, w *worker.Worker) (sid, prev string)
	}{
		{"unknown session", func(*testing.T, *codextest.Server, *worker.Worker) (string, string) {
			return "nobody", "resp_1"
		}},
		{"socket lost", func(t *testing.T, sim *codextest.Server, w *worker.Worker) (string, string) {
			id, err := sessionTurn(testCtx(t), w, "s1", "", "first")
			if err != nil {
				t.Fatal(err)
			}
			sim.CloseClientConnections()
			eventually(t, "the pinned socket to close", func() bool { return w.UpstreamStats().Open == 0 })
			return "s1", id
		}},
		{"id from another socket", func(t *testing.T, sim *codextest.Server, w *worker.Worker) (string, string) {
			if _, err := sessionTurn(testCtx(t), w, "s1", "", "first"); err != nil {
				t.Fatal(err)
			}
			other, err := sessionTurn(testCtx(t), w, "s2", "", "other")
			if err != nil {
				t.Fatal(err)
			}
			return "s1", other
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := codextest.NewServer(codextest.Options{Words: 2})
			t.Cleanup(sim.Close)
			w := newWorker(t, sim, nil)
			sid, prev := tt.setup(t, sim, w)
			start := time.Now()
			_, err := sessionTurn(testCtx(t), w, sid, prev, "next")
			e, ok := schemas.AsError(err)
			if !ok || e.Code != schemas.CodePreviousResponseNotFound || e.Status != 400 {
				t.Fatalf("got %v, want 400 previous_response_not_found", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("answered after %v, want at once", d)
			}
			// The full resend succeeds, and the session continues from it.
			id, err := sessionTurn(testCtx(t), w, sid, "", "full resend")
			if err != nil {
				t.Fatalf("full resend: %v", err)
			}
			if _, err := sessionTurn(testCtx(t), w, sid, id, "then continue"); err != nil {
				t.Fatalf("continuation after the resend: %v", err)
			}
		})
	}
}

func TestSessionIdlesOut(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{Words: 2})
	t.Cleanup(sim.Close)
	w, err := worker.New(worker.Config{ID: "w1", URL: sim.URL, Token: "tok-123456789",
		SessionIdleTimeout: 50 * time.Millisecond}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	if _, err := sessionTurn(testCtx(t), w, "s1", "", "first"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the session to idle out", func() bool { return w.Sessions() == 0 })
	// Its socket went back to the pool: the next request reuses it.
	if st := w.UpstreamStats(); st.Pinned != 0 || st.Idle != 1 {
		t.Errorf("after idling out: %d pinned, %d idle; want 0 and 1", st.Pinned, st.Idle)
	}
}

func TestSessionCloseReleasesSockets(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{Words: 2})
	t.Cleanup(sim.Close)
	w, err := worker.New(worker.Config{ID: "w1", URL: sim.URL, Token: "tok-123456789"}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"s1", "s2"} {
		if _, err := sessionTurn(testCtx(t), w, sid, "", "first"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st := w.UpstreamStats(); st.Open != 0 || st.Pinned != 0 {
		t.Errorf("after Close: %d open, %d pinned; want 0", st.Open, st.Pinned)
	}
	_, err = sessionTurn(testCtx(t), w, "s1", "", "late")
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeUnavailable {
		t.Errorf("a turn after Close: %v, want unavailable", err)
	}
}

// eventually waits for cond, polling, for at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// TestSessionCap: a worker owns at most MaxSessions. A new session beyond that takes the place
// of the one idle longest, whose continuation is then previous_response_not_found (the client
// resends the conversation); the others keep their sockets. When every session is in a turn,
// a new one is answered 429 worker_busy.
func TestSessionCap(t *testing.T) {
	t.Run("evicts the idle longest", func(t *testing.T) {
		sim := newAccountsSim(t, codextest.Options{Words: 2}, simAccount("a"))
		w := newAccountsWorker(t, sim, worker.Config{MaxSessions: 2}, "a")
		ctx := testCtx(t)
		ids := map[string]string{}
		for _, sid := range []string{"s1", "s2", "s3"} {
			id, err := sessionTurn(ctx, w, sid, "", "first of "+sid)
			if err != nil {
				t.Fatalf("%s: %v", sid, err)
			}
			ids[sid] = id
		}
		if n, st := w.Sessions(), w.UpstreamStats(); n != 2 || st.Pinned != 2 {
			t.Errorf("%d sessions, %d pinned sockets; want 2 and 2 (the cap)", n, st.Pinned)
		}
		if _, err := sessionTurn(ctx, w, "s1", ids["s1"], "more"); !isCode(err, schemas.CodePreviousResponseNotFound) {
			t.Errorf("continuing the evicted s1: %v, want previous_response_not_found", err)
		}
		for _, sid := range []string{"s2", "s3"} {
			if _, err := sessionTurn(ctx, w, sid, ids[sid], "more"); err != nil {
				t.Errorf("continuing %s: %v, want it served on its socket", sid, err)
			}
		}
	})
	t.Run("busy when every session is in a turn", func(t *testing.T) {
		sim := newAccountsSim(t, codextest.Options{Words: 2, Latency: time.Minute}, simAccount("a"))
		w := newAccountsWorker(t, sim, worker.Config{MaxSessions: 1}, "a")
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() { _, err := sessionTurn(ctx, w, "s1", "", "long"); done <- err }()
		eventually(t, "s1's turn to reach the origin", func() bool { return sim.Stats().Responses == 1 })
		_, err := sessionTurn(testCtx(t), w, "s2", "", "second")
		if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeWorkerBusy || e.Status != 429 || e.RetryAfter <= 0 {
			t.Errorf("a new session while the only one is in a turn: %v, want 429 worker_busy with a retry time", err)
		}
		cancel()
		<-done
	})
}

// isCode reports whether err is a contract error with code.
func isCode(err error, code schemas.Code) bool {
	e, ok := schemas.AsError(err)
	return ok && e.Code == code
}

// sessionRequest is the request of a turn of session sid, continuing prev unless it is "".
func sessionRequest(t *testing.T, sid, prev string) *schemas.Request {
	t.Helper()
	body := `{"input":"hi"`
	if prev != "" {
		body += fmt.Sprintf(`,"previous_response_id":%q`, prev)
	}
	r, err := validate.SessionRequest([]byte(body + "}"))
	if err != nil {
		t.Fatal(err)
	}
	r.ID, r.Session = "req-"+sid, sid
	return r
}

// TestSessionAdmit: Admit (what the queue asks before it runs a request) reserves a new
// session's place, so a reserved session is not displaced before its turn; refuses a new session
// with 429 worker_busy and a retry time when every session is in use (the queue then hands it
// back to the group); and lets through what needs no new place.
func TestSessionAdmit(t *testing.T) {
	sim := newAccountsSim(t, codextest.Options{Words: 2}, simAccount("a"))
	w := newAccountsWorker(t, sim, worker.Config{MaxSessions: 1}, "a")
	ctx := testCtx(t)

	release, err := w.Admit(sessionRequest(t, "s1", ""))
	if err != nil {
		t.Fatalf("Admit s1 on an empty worker: %v", err)
	}
	if n := w.Sessions(); n != 1 {
		t.Errorf("%d sessions after Admit, want 1 (its place reserved)", n)
	}
	_, err = w.Admit(sessionRequest(t, "s2", ""))
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeWorkerBusy || e.Status != 429 || e.RetryAfter <= 0 {
		t.Fatalf("Admit s2 while s1's place is reserved: %v, want 429 worker_busy with a retry time", err)
	}
	for _, r := range []*schemas.Request{sessionRequest(t, "s1", ""), sessionRequest(t, "s9", "resp_x"), sessionRequest(t, "", "")} {
		rel, err := w.Admit(r)
		if err != nil {
			t.Errorf("Admit %q (previous_response_id %q) on the full worker: %v, want it let through", r.Session, r.PreviousResponseID(), err)
			continue
		}
		rel()
	}
	id, err := sessionTurn(ctx, w, "s1", "", "first")
	release()
	release() // a second call changes nothing
	if err != nil {
		t.Fatalf("s1's turn: %v", err)
	}
	if _, err := sessionTurn(ctx, w, "s1", id, "more"); err != nil {
		t.Fatalf("continuing s1 after its reservation ended: %v", err)
	}
	// s1 is idle now: a new session takes its place.
	rel, err := w.Admit(sessionRequest(t, "s2", ""))
	if err != nil {
		t.Fatalf("Admit s2 with s1 idle: %v, want s1 displaced", err)
	}
	rel()
	if _, err := sessionTurn(ctx, w, "s1", id, "again"); !isCode(err, schemas.CodePreviousResponseNotFound) {
		t.Errorf("continuing the displaced s1: %v, want previous_response_not_found", err)
	}
}
