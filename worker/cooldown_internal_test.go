package worker

import (
	"context"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas/validate"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestCooldownSurvivesLowUsageHeaders is target 4 end to end: account a is refused with
// usage_limit_reached (resets in an hour) and cools down; then the origin reports a as nearly
// unused, in the headers of a new upgrade and in a codex.rate_limits event on a's own client.
// The cooldown keeps its end, and requests keep going to b.
func TestCooldownSurvivesLowUsageHeaders(t *testing.T) {
	hour := codextest.Window{Length: time.Hour, Budget: 100}
	sim := codextest.NewServer(codextest.Options{Words: 3, Accounts: []codextest.Account{
		{Name: "a", Token: "tok-a-0123456789", Windows: []codextest.Window{hour}},
		{Name: "b", Token: "tok-b-0123456789", Windows: []codextest.Window{hour}},
	}})
	t.Cleanup(sim.Close)
	if err := sim.Accounts.SetUsage("a", 0, 100); err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{URL: sim.URL, Accounts: []Account{
		{Name: "a", Token: "tok-a-0123456789"}, {Name: "b", Token: "tok-b-0123456789"},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := validate.Request([]byte(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Generate(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	a := w.router.accounts[0]
	cooling := w.AccountStats()[0]
	if !cooling.CoolingDown || time.Until(cooling.CooldownUntil) < 50*time.Minute {
		t.Fatalf("a: %+v, want cooling down for about an hour", cooling)
	}

	// The origin now says a is almost unused: a fresh socket's 101 headers and the event before
	// its response both report 1%.
	if err := sim.Accounts.SetUsage("a", 0, 1); err != nil {
		t.Fatal(err)
	}
	// Straight through a's own client (the router would not send anything to a): a new socket,
	// since the refused one was closed, so the reports come through the real hook.
	direct := sim.Accounts.Stats("a").UpgradesAccepted
	if _, err := a.codex.Generate(ctx, []byte(`{"type":"response.create","model":"m","input":"direct"}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := sim.Accounts.Stats("a").UpgradesAccepted; got != direct+1 {
		t.Fatalf("upgrades of a %d, want %d: the low-usage headers did not arrive", got, direct+1)
	}
	after := w.AccountStats()[0]
	if len(after.Windows) != 1 || after.Windows[0].UsedPercent > 2 {
		t.Fatalf("a's windows %+v, want the 1%% report recorded", after.Windows)
	}
	if !after.CoolingDown || !after.CooldownUntil.Equal(cooling.CooldownUntil) {
		t.Fatalf("after the low-usage reports: cooling %v until %s, want still cooling until %s",
			after.CoolingDown, after.CooldownUntil, cooling.CooldownUntil)
	}
	completed := sim.Accounts.Stats("a").Completed
	for range 5 {
		if _, err := w.Generate(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := sim.Accounts.Stats("a").Completed; got != completed {
		t.Errorf("a completed %d more requests while cooling down, want none", got-completed)
	}
}

// TestIdleLastCallGoesFirst: among the accounts that can start at once, one on its last call with
// nothing running wins over more headroom (its one request uses it up, or its report corrects a
// projection); one that would start later still loses.
func TestIdleLastCallGoesFirst(t *testing.T) {
	last := choice{a: &account{index: 2}, probe: true}
	open := choice{a: &account{index: 0}, share: 0.5, headroom: 1}
	if !last.better(open) || open.better(last) {
		t.Error("an idle account on its last call does not go first")
	}
	last.delay = 5 * startSlack
	if last.better(open) {
		t.Error("an idle account on its last call that starts later wins")
	}
}
