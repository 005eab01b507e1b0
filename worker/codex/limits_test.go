package codex

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

func TestParseLimitHeaders(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name   string
		header map[string]string
		want   []LimitWindow
	}{
		{"none", map[string]string{"Content-Type": "text/plain"}, nil},
		{"primary and secondary", map[string]string{
			"X-Codex-Primary-Used-Percent": "42.5", "X-Codex-Primary-Window-Minutes": "300",
			"X-Codex-Primary-Reset-At":       "1700003600",
			"X-Codex-Secondary-Used-Percent": "7", "X-Codex-Secondary-Window-Minutes": "10080",
			"X-Codex-Secondary-Reset-After-Seconds": "60",
		}, []LimitWindow{
			{Limit: "codex", Minutes: 300, UsedPercent: 42.5, ResetAt: time.Unix(1_700_003_600, 0)},
			{Limit: "codex", Minutes: 10080, UsedPercent: 7, ResetAt: now.Add(time.Minute)},
		}},
		{"reset-at wins over reset-after", map[string]string{
			"x-codex-primary-used-percent": "1", "x-codex-primary-reset-at": "1700000010",
			"x-codex-primary-reset-after-seconds": "999",
		}, []LimitWindow{{Limit: "codex", UsedPercent: 1, ResetAt: now.Add(10 * time.Second)}}},
		{"another family", map[string]string{
			"x-codex-other-primary-used-percent": "100", "x-codex-other-primary-window-minutes": "60",
		}, []LimitWindow{{Limit: "codex_other", Minutes: 60, UsedPercent: 100}}},
		{"garbage ignored", map[string]string{
			"x-codex-primary-used-percent": "lots", "x-codex-secondary-used-percent": "NaN",
			"x-codex-other-secondary-used-percent": "3", "x-codex-other-secondary-window-minutes": "-5",
			"x-codex-other-secondary-reset-at": "soon",
		}, []LimitWindow{{Limit: "codex_other", UsedPercent: 3}}},
		{"absurd reset clamped", map[string]string{
			"x-codex-primary-used-percent": "100", "x-codex-primary-reset-at": "1e300",
		}, []LimitWindow{{Limit: "codex", UsedPercent: 100, ResetAt: now.Add(maxRetryAfter)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			l, ok := ParseLimitHeaders(h, now)
			if ok != (len(tt.want) > 0) || !reflect.DeepEqual(l.Windows, tt.want) {
				t.Errorf("got %+v (ok %v), want %+v", l.Windows, ok, tt.want)
			}
		})
	}
}

func TestParseLimitsEvent(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name, event string
		want        Limits
		ok          bool
	}{
		{"both windows",
			`{"type":"codex.rate_limits","plan_type":"pro","rate_limits":{"primary":{"used_percent":42.0,"window_minutes":300,"reset_at":1700003600},"secondary":{"used_percent":3,"window_minutes":10080,"resets_in_seconds":120}},"credits":null}`,
			Limits{PlanType: "pro", Windows: []LimitWindow{
				{Limit: "codex", Minutes: 300, UsedPercent: 42, ResetAt: time.Unix(1_700_003_600, 0)},
				{Limit: "codex", Minutes: 10080, UsedPercent: 3, ResetAt: now.Add(2 * time.Minute)},
			}}, true},
		{"named limit, resets_at",
			`{"type":"codex.rate_limits","metered_limit_name":"Codex-Spark","rate_limits":{"primary":{"used_percent":"12.5","resets_at":1700000060}}}`,
			Limits{Windows: []LimitWindow{{Limit: "codex_spark", UsedPercent: 12.5, ResetAt: now.Add(time.Minute)}}}, true},
		{"no windows", `{"type":"codex.rate_limits","rate_limits":{"primary":null}}`, Limits{}, false},
		{"another event", `{"type":"response.created","rate_limits":{"primary":{"used_percent":1}}}`, Limits{}, false},
		{"not JSON", `{"type":`, Limits{}, false},
		{"used not a number", `{"type":"codex.rate_limits","rate_limits":{"primary":{"used_percent":"x"}}}`, Limits{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLimitsEvent([]byte(tt.event), now)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v (ok %v), want %+v (ok %v)", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestOnLimitsFromSimulator checks both hooks against the simulator's account: the 101's
// x-codex-* headers and the codex.rate_limits event before each response reach OnLimits, keyed by
// window length.
func TestOnLimitsFromSimulator(t *testing.T) {
	srv := newSim(t, codextest.Options{Accounts: []codextest.Account{{
		Name: "a", Token: testToken,
		Windows: []codextest.Window{{Length: 5 * time.Hour, Budget: 4}, {Length: 7 * 24 * time.Hour, Budget: 100}},
	}}})
	var mu sync.Mutex
	var got []Limits
	c := newClient(t, srv, Config{OnLimits: func(l Limits) {
		mu.Lock()
		got = append(got, l)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		if _, err := c.Generate(ctx, []byte(`{"type":"response.create","input":"hi"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// One upgrade (headers), then one event per response: 0% before the first, 25% before the second.
	if len(got) != 3 {
		t.Fatalf("got %d reports, want 3 (the upgrade's headers, then one event per response): %+v", len(got), got)
	}
	want := []float64{0, 0, 25}
	for i, l := range got {
		if len(l.Windows) != 2 {
			t.Fatalf("report %d: %+v, want two windows", i, l)
		}
		w := l.Windows[0]
		if w.Limit != "codex" || w.Minutes != 300 || w.UsedPercent != want[i] || w.ResetAt.IsZero() {
			t.Errorf("report %d, 5h window: got %+v, want limit codex, 300 minutes, %v%% used, a reset time", i, w, want[i])
		}
		if l.Windows[1].Minutes != 7*24*60 {
			t.Errorf("report %d, weekly window: got %+v, want 10080 minutes", i, l.Windows[1])
		}
	}
	if got[0].PlanType != "" || got[1].PlanType != "pro" {
		t.Errorf("plan types %q, %q; want none from headers and pro from the event", got[0].PlanType, got[1].PlanType)
	}
}
