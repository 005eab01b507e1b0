package queue

import (
	"testing"
	"time"

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
