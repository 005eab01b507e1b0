package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// codexUsage is the Codex CLI's RateLimitStatusPayload (codex-rs backend-client, from the
// backend's OpenAPI models): plan_type required, windows with integer fields. Decoding into it
// with unknown fields refused is what the CLI's serde does, minus its tolerance.
type codexUsage struct {
	PlanType  string `json:"plan_type"`
	RateLimit *struct {
		Allowed         *bool        `json:"allowed"`
		LimitReached    *bool        `json:"limit_reached"`
		PrimaryWindow   *codexWindow `json:"primary_window"`
		SecondaryWindow *codexWindow `json:"secondary_window"`
	} `json:"rate_limit"`
	Credits *struct {
		HasCredits *bool   `json:"has_credits"`
		Unlimited  *bool   `json:"unlimited"`
		Balance    *string `json:"balance"`
	} `json:"credits"`
}

type codexWindow struct {
	UsedPercent        int32 `json:"used_percent"`
	LimitWindowSeconds int32 `json:"limit_window_seconds"`
	ResetAfterSeconds  int32 `json:"reset_after_seconds"`
	ResetAt            int32 `json:"reset_at"`
}

// TestPoolQuota: after requests on both accounts, the gateways answer the usage routes in the
// shape the Codex CLI decodes, and put the x-codex-* headers on replies, with the pool's figures
// (the mean over the accounts), not one account's.
func TestPoolQuota(t *testing.T) {
	p := newMeteredPool(t, true)
	// Before any poll: the routes answer, without windows.
	if resp, b := send(t, p.urls[0], "sk-free", "GET", "/backend-api/wham/usage", ""); resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"primary_window":null`)) {
		t.Fatalf("before a poll: %d %s", resp.StatusCode, b)
	}
	for i := range 4 {
		if resp, b := send(t, p.urls[i%2], "sk-free", "POST", "/v1/responses", respBody); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	// The worker's router spreads the 4 requests over the accounts: a's use is 10% each, b's 5%;
	// the pool's is the mean of what the origin counts for them.
	origin := p.sim.Stats().Accounts
	na, nb := origin["acct-a"].Completed, origin["acct-b"].Completed
	want := (origin["acct-a"].Windows[0].UsedPercent + origin["acct-b"].Windows[0].UsedPercent) / 2
	if want == 0 {
		t.Fatalf("the origin counted no use: %+v", origin)
	}
	p.quotas[0].Poll(ctxT(t, waitTimeout))
	for _, path := range []string{"/backend-api/wham/usage", "/api/codex/usage"} {
		resp, b := send(t, p.urls[0], "sk-free", "GET", path, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		var u codexUsage
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&u); err != nil {
			t.Fatalf("%s: the Codex CLI's payload type does not decode %s: %v", path, b, err)
		}
		if u.PlanType == "" || u.RateLimit == nil || u.RateLimit.Allowed == nil || u.RateLimit.LimitReached == nil ||
			u.Credits == nil || u.Credits.HasCredits == nil || u.Credits.Unlimited == nil {
			t.Fatalf("%s: required fields missing in %s", path, b)
		}
		for name, w := range map[string]*codexWindow{"primary": u.RateLimit.PrimaryWindow, "secondary": u.RateLimit.SecondaryWindow} {
			if w == nil {
				t.Fatalf("%s: no %s window in %s", path, name, b)
			}
			if d := float64(w.UsedPercent) - want; d < -1 || d > 1 {
				t.Errorf("%s %s: used %d%%, want the pool's %.1f%% (a %d, b %d responses)", path, name, w.UsedPercent, want, na, nb)
			}
			if w.ResetAt < int32(time.Now().Unix()) || w.ResetAfterSeconds <= 0 {
				t.Errorf("%s %s: reset at %d after %ds, want a future reset", path, name, w.ResetAt, w.ResetAfterSeconds)
			}
		}
		if u.RateLimit.PrimaryWindow.LimitWindowSeconds != 5*3600 || u.RateLimit.SecondaryWindow.LimitWindowSeconds != 7*24*3600 {
			t.Errorf("%s: windows %+v", path, u.RateLimit)
		}
	}
	resp, b := send(t, p.urls[0], "sk-free", "POST", "/v1/responses", respBody)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	checkHeaders(t, resp.Header, want)
	// The other gateway has not polled: no headers rather than made-up ones.
	resp, _ = send(t, p.urls[1], "sk-free", "POST", "/v1/responses", respBody)
	if v := resp.Header.Get("X-Codex-Primary-Used-Percent"); v != "" {
		t.Errorf("a gateway that has not polled sent x-codex-primary-used-percent %q", v)
	}
	// Without a key: 401, and no figures.
	resp, _ = send(t, p.urls[0], "sk-nobody", "GET", "/backend-api/wham/usage", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unknown key: got %d, want 401", resp.StatusCode)
	}
}

func checkHeaders(t *testing.T, h http.Header, want float64) {
	t.Helper()
	for _, w := range []struct{ name, minutes string }{{"Primary", "300"}, {"Secondary", "10080"}} {
		got, err := strconv.ParseFloat(h.Get("X-Codex-"+w.name+"-Used-Percent"), 64)
		if err != nil || got < want-1 || got > want+1 {
			t.Errorf("x-codex-%s-used-percent %q, want about %.1f", w.name, h.Get("X-Codex-"+w.name+"-Used-Percent"), want)
		}
		if m := h.Get("X-Codex-" + w.name + "-Window-Minutes"); m != w.minutes {
			t.Errorf("x-codex-%s-window-minutes %q, want %s", w.name, m, w.minutes)
		}
		if at, err := strconv.ParseInt(h.Get("X-Codex-"+w.name+"-Reset-At"), 10, 64); err != nil || at < time.Now().Unix() {
			t.Errorf("x-codex-%s-reset-at %q, want a future unix time", w.name, h.Get("X-Codex-"+w.name+"-Reset-At"))
		}
	}
}

// TestWhamUsageWindowsAfterOneRequest: the usage route shows the windows an account reported
// right after the first generation, without waiting for the poller's next round (an hour away
// here): a generation through the gateway makes the route ask the workers again. It answered
// null windows until the next round (5 s by default) before.
func TestWhamUsageWindowsAfterOneRequest(t *testing.T) {
	p := newMeteredPool(t, true)
	if resp, b := send(t, p.urls[0], "sk-free", "GET", "/backend-api/wham/usage", ""); resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"primary_window":null`)) {
		t.Fatalf("before any generation: %d %s, want null windows", resp.StatusCode, b)
	}
	if resp, b := send(t, p.urls[0], "sk-free", "POST", "/v1/responses", respBody); resp.StatusCode != 200 {
		t.Fatalf("generation: %d %s", resp.StatusCode, b)
	}
	_, b := send(t, p.urls[0], "sk-free", "GET", "/backend-api/wham/usage", "")
	var u codexUsage
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatalf("usage body %s: %v", b, err)
	}
	// The origin reports a window's use before the response (0 % on the first), so the figure
	// is 0 here; what was missing was the window itself.
	if u.RateLimit == nil || u.RateLimit.PrimaryWindow == nil || u.RateLimit.PrimaryWindow.LimitWindowSeconds != 5*3600 ||
		u.RateLimit.SecondaryWindow == nil || u.RateLimit.SecondaryWindow.LimitWindowSeconds != 7*24*3600 {
		t.Fatalf("after one generation: %s, want the 5 h and weekly windows with numeric figures", b)
	}
}
