package codextest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestWindowRoll is the window arithmetic alone, at chosen instants.
func TestWindowRoll(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	const L = 5 * time.Hour
	tests := []struct {
		name      string
		start     time.Time // zero = never used
		used      int
		now       time.Time
		wantStart time.Time
		wantUsed  int
	}{
		{"first use starts the window", time.Time{}, 0, t0, t0, 0},
		{"inside the period", t0, 3, t0.Add(L - time.Nanosecond), t0, 3},
		{"at the reset", t0, 3, t0.Add(L), t0.Add(L), 0},
		{"periods later: start + k·Length", t0, 3, t0.Add(3*L + time.Minute), t0.Add(3 * L), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := windowState{Window: Window{Length: L, Budget: 4}, start: tt.start, used: tt.used}
			w.roll(tt.now)
			if !w.start.Equal(tt.wantStart) || w.used != tt.wantUsed {
				t.Errorf("after roll: start %v used %d, want start %v used %d", w.start, w.used, tt.wantStart, tt.wantUsed)
			}
		})
	}
}

func TestWindowReport(t *testing.T) {
	now := time.Unix(1_800_000_000, 250_000_000)
	tests := []struct {
		length      time.Duration
		budget      int
		used        int
		wantMinutes int
		wantPercent float64
	}{
		{5 * time.Hour, 100, 42, 300, 42},
		{7 * 24 * time.Hour, 3, 1, 10080, 100.0 / 3},
		{300 * time.Millisecond, 2, 5, 1, 100}, // over budget reports 100; short windows 1 minute
		{90 * time.Second, 0, 7, 2, 0},         // unlimited reports 0; 1.5 minutes rounds to 2
	}
	for _, tt := range tests {
		w := windowState{Window: Window{Length: tt.length, Budget: tt.budget}, start: now, used: tt.used}
		got := w.snapshot()
		if got.WindowMinutes != tt.wantMinutes || got.UsedPercent != tt.wantPercent || got.Used != tt.used || !got.ResetAt.Equal(now.Add(tt.length)) {
			t.Errorf("%v budget %d used %d: %+v, want %d minutes, %v%%", tt.length, tt.budget, tt.used, got, tt.wantMinutes, tt.wantPercent)
		}
	}
	if got, want := unixCeil(now), int64(1_800_000_001); got != want {
		t.Errorf("unixCeil(%v) = %d, want %d (rounded up)", now, got, want)
	}
	if got := unixCeil(time.Unix(5, 0)); got != 5 {
		t.Errorf("unixCeil(5s) = %d, want 5", got)
	}
}

func TestAccountTokens(t *testing.T) {
	s := newServer(t, Options{Token: "ignored-with-accounts", Accounts: []Account{{Name: "a", Token: "tok-a"}, {Name: "b", Token: "tok-b"}}})
	l, err := s.Logins.Issue("b")
	if err != nil {
		t.Fatal(err)
	}
	// A signature with one character changed in its middle: the last characters of a base64
	// signature carry padding bits that decoding ignores, and may already be the replacement.
	dot := strings.LastIndexByte(l.AccessToken, '.')
	i := dot + (len(l.AccessToken)-dot)/2
	c := byte('A')
	if l.AccessToken[i] == c {
		c = 'B'
	}
	tampered := l.AccessToken[:i] + string(c) + l.AccessToken[i+1:]
	tests := []struct {
		name   string
		h      http.Header
		want   int
		wantAs string
	}{
		{"static token", bearer("tok-a"), 101, "a"},
		{"issued token", bearer(l.AccessToken), 101, "b"},
		{"Options.Token is ignored", bearer("ignored-with-accounts"), 401, ""},
		{"unknown token", bearer("tok-c"), 401, ""},
		{"no token", nil, 401, ""},
		{"not bearer", http.Header{"Authorization": {"tok-a"}}, 401, ""},
		{"bad signature", bearer(tampered), 401, ""},
		{"id token is no bearer", bearer(l.IDToken), 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Accounts.Stats(tt.wantAs).UpgradesAccepted
			c, resp, err := dial(t, s.URL, tt.h)
			if tt.want == 101 {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				c.Close()
				if got := s.Accounts.Stats(tt.wantAs).UpgradesAccepted; got != before+1 {
					t.Errorf("account %s UpgradesAccepted %d, want %d", tt.wantAs, got, before+1)
				}
				return
			}
			if resp == nil || resp.StatusCode != tt.want {
				t.Fatalf("dial: err %v resp %v, want %d", err, resp, tt.want)
			}
			if code := rejectBody(t, resp)["code"]; code != "invalid_api_key" {
				t.Errorf("code %v, want invalid_api_key", code)
			}
		})
	}
	if st := s.Stats(); st.Unauthorized != 6 || len(st.Accounts) != 2 {
		t.Errorf("stats %+v, want 6 unauthorized and 2 accounts", st)
	}
}

func TestPerAccountUpgradeLimits(t *testing.T) {
	s := newServer(t, Options{
		UpgradeRate: slowRate, UpgradeBurst: 4, RetryAfter: time.Second,
		Accounts: []Account{
			{Name: "a", Token: "tok-a", UpgradeRate: slowRate, UpgradeBurst: 2},
			{Name: "b", Token: "tok-b", UpgradeRate: slowRate}, // burst max(1, ceil(rate)) = 1
			{Name: "c", Token: "tok-c"},                        // the global bucket only
		},
	})
	steps := []struct {
		token string
		want  int
	}{
		{"tok-a", 101}, {"tok-a", 101}, {"tok-a", 403}, // a's own bucket of 2
		{"tok-b", 101}, {"tok-b", 403}, // b's bucket of 1, independent of a's
		{"tok-c", 101}, // the 4th and last global token (refusals above took none)
		{"tok-c", 403}, // c has no bucket of its own: the global one refuses
	}
	for i, st := range steps {
		c, resp, err := dial(t, s.URL, bearer(st.token))
		switch {
		case st.want == 101 && err != nil:
			t.Fatalf("step %d (%s): %v, want 101", i, st.token, err)
		case st.want == 101:
			c.Close()
		case resp == nil || resp.StatusCode != st.want:
			t.Fatalf("step %d (%s): err %v resp %v, want %d", i, st.token, err, resp, st.want)
		case resp.Header.Get("Retry-After") != "1":
			t.Errorf("step %d: Retry-After %q, want 1", i, resp.Header.Get("Retry-After"))
		}
	}
	want := map[string][3]int64{"a": {2, 1, 1}, "b": {1, 1, 1}, "c": {1, 1, 1}}
	for name, w := range want {
		as := s.Accounts.Stats(name)
		if got := [3]int64{as.UpgradesAccepted, as.UpgradesRejected, as.Rejected403}; got != w {
			t.Errorf("account %s accepted/rejected/403 %v, want %v", name, got, w)
		}
	}
	if st := s.Stats(); st.Rejected403 != 3 || st.UpgradesAccepted != 4 {
		t.Errorf("stats %+v, want 3 403s, 4 accepted", st)
	}

	// A refusal by the global bucket gives the account's token back.
	s2 := newServer(t, Options{UpgradeRate: slowRate, UpgradeBurst: 1,
		Accounts: []Account{{Name: "a", Token: "tok-a"}, {Name: "b", Token: "tok-b", UpgradeRate: slowRate, UpgradeBurst: 1}}})
	mustDialAs(t, s2, "tok-a") // the only global token
	if _, resp, _ := dial(t, s2.URL, bearer("tok-b")); resp == nil || resp.StatusCode != 403 {
		t.Fatalf("b over the global bucket: %v, want 403", resp)
	}
	s2.Limits.SetUpgradeRate("", 0, 0)
	mustDialAs(t, s2, "tok-b") // b's single token was not spent by the refused upgrade

	if err := s2.Limits.SetUpgradeRate("b", slowRate, 1); err != nil {
		t.Fatal(err)
	}
	mustDialAs(t, s2, "tok-b")
	if _, resp, _ := dial(t, s2.URL, bearer("tok-b")); resp == nil || resp.StatusCode != 403 {
		t.Fatalf("after SetAccountUpgradeLimit: %v, want 403", resp)
	}
	if code, _ := control(t, s2, "POST", "/limit?account=b&rate=0"); code != 200 {
		t.Fatalf("POST /limit?account=b: %d", code)
	}
	mustDialAs(t, s2, "tok-b")
	if err := s2.Limits.SetUpgradeRate("nobody", 1, 1); err == nil {
		t.Error("SetAccountUpgradeLimit of an unknown account succeeded")
	}
}

func mustDialAs(t *testing.T, s *Server, token string) {
	t.Helper()
	c, resp, err := dial(t, s.URL, bearer(token))
	if err != nil {
		t.Fatalf("dial as %s: %v (%v)", token, err, resp)
	}
	c.Close()
}

// TestUsageReporting checks the x-codex-* headers on the 101 and the codex.rate_limits event that
// leads each response, as the windows fill.
func TestUsageReporting(t *testing.T) {
	s := newServer(t, Options{Words: 1, Accounts: []Account{{
		Name: "a", Token: "tok-a", PlanType: "plus",
		Windows: []Window{{Length: 5 * time.Hour, Budget: 4}, {Length: 7 * 24 * time.Hour}},
	}, {Name: "plain", Token: "tok-p"}}})
	if err := s.Accounts.SetUsage("a", 0, 1); err != nil {
		t.Fatal(err)
	}
	c, resp, err := dial(t, s.URL, bearer("tok-a"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h := resp.Header
	wantHeaders := map[string]string{
		"x-codex-primary-used-percent":     "25",
		"x-codex-primary-window-minutes":   "300",
		"x-codex-secondary-used-percent":   "0",
		"x-codex-secondary-window-minutes": "10080",
		"x-codex-credits-has-credits":      "false",
	}
	for k, want := range wantHeaders {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for _, slot := range []struct {
		name   string
		length time.Duration
	}{{"primary", 5 * time.Hour}, {"secondary", 7 * 24 * time.Hour}} {
		resetAt, _ := strconv.ParseInt(h.Get("x-codex-"+slot.name+"-reset-at"), 10, 64)
		after, _ := strconv.ParseInt(h.Get("x-codex-"+slot.name+"-reset-after-seconds"), 10, 64)
		want := now.Add(slot.length).Unix()
		if resetAt < want-5 || resetAt > want+1 {
			t.Errorf("%s reset-at %d, want about %d", slot.name, resetAt, want)
		}
		if w := int64(slot.length.Seconds()); after < w-5 || after > w {
			t.Errorf("%s reset-after-seconds %d, want about %d", slot.name, after, w)
		}
	}

	for i, wantPct := range []float64{25, 50} {
		send(t, c, createFrame("q", nil))
		first := readInfo(t, c)
		checks := map[string]any{
			"type":                                 evRateLimits,
			"plan_type":                            "plus",
			"rate_limits.primary.used_percent":     wantPct,
			"rate_limits.primary.window_minutes":   300.0,
			"rate_limits.secondary.used_percent":   0.0,
			"rate_limits.secondary.window_minutes": 10080.0,
			"credits":                              nil,
		}
		for path, want := range checks {
			if got := first.get(path); got != want {
				t.Errorf("response %d: codex.rate_limits %s = %v, want %v (%s)", i, path, got, want, first.raw)
			}
		}
		if _, ok := first.m["sequence_number"]; ok {
			t.Errorf("codex.rate_limits %s carries a sequence_number; it is not part of the response", first.raw)
		}
		evs := readResponse(t, c)
		if evs[0].typ() != evCreated || evs[0].get("sequence_number") != 0.0 {
			t.Errorf("after codex.rate_limits: %s, want response.created numbered 0", evs[0].raw)
		}
	}
	as := s.Accounts.Stats("a")
	if as.Windows[0].Used != 3 || as.Windows[1].Used != 2 || as.Windows[0].UsedPercent != 75 || as.Completed != 2 {
		t.Errorf("account stats %+v, want windows used 3 and 2 (75%%), 2 completed", as)
	}

	// No windows: no headers, no event.
	c2, resp, err := dial(t, s.URL, bearer("tok-p"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("x-codex-primary-used-percent"); got != "" {
		t.Errorf("account without windows sent x-codex-primary-used-percent %q", got)
	}
	send(t, c2, createFrame("q", nil))
	if e := readEvent(t, c2); e.typ() != evCreated {
		t.Errorf("account without windows: first event %s, want response.created", e.raw)
	}
}

// readInfo reads one event that need not carry a sequence number.
func readInfo(t *testing.T, c *websocket.Conn) event {
	t.Helper()
	_, data, err := readFrame(t, c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("frame %q is not JSON: %v", data, err)
	}
	return event{raw: data, m: m}
}

func mustDialAsConn(t *testing.T, s *Server, token string) *websocket.Conn {
	t.Helper()
	c, resp, err := dial(t, s.URL, bearer(token))
	if err != nil {
		t.Fatalf("dial as %s: %v (%v)", token, err, resp)
	}
	return c
}

func TestUsageExhaustionAndReset(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		s := newServer(t, Options{Words: 1, Accounts: []Account{
			{Name: "a", Token: "tok-a", Windows: []Window{{Length: time.Hour, Budget: 2}, {Length: 24 * time.Hour, Budget: 10}}},
			{Name: "b", Token: "tok-b", Windows: []Window{{Length: time.Hour, Budget: 2}}},
		}})
		a := mustDialAsConn(t, s, "tok-a")
		for range 2 {
			send(t, a, createFrame("q", nil))
			readInfo(t, a)
			if evs := readResponse(t, a); evs[len(evs)-1].typ() != evCompleted {
				t.Fatalf("within budget: %s", evs[len(evs)-1].raw)
			}
		}
		s.Faults.Next(AtResponse, 1, FaultFailed) // must survive the refusal: it is not drawn
		send(t, a, createFrame("q", nil))
		e := readEvent(t, a)
		resetsAt, _ := e.get("error.resets_at").(float64)
		resetsIn, _ := e.get("error.resets_in_seconds").(float64)
		checks := []bool{
			e.typ() == "error", e.get("status") == 429.0,
			e.get("error.type") == codeUsageLimit, e.get("error.code") == codeUsageLimit,
			e.get("error.plan_type") == "pro", e.get("error.message") != "",
			resetsIn > 3500 && resetsIn <= 3600,
			resetsAt >= float64(time.Now().Add(59*time.Minute).Unix()),
		}
		for i, ok := range checks {
			if !ok {
				t.Errorf("check %d failed on %s", i, e.raw)
			}
		}
		// The account's other windows, and other accounts, are untouched.
		b := mustDialAsConn(t, s, "tok-b")
		send(t, b, createFrame("q", nil))
		readInfo(t, b)
		if evs := readResponse(t, b); evs[len(evs)-1].typ() != evFailed {
			t.Errorf("other account: %s, want the queued fault's response.failed", evs[len(evs)-1].raw)
		}
		as := s.Accounts.Stats("a")
		if as.UsageLimited != 1 || as.Responses != 2 || as.Windows[1].Used != 2 {
			t.Errorf("account a %+v, want 1 usage limited, 2 responses, daily window used 2", as)
		}
		if st := s.Stats(); st.UsageLimited != 1 || st.Responses != 3 {
			t.Errorf("stats %+v, want 1 usage limited of 4 creates, 3 responses", st)
		}
	})
	t.Run("reset", func(t *testing.T) {
		const L = 300 * time.Millisecond
		s := newServer(t, Options{Words: 1, Accounts: []Account{{Name: "a", Token: "tok-a", Windows: []Window{{Length: L, Budget: 1}}}}})
		c := mustDialAsConn(t, s, "tok-a")
		var refusedAt, resetAt time.Time
		// Fill the window and be refused inside the same period; a slow machine may cross a reset
		// between the two, so try again.
		for try := 0; refusedAt.IsZero(); try++ {
			if try == 20 {
				t.Fatal("never refused within one 300ms period")
			}
			if err := s.Accounts.SetUsage("a", 0, 1); err != nil {
				t.Fatal(err)
			}
			resetAt = s.Accounts.Stats("a").Windows[0].ResetAt
			send(t, c, createFrame("q", nil))
			if e := readInfo(t, c); e.typ() == "error" {
				if e.get("error.code") != codeUsageLimit {
					t.Fatalf("got %s, want usage_limit_reached", e.raw)
				}
				refusedAt = time.Now()
			} else {
				readResponse(t, c)
			}
		}
		// Poll until the window has reset and the account answers again.
		deadline := time.Now().Add(ioTimeout)
		for {
			send(t, c, createFrame("q", nil))
			e := readInfo(t, c)
			if e.typ() == evRateLimits {
				if got := e.get("rate_limits.primary.used_percent"); got != 0.0 {
					t.Errorf("after the reset used_percent %v, want 0", got)
				}
				readResponse(t, c)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still refused %v after the reset at %v", time.Since(refusedAt), resetAt)
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
		if now := time.Now(); now.Before(resetAt) {
			t.Errorf("served at %v, before the window's reset at %v", now, resetAt)
		}
		if as := s.Accounts.Stats("a"); as.Windows[0].Used != 1 || as.UsageLimited < 1 {
			t.Errorf("account %+v, want 1 used in the new period", as)
		}
	})
}

func TestSetUsageAndAccountControl(t *testing.T) {
	s := newServer(t, Options{Accounts: []Account{{Name: "a", Token: "tok-a", Windows: []Window{{Length: time.Hour, Budget: 10}}}}})
	for _, tt := range []struct {
		acct         string
		window, used int
	}{{"nobody", 0, 1}, {"a", 1, 1}, {"a", -1, 1}, {"a", 0, -1}} {
		if err := s.Accounts.SetUsage(tt.acct, tt.window, tt.used); err == nil {
			t.Errorf("SetUsage(%q, %d, %d) succeeded, want an error", tt.acct, tt.window, tt.used)
		}
	}
	if code, _ := control(t, s, "POST", "/usage?account=a&window=0&used=7"); code != 200 {
		t.Fatalf("POST /usage: %d", code)
	}
	code, m := control(t, s, "GET", "/accounts")
	a, _ := m["a"].(map[string]any)
	w0, _ := a["windows"].([]any)
	if code != 200 || len(w0) != 1 || w0[0].(map[string]any)["used"] != 7.0 || w0[0].(map[string]any)["used_percent"] != 70.0 {
		t.Fatalf("GET /accounts: %d %v, want window 0 used 7 (70%%)", code, m)
	}
	bad := []struct {
		path string
		want int
	}{
		{"/usage?account=nobody&window=0&used=1", 404},
		{"/usage?account=a&window=3&used=1", 400},
		{"/usage?account=a&window=0", 400},
		{"/usage?account=a&window=0&used=x", 400},
		{"/limit?account=nobody&rate=1", 404},
	}
	for _, b := range bad {
		if code, m := control(t, s, "POST", b.path); code != b.want || m["error"] == nil {
			t.Errorf("POST %s: %d %v, want %d with an error body", b.path, code, m, b.want)
		}
	}
	_, st := control(t, s, "GET", "/stats")
	if _, ok := st["accounts"].(map[string]any)["a"]; !ok {
		t.Errorf("GET /stats lacks accounts.a: %v", st)
	}
	plain := newServer(t, Options{})
	if code, m := control(t, plain, "GET", "/accounts"); code != 200 || len(m) != 0 {
		t.Errorf("GET /accounts without accounts: %d %v, want 200 {}", code, m)
	}
	if _, st := control(t, plain, "GET", "/stats"); st["accounts"] != nil {
		t.Errorf("stats without accounts carry accounts: %v", st["accounts"])
	}
}

func TestInvalidAccounts(t *testing.T) {
	tests := []struct {
		accts []Account
		want  string
	}{
		{[]Account{{Token: "x"}}, "accounts[0].name: required"},
		{[]Account{{Name: "a"}, {Name: "a"}}, "accounts[1].name"},
		{[]Account{{Name: "a", Token: "t"}, {Name: "b", Token: "t"}}, "accounts[1].token"},
		{[]Account{{Name: "a", UpgradeRate: -1}}, "accounts[0].upgrade_rate"},
		{[]Account{{Name: "a", UpgradeBurst: -1}}, "accounts[0].upgrade_burst"},
		{[]Account{{Name: "a", Windows: []Window{{Length: 0}}}}, "accounts[0].windows[0].length"},
		{[]Account{{Name: "a", Windows: []Window{{Length: time.Hour, Budget: -1}}}}, "accounts[0].windows[0].budget"},
		{[]Account{{Name: "a", Windows: []Window{{Length: 1}, {Length: 1}, {Length: 1}}}}, "accounts[0].windows: at most 2"},
	}
	for _, tt := range tests {
		s, err := Listen("", Options{Accounts: tt.accts})
		if err == nil {
			s.Close()
			t.Errorf("Listen(%+v) succeeded, want an error naming %s", tt.accts, tt.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "codextest: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Listen(%+v): %v, want a codextest: error naming %s", tt.accts, err, tt.want)
		}
	}
}
