package codex

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// continueFrame is createFrame continuing prev.
func continueFrame(prev, prompt string) []byte {
	var m map[string]any
	_ = json.Unmarshal(createFrame(prompt, nil), &m)
	m["previous_response_id"] = prev
	b, _ := json.Marshal(m)
	return b
}

func responseID(t *testing.T, res *Result) string {
	t.Helper()
	var r struct{ ID string }
	if err := json.Unmarshal(res.Response, &r); err != nil || r.ID == "" {
		t.Fatalf("no response id in %s", res.Response)
	}
	return r.ID
}

func TestPinKeepsItsSocket(t *testing.T) {
	srv := newSim(t, codextest.Options{Words: 2})
	c := newClient(t, srv, Config{})
	ctx := context.Background()
	p := c.Pin()
	res, err := p.Generate(ctx, createFrame("one", nil), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another generation meanwhile must not get the pinned socket.
	if _, err := c.Generate(ctx, createFrame("other", nil), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err = p.Generate(ctx, continueFrame(responseID(t, res), "more"), true, nil)
		if err != nil {
			t.Fatalf("continuation %d: %v", i+1, err)
		}
	}
	st := srv.Stats()
	if st.Continued != 3 || st.UpgradesAccepted != 2 {
		t.Errorf("simulator: %d continued, %d upgrades; want 3 and 2 (one pinned, one pooled)", st.Continued, st.UpgradesAccepted)
	}
	if cs := c.Stats(); cs.Pinned != 1 || cs.Idle != 1 {
		t.Errorf("client: %d pinned, %d idle; want 1 and 1", cs.Pinned, cs.Idle)
	}
	p.Release()
	if cs := c.Stats(); cs.Pinned != 0 || cs.Idle != 2 {
		t.Errorf("after Release: %d pinned, %d idle; want 0 and 2 (back in the pool)", cs.Pinned, cs.Idle)
	}
	if _, err := p.Generate(ctx, createFrame("again", nil), false, nil); !errors.Is(err, ErrPinLost) {
		t.Errorf("Generate after Release: %v, want ErrPinLost", err)
	}
}

func TestPinLostSocket(t *testing.T) {
	tests := []struct {
		name         string
		continuation bool
		wantErr      error
	}{
		{"continuation fails at once", true, ErrPinLost},
		{"full resend opens a new socket", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newSim(t, codextest.Options{Words: 2})
			c := newClient(t, srv, Config{})
			p := c.Pin()
			defer p.Release()
			res, err := p.Generate(context.Background(), createFrame("one", nil), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv.CloseClientConnections()
			waitFor(t, "the pinned socket to end", func() bool { return c.Stats().Open == 0 || pinEnded(p) })
			frame := createFrame("one", nil)
			if tt.continuation {
				frame = continueFrame(responseID(t, res), "two")
			}
			start := time.Now()
			_, err = p.Generate(context.Background(), frame, tt.continuation, nil)
			if !errors.Is(err, tt.wantErr) && !(tt.wantErr == nil && err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if d := time.Since(start); tt.continuation && d > time.Second {
				t.Errorf("ErrPinLost after %v, want at once", d)
			}
		})
	}
}

// pinEnded reports whether the pin's socket has seen its end.
func pinEnded(p *Pin) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cn == nil || p.cn.ended.Load()
}

func TestCloseClosesPinnedSockets(t *testing.T) {
	srv := newSim(t, codextest.Options{Words: 2})
	c, err := New(Config{URL: srv.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pin()
	if _, err := p.Generate(context.Background(), createFrame("one", nil), false, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on a pinned socket")
	}
	if st := c.Stats(); st.Open != 0 || st.Pinned != 0 {
		t.Errorf("after Close: %d open, %d pinned; want 0", st.Open, st.Pinned)
	}
	p.Release() // after Close: nothing left to do, and no panic
}

// TestQuietSocketsArePinged: an idle pooled socket and a socket pinned to a session between its
// turns get a ping every PingInterval (counted by the simulator, which answers each with a
// pong), and stay usable: the next generation reuses the socket.
func TestQuietSocketsArePinged(t *testing.T) {
	ctx := context.Background()
	waitPings := func(t *testing.T, srv *codextest.Server, n int64) {
		t.Helper()
		testutil.WaitFor(t, 5*time.Second, "pings at the simulator", func() bool { return srv.Stats().Pings >= n })
	}
	t.Run("pinned", func(t *testing.T) {
		srv := newSim(t, codextest.Options{Words: 2})
		c := newClient(t, srv, Config{PingInterval: 10 * time.Millisecond})
		p := c.Pin()
		res, err := p.Generate(ctx, createFrame("one", nil), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitPings(t, srv, 3)
		if _, err := p.Generate(ctx, continueFrame(responseID(t, res), "more"), true, nil); err != nil {
			t.Fatalf("continuation after the pings: %v", err)
		}
		if st := srv.Stats(); st.UpgradesAccepted != 1 || st.Continued != 1 {
			t.Errorf("simulator: %d upgrades, %d continued; want 1 and 1 (the pinned socket kept)", st.UpgradesAccepted, st.Continued)
		}
	})
	t.Run("idle", func(t *testing.T) {
		srv := newSim(t, codextest.Options{Words: 2})
		c := newClient(t, srv, Config{PingInterval: 10 * time.Millisecond})
		if _, err := c.Generate(ctx, createFrame("one", nil), nil); err != nil {
			t.Fatal(err)
		}
		waitPings(t, srv, 3)
		res, err := c.Generate(ctx, createFrame("two", nil), nil)
		if err != nil || !res.Reused {
			t.Fatalf("generation after the pings: %+v, %v; want it on the pooled socket", res, err)
		}
	})
}
