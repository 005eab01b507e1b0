package worker

import (
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestBurstSpreadsOverUnheardAccounts is pick's rule 5, in the state a loaded machine left it in
// (TestAccountsSpreadABurst, four copies at once: account a took 17 of the 30): a answered
// first and runs 3 generations; b and c, not answered for yet, run 1 each and take no second
// until they are. A fourth on a would be more than twice theirs: the generation holds, for at
// most spreadWait; and once b answers, it goes to b.
func TestBurstSpreadsOverUnheardAccounts(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{Accounts: []codextest.Account{
		{Name: "a", Token: "tok-a-0123456789"}, {Name: "b", Token: "tok-b-0123456789"}, {Name: "c", Token: "tok-c-0123456789"},
	}})
	t.Cleanup(sim.Close)
	w, err := New(Config{URL: sim.URL, Accounts: []Account{
		{Name: "a", Token: "tok-a-0123456789"}, {Name: "b", Token: "tok-b-0123456789"}, {Name: "c", Token: "tok-c-0123456789"},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	r := w.router
	a, b, c := r.accounts[0], r.accounts[1], r.accounts[2]
	r.mu.Lock()
	a.lim.answered()
	a.lim.inflight = 3
	for _, x := range []*account{b, c} {
		x.lim.inflight, x.starting = 1, 1
	}
	r.mu.Unlock()

	now := time.Now()
	pick := func(held time.Time) (string, bool) {
		t.Helper()
		got, hold, cerr := r.pick(now, nil, nil, held)
		if cerr != nil {
			t.Fatalf("pick: %v", cerr)
		}
		if got == nil {
			return "", hold
		}
		r.unpick(got)
		return got.name, hold
	}
	if name, hold := pick(time.Time{}); !hold {
		t.Errorf("a runs 3, b and c 1 each and not answered yet: picked %q, want the generation held for them", name)
	}
	if name, hold := pick(now.Add(-spreadWait / 2)); !hold {
		t.Errorf("held for half of spreadWait: picked %q, want still held", name)
	}
	if name, hold := pick(now.Add(-spreadWait)); hold || name != "a" {
		t.Errorf("held for spreadWait: picked %q (hold %v), want a: the spread waits no longer", name, hold)
	}
	r.started(b, true) // its first event
	if name, hold := pick(time.Time{}); hold || name != "b" {
		t.Errorf("b answered: picked %q (hold %v), want b (the most headroom per generation running)", name, hold)
	}
}
