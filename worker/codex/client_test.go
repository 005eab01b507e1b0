package codex

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
	"github.com/google/uuid"
)

func TestGenerateCompletes(t *testing.T) {
	srv := newSim(t, codextest.Options{Words: 5})
	c := newClient(t, srv, Config{})
	var types []string
	res, err := c.Generate(context.Background(), createFrame("Say hello", nil), func(ev Event) error {
		if typ, err := eventType(ev.Data); err != nil || typ != ev.Type {
			t.Errorf("event data type %q (%v), want %q", typ, err, ev.Type)
		}
		types = append(types, ev.Type)
		return nil
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got, want := outputText(t, res.Response), codextest.Answer("Say hello", 5); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if len(types) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("events %v: want response.created first and response.completed last", types)
	}
	deltas := 0
	for _, ty := range types {
		if ty == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas != 5 {
		t.Errorf("got %d deltas, want 5", deltas)
	}
	if res.Events != len(types) || res.Reused || res.Retried || res.Attempts != 1 {
		t.Errorf("result %+v: want Events=%d, fresh socket, 1 attempt", res, len(types))
	}
}

func TestUpgradeHeaders(t *testing.T) {
	srv := newSim(t, codextest.Options{Token: testToken})
	c := newClient(t, srv, Config{AccountID: "acct-42", Version: "1.2.3", NoReuse: true})
	var ids []string
	for range 2 {
		if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		h := srv.LastUpgradeHeader()
		for k, want := range map[string]string{
			"Authorization":      "Bearer " + testToken,
			"Chatgpt-Account-Id": "acct-42",
			"Openai-Beta":        "responses_websockets=2026-02-06",
			"Originator":         "codexpool",
			"User-Agent":         "codexpool/1.2.3",
			"Version":            "1.2.3",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		id := h.Get("Session-Id")
		if _, err := uuid.Parse(id); err != nil {
			t.Errorf("session-id %q is not a UUID", id)
		}
		if h.Get("Thread-Id") != id || h.Get("X-Client-Request-Id") != id {
			t.Errorf("thread-id %q, x-client-request-id %q: want both %q", h.Get("Thread-Id"), h.Get("X-Client-Request-Id"), id)
		}
		ids = append(ids, id)
	}
	if ids[0] == ids[1] {
		t.Errorf("two sockets sent the same session id %q", ids[0])
	}
}

func TestNoAccountHeaderWhenUnset(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{})
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if v, ok := srv.LastUpgradeHeader()["Chatgpt-Account-Id"]; ok {
		t.Errorf("ChatGPT-Account-Id sent as %q without an account id", v)
	}
}

func TestPooledSocketsAreReused(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{})
	for i := range 5 {
		prompt := "prompt " + string(rune('a'+i))
		res, err := c.Generate(context.Background(), createFrame(prompt, nil), nil)
		if err != nil {
			t.Fatalf("Generate %d: %v", i, err)
		}
		if got, want := outputText(t, res.Response), codextest.Answer(prompt, codextest.DefaultWords); got != want {
			t.Errorf("answer %d %q, want %q", i, got, want)
		}
		if res.Reused != (i > 0) {
			t.Errorf("generation %d: Reused=%v, want %v", i, res.Reused, i > 0)
		}
		if i > 0 && res.Attempts != 0 {
			t.Errorf("generation %d on a pooled socket made %d upgrade attempts", i, res.Attempts)
		}
	}
	st := srv.Stats()
	if st.UpgradesAccepted != 1 || st.ReusedResponses != 4 || st.Completed != 5 {
		t.Errorf("simulator: %d upgrades, %d reused, %d completed; want 1, 4, 5", st.UpgradesAccepted, st.ReusedResponses, st.Completed)
	}
	cs := c.Stats()
	if cs.Upgrades != 1 || cs.Reused != 4 || cs.Idle != 1 || cs.Open != 1 || cs.Completed != 5 {
		t.Errorf("client stats %+v: want 1 upgrade, 4 reused, 1 idle, 1 open, 5 completed", cs)
	}
}

func TestNoReuseOpensOneSocketPerGeneration(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{NoReuse: true})
	for i := range 3 {
		res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
		if err != nil {
			t.Fatalf("Generate %d: %v", i, err)
		}
		if res.Reused || res.Attempts != 1 {
			t.Errorf("generation %d: %+v, want a fresh socket", i, res)
		}
		if st := c.Stats(); st.Open != 0 || st.Idle != 0 {
			t.Errorf("after generation %d: open %d idle %d, want 0 0", i, st.Open, st.Idle)
		}
	}
	if st := srv.Stats(); st.UpgradesAccepted != 3 || st.ReusedResponses != 0 {
		t.Errorf("simulator: %d upgrades, %d reused; want 3, 0", st.UpgradesAccepted, st.ReusedResponses)
	}
}

// TestConcurrentGenerationsShareThePool runs two rounds of concurrent generations: the second
// round needs no upgrade, because the first left its sockets in the pool.
func TestConcurrentGenerationsShareThePool(t *testing.T) {
	srv := newSim(t, codextest.Options{Latency: 20 * time.Millisecond})
	c := newClient(t, srv, Config{})
	round := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				prompt := strings.Repeat("x", i+1)
				res, err := c.Generate(context.Background(), createFrame(prompt, nil), nil)
				if err != nil {
					t.Errorf("Generate: %v", err)
					return
				}
				if got, want := outputText(t, res.Response), codextest.Answer(prompt, codextest.DefaultWords); got != want {
					t.Errorf("answer %q, want %q (responses crossed between sockets?)", got, want)
				}
			})
		}
		wg.Wait()
	}
	round(8)
	upgrades := srv.Stats().UpgradesAccepted
	if idle := c.Stats().Idle; int64(idle) != upgrades {
		t.Fatalf("after round 1: %d idle, want %d (every socket pooled)", idle, upgrades)
	}
	round(int(upgrades))
	st := srv.Stats()
	if st.UpgradesAccepted != upgrades || st.ReusedResponses != upgrades || st.BusyRejected != 0 {
		t.Errorf("after round 2: %d upgrades (want %d), %d reused (want %d), %d busy (want 0)",
			st.UpgradesAccepted, upgrades, st.ReusedResponses, upgrades, st.BusyRejected)
	}
}

func TestMaxIdleBoundsThePool(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{MaxIdle: 2})
	const n = 4
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			first := true
			_, err := c.Generate(context.Background(), createFrame("hi", nil), func(Event) error {
				if first { // hold every generation until all n have a socket of their own
					first = false
					started.Done()
					select {
					case <-all:
					case <-time.After(5 * time.Second):
						return errStop
					}
				}
				return nil
			})
			if err != nil {
				t.Errorf("Generate: %v", err)
			}
		})
	}
	wg.Wait()
	if got := srv.Stats().UpgradesAccepted; got != n {
		t.Fatalf("%d upgrades, want %d", got, n)
	}
	if st := c.Stats(); st.Idle != 2 || st.Open != 2 {
		t.Errorf("idle %d open %d, want 2 2", st.Idle, st.Open)
	}
	waitFor(t, "the simulator to see 2 sockets", func() bool { return srv.Stats().OpenSockets == 2 })
}

func TestIdleSocketsExpire(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{IdleExpiry: 40 * time.Millisecond})
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatalf("the idle socket was not closed: %v", err)
	}
	if st := c.Stats(); st.Idle != 0 || st.Expired != 1 {
		t.Errorf("idle %d expired %d, want 0 1", st.Idle, st.Expired)
	}
	res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	if err != nil || res.Reused {
		t.Fatalf("Generate after expiry: %+v, %v; want success on a new socket", res, err)
	}
}

func TestMaxAgeSocketIsNotLeased(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{MaxAge: time.Nanosecond})
	for range 2 {
		res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
		if err != nil || res.Reused {
			t.Fatalf("Generate: %+v, %v; want success on a new socket", res, err)
		}
	}
	if st := srv.Stats(); st.UpgradesAccepted != 2 || st.ReusedResponses != 0 {
		t.Errorf("simulator: %d upgrades, %d reused; want 2, 0", st.UpgradesAccepted, st.ReusedResponses)
	}
}

// TestIdleSocketClosedByOriginIsDiscarded: the origin ends an idle pooled socket with
// websocket_connection_limit_reached; the socket's reader notices and drops it at once.
func TestIdleSocketClosedByOriginIsDiscarded(t *testing.T) {
	srv := newSim(t, codextest.Options{MaxConnAge: 100 * time.Millisecond})
	c := newClient(t, srv, Config{})
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	waitFor(t, "the idle socket to be discarded", func() bool { st := c.Stats(); return st.Open == 0 })
	if st := c.Stats(); st.Idle != 0 || st.Discarded != 1 {
		t.Errorf("idle %d discarded %d, want 0 1", st.Idle, st.Discarded)
	}
	res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	if err != nil || res.Reused || res.Retried {
		t.Fatalf("Generate: %+v, %v; want success on a fresh socket, no retry", res, err)
	}
}

func TestCloseClientConnectionsDiscardsIdleSockets(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{})
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	srv.CloseClientConnections()
	waitFor(t, "the dropped socket to be discarded", func() bool { return c.Stats().Open == 0 })
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate after the drop: %v", err)
	}
	if got := srv.Stats().UpgradesAccepted; got != 2 {
		t.Errorf("%d upgrades, want 2", got)
	}
}

// TestPooledSocketFailureBeforeFirstEventIsRetried: a pooled socket that fails before any event of
// the request (connection limit, close) is retried once on a fresh socket, invisibly.
func TestPooledSocketFailureBeforeFirstEventIsRetried(t *testing.T) {
	for _, fault := range []codextest.Fault{codextest.FaultConnLimit, codextest.FaultClose1008} {
		t.Run(string(fault), func(t *testing.T) {
			srv := newSim(t, codextest.Options{})
			c := newClient(t, srv, Config{})
			if _, err := c.Generate(context.Background(), createFrame("warm", nil), nil); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			srv.Faults.Next(codextest.AtResponse, 1, fault)
			var types []string
			res, err := c.Generate(context.Background(), createFrame("hi", nil), func(ev Event) error {
				types = append(types, ev.Type)
				return nil
			})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if !res.Retried || res.Reused || res.Attempts != 1 {
				t.Errorf("result %+v: want Retried, not Reused, 1 attempt", res)
			}
			if types[0] != "response.created" {
				t.Errorf("first event %q: the failed socket's events leaked to onEvent", types[0])
			}
			if got, want := outputText(t, res.Response), codextest.Answer("hi", codextest.DefaultWords); got != want {
				t.Errorf("answer %q, want %q", got, want)
			}
			if st := srv.Stats(); st.UpgradesAccepted != 2 {
				t.Errorf("%d upgrades, want 2", st.UpgradesAccepted)
			}
			if st := c.Stats(); st.Retries != 1 {
				t.Errorf("Retries %d, want 1", st.Retries)
			}
		})
	}
}

// TestPooledSocketFailureAfterFirstEventIsNotRetried: once an event arrived, a drop is a 502.
func TestPooledSocketFailureAfterFirstEventIsNotRetried(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{})
	if _, err := c.Generate(context.Background(), createFrame("warm", nil), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	srv.Faults.Next(codextest.AtResponse, 1, codextest.FaultDrop)
	_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	wantError(t, err, 502, schemas.CodeUpstreamError)
	if st := srv.Stats(); st.UpgradesAccepted != 1 {
		t.Errorf("%d upgrades, want 1 (no retry)", st.UpgradesAccepted)
	}
}

func TestOnEventErrorAborts(t *testing.T) {
	srv := newSim(t, codextest.Options{Words: 20})
	c := newClient(t, srv, Config{})
	n := 0
	_, err := c.Generate(context.Background(), createFrame("hi", nil), func(Event) error {
		if n++; n == 3 {
			return errStop
		}
		return nil
	})
	if err != errStop {
		t.Fatalf("got %v, want the callback's error as it is", err)
	}
	if n != 3 {
		t.Errorf("onEvent called %d times, want 3", n)
	}
	if st := c.Stats(); st.Open != 0 || st.Idle != 0 {
		t.Errorf("open %d idle %d after abort, want the socket dropped", st.Open, st.Idle)
	}
}

func TestFirstEventTimeout(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{IdleTimeout: 50 * time.Millisecond})
	// The simulator ignores frame types it does not know: no event ever comes.
	_, err := c.Generate(context.Background(), []byte(`{"type":"response.nothing"}`), nil)
	e := wantError(t, err, 504, schemas.CodeUpstreamTimeout)
	if !strings.Contains(e.Message, "first event") {
		t.Errorf("message %q does not say it was the first event", e.Message)
	}
	if st := c.Stats(); st.Open != 0 {
		t.Errorf("open %d after timeout, want 0", st.Open)
	}
}

func TestIdleTimeoutBetweenEvents(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{IdleTimeout: 50 * time.Millisecond})
	events := 0
	_, err := c.Generate(context.Background(), createFrame("hi", map[string]string{"sim_fault": "stall"}),
		func(Event) error { events++; return nil })
	e := wantError(t, err, 504, schemas.CodeUpstreamTimeout)
	if events != 1 || strings.Contains(e.Message, "first event") {
		t.Errorf("%d events, message %q: want 1 event then an idle timeout", events, e.Message)
	}
}

func TestContextEndsGeneration(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{})
	stall := createFrame("hi", map[string]string{"sim_fault": "stall"})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := c.Generate(ctx, stall, func(Event) error { cancel(); return nil })
		if err != context.Canceled {
			t.Fatalf("got %v, want context.Canceled unwrapped", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.Generate(ctx, stall, nil)
		if err != context.DeadlineExceeded {
			t.Fatalf("got %v, want context.DeadlineExceeded unwrapped", err)
		}
	})
	t.Run("during upgrade", func(t *testing.T) {
		srv.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultHangUpgrade)
		c2 := newClient(t, srv, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c2.Generate(ctx, stall, nil)
		if err != context.DeadlineExceeded {
			t.Fatalf("got %v, want context.DeadlineExceeded unwrapped", err)
		}
		srv.CloseClientConnections() // release the hung upgrade
	})
	if st := c.Stats(); st.Open != 0 {
		t.Errorf("open %d, want 0: a cancelled generation must drop its socket", st.Open)
	}
}

func TestCloseEndsThePool(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c, err := New(Config{URL: srv.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	// A generation in flight at Close finishes, and its socket is closed rather than pooled.
	release := make(chan struct{})
	inFlight := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		first := true
		_, err := c.Generate(context.Background(), createFrame("slow", nil), func(Event) error {
			if first {
				first = false
				close(inFlight)
				<-release
			}
			return nil
		})
		done <- err
	}()
	<-inFlight
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a generation was in flight")
	case <-time.After(20 * time.Millisecond): // a negative check: nothing to wait on but time
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("in-flight generation: %v", err)
	}
	<-closed
	if st := c.Stats(); st.Open != 0 || st.Idle != 0 {
		t.Errorf("after Close: open %d idle %d, want 0 0", st.Open, st.Idle)
	}
	_, err = c.Generate(context.Background(), createFrame("hi", nil), nil)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Generate after Close: %v, want ErrClosed", err)
	}
	wantError(t, err, 503, schemas.CodeUnavailable)
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid; else a substring of the error
		url  string
	}{
		{name: "no token", cfg: Config{}, want: "no token"},
		{name: "default URL", cfg: Config{Token: "t"}, url: "wss://chatgpt.com/backend-api/codex/responses"},
		{name: "http", cfg: Config{Token: "t", URL: "http://127.0.0.1:9/x"}, url: "ws://127.0.0.1:9/x"},
		{name: "wss kept", cfg: Config{Token: "t", URL: "wss://h/x"}, url: "wss://h/x"},
		{name: "bad scheme", cfg: Config{Token: "t", URL: "ftp://h/x"}, want: "scheme"},
		{name: "no host", cfg: Config{Token: "t", URL: "https:///x"}, want: "no host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.cfg.URL != tc.url {
				t.Errorf("URL %q, want %q", c.cfg.URL, tc.url)
			}
		})
	}
}
