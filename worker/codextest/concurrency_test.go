package codextest

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestMaxConcurrentPerAccount: three sockets of one account answer at once, one of another;
// the stats count responses in flight per account and the most at once.
func TestMaxConcurrentPerAccount(t *testing.T) {
	s := newServer(t, Options{Latency: 2 * time.Second, Words: 2, Accounts: []Account{
		{Name: "a", Token: "tok-a-0123456789"}, {Name: "b", Token: "tok-b-0123456789"}}})
	conns := []string{"tok-a-0123456789", "tok-a-0123456789", "tok-a-0123456789", "tok-b-0123456789"}
	cs := make([]*websocket.Conn, 0, len(conns))
	for i, tok := range conns {
		c := mustDialAsConn(t, s, tok)
		cs = append(cs, c)
		send(t, c, createFrame("concurrency", nil))
		if i == len(conns)-1 {
			deadline := time.Now().Add(5 * time.Second)
			for s.Accounts.Stats("a").InFlight != 3 {
				if time.Now().After(deadline) {
					t.Fatalf("a in flight %d, want 3", s.Accounts.Stats("a").InFlight)
				}
				time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
			}
		}
	}
	for _, c := range cs {
		for {
			if e := readEvent(t, c); e.typ() == "response.completed" {
				break
			}
		}
	}
	a, b := s.Accounts.Stats("a"), s.Accounts.Stats("b")
	if a.MaxConcurrent != 3 || b.MaxConcurrent != 1 {
		t.Errorf("max concurrent a %d, b %d; want 3 and 1", a.MaxConcurrent, b.MaxConcurrent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Accounts.Stats("a").InFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a still has %d in flight after every response completed", s.Accounts.Stats("a").InFlight)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	for _, c := range cs {
		_ = c.Close()
	}
}
