package codextest

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// The usage an account reports, in the three forms the origin uses: response headers, the
// in-band codex.rate_limits event, and the usage_limit_reached error.

// slotNames name Account.Windows[0] and [1] in headers and events.
var slotNames = [...]string{"primary", "secondary"}

// unixCeil is t in unix seconds, rounded up: a client that waits until then has waited long
// enough.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// secondsUntil is the whole seconds from now to t, rounded up, never negative.
func secondsUntil(t, now time.Time) int64 {
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// setUsageHeaders adds the x-codex-* rate-limit headers for usage to h. No windows, no headers.
func setUsageHeaders(h http.Header, usage []WindowStats, now time.Time) {
	if len(usage) == 0 {
		return
	}
	for i, w := range usage {
		p := "x-codex-" + slotNames[i] + "-"
		h.Set(p+"used-percent", strconv.FormatFloat(w.UsedPercent, 'f', -1, 64))
		h.Set(p+"window-minutes", strconv.Itoa(w.WindowMinutes))
		h.Set(p+"reset-at", strconv.FormatInt(unixCeil(w.ResetAt), 10))
		h.Set(p+"reset-after-seconds", strconv.FormatInt(secondsUntil(w.ResetAt, now), 10))
	}
	h.Set("x-codex-credits-has-credits", "false")
}

type rateLimitWindow struct {
	UsedPercent   float64 `json:"used_percent"`
	WindowMinutes int     `json:"window_minutes"`
	ResetAt       int64   `json:"reset_at"`
}

type rateLimitsEvent struct {
	Type       string `json:"type"`
	PlanType   string `json:"plan_type"`
	RateLimits struct {
		Primary   *rateLimitWindow `json:"primary"`
		Secondary *rateLimitWindow `json:"secondary"`
	} `json:"rate_limits"`
	Credits *struct{} `json:"credits"` // always null: the simulator has no credits
}

const evRateLimits = "codex.rate_limits"

// rateLimitsJSON is the codex.rate_limits event for usage. It carries no sequence_number: it is
// not part of the response it precedes.
func rateLimitsJSON(plan string, usage []WindowStats) []byte {
	ev := rateLimitsEvent{Type: evRateLimits, PlanType: plan}
	slots := [...]**rateLimitWindow{&ev.RateLimits.Primary, &ev.RateLimits.Secondary}
	for i, w := range usage {
		*slots[i] = &rateLimitWindow{UsedPercent: w.UsedPercent, WindowMinutes: w.WindowMinutes, ResetAt: unixCeil(w.ResetAt)}
	}
	b, _ := json.Marshal(&ev)
	return b
}

// usageLimitEvent is the error a response.create gets on an exhausted account.
func usageLimitEvent(plan string, resetAt, now time.Time) *errorEvent {
	return &errorEvent{
		evHead: evHead{Type: evError},
		Status: http.StatusTooManyRequests,
		Error: errorBody{
			Type:            codeUsageLimit,
			Code:            codeUsageLimit,
			Message:         "You've hit your usage limit (simulated). Try again after the window resets.",
			PlanType:        plan,
			ResetsAt:        unixCeil(resetAt),
			ResetsInSeconds: max(1, int(secondsUntil(resetAt, now))),
		},
	}
}

const codeUsageLimit = "usage_limit_reached"
