package queue

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
)

// TestGateLinkSharesAndSurvivesGarbage: two gates linked over a real NATS server see each other
// as peers; garbage on the subject is counted and changes nothing; a closed link's peer expires.
func TestGateLinkSharesAndSurvivesGarbage(t *testing.T) {
	ns := startServer(t)
	subject := GateSubject("test\x00" + t.Name())
	cfg := gate.Config{ReportInterval: 20 * time.Millisecond}
	ga, gb := gate.New(cfg), gate.New(cfg)
	la, err := LinkGate(connect(t, ns), subject, ga, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	lb, err := LinkGate(connect(t, ns), subject, gb, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "each gate to count the other as a peer", func() bool {
		return ga.Snapshot().Peers == 1 && gb.Snapshot().Peers == 1
	})
	nc := connect(t, ns)
	for _, junk := range [][]byte{nil, []byte("garbage"), make([]byte, 62), make([]byte, 4096)} {
		if err := nc.Publish(subject, junk); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the garbage to be counted invalid", func() bool { return la.Stats().Invalid >= 4 && lb.Stats().Invalid >= 4 })
	if p := ga.Snapshot().Peers; p != 1 {
		t.Errorf("after garbage: %d peers, want 1", p)
	}
	lb.Close()
	waitFor(t, "the silent peer to expire", func() bool { return ga.Snapshot().Peers == 0 })
	if st := la.Stats(); st.Published == 0 || st.Received == 0 || st.Subject != subject {
		t.Errorf("link stats %+v", st)
	}
}

func TestGateScopeSubject(t *testing.T) {
	if _, ok := GateScopeSubject("process", "id"); ok {
		t.Error("process scope shares")
	}
	host, _ := GateScopeSubject("host", "id-a")
	acct, _ := GateScopeSubject("account", "id-a")
	other, _ := GateScopeSubject("account", "id-b")
	custom, _ := GateScopeSubject("team-1", "id-a")
	if host == acct || acct == other || custom == acct || len(host) != len(GateSubjectPrefix)+25 {
		t.Errorf("subjects %q %q %q %q: want distinct, fixed-length subjects", host, acct, other, custom)
	}
}

// TestGateLinkPublishesAtOnce: a link's first signal goes out when it starts, not a report
// interval later (peers trust a gate only after a few, and a burst often comes right after the
// workers start), and then at the joining cadence, a quarter interval.
func TestGateLinkPublishesAtOnce(t *testing.T) {
	ns := startServer(t)
	subject := GateSubject("test\x00" + t.Name())
	nc := connect(t, ns)
	got := make(chan time.Time, 16)
	sub, err := nc.Subscribe(subject, func(*nats.Msg) {
		select {
		case got <- time.Now():
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const interval = 4 * time.Second
	g := gate.New(gate.Config{ReportInterval: interval})
	t0 := time.Now()
	l, err := LinkGate(connect(t, ns), subject, g, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, want := range []time.Duration{interval / 4, interval / 2} { // the first at once, the second a quarter interval on
		select {
		case at := <-got:
			if d := at.Sub(t0); d >= want {
				t.Errorf("signal %d after %v, want before %v", i+1, d, want)
			}
		case <-time.After(interval):
			t.Fatalf("no signal %d within %v", i+1, interval)
		}
	}
}
