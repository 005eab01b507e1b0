package codex

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
)

// Limits is what the origin said about the account's usage in one report: the rate-limit headers
// of one upgrade (or HTTP) response, or one codex.rate_limits event. A Client passes every report
// to Config.OnLimits; what to do with it (cool an account down, prefer another) is the caller's.
type Limits struct {
	// Windows are the usage windows the report names, in no particular order. The origin has
	// moved windows between its "primary" and "secondary" slots before, so a window is identified
	// by its Limit and Minutes, never by its slot.
	Windows []LimitWindow
	// PlanType is the plan the report names ("plus", "pro", ...); "" when it names none (headers
	// do not).
	PlanType string
}

// LimitWindow is one usage window of a Limits report.
type LimitWindow struct {
	// Limit is the limit family: "codex" for the x-codex-* headers and for events that name no
	// other; other families come from x-<family>-primary-used-percent headers or an event's
	// metered_limit_name / limit_name. Lower case, "-" written as "_".
	Limit string
	// Minutes is the window's length in minutes; 0 when the report did not say.
	Minutes int
	// UsedPercent is the share of the window used, as reported (100 and above: exhausted).
	UsedPercent float64
	// ResetAt is when the window resets; the zero Time when the report did not say.
	ResetAt time.Time
}

// defaultLimit is the limit family of the x-codex-* headers.
const defaultLimit = "codex"

// limitSlots are the two window slots the origin reports per limit family.
var limitSlots = [...]string{"primary", "secondary"}

// ParseLimitHeaders returns the usage windows carried by response headers h (at time now, which
// turns reset-after-seconds into a time): x-codex-primary-used-percent, -window-minutes,
// -reset-at (unix seconds) or -reset-after-seconds, the same for "secondary", and the same for
// every other family that sends an x-<family>-primary-used-percent header. ok is false when h
// carries no usable window. Values that are not numbers are ignored.
func ParseLimitHeaders(h http.Header, now time.Time) (l Limits, ok bool) {
	families := []string{defaultLimit}
	for name := range h {
		lower := strings.ToLower(name)
		for _, slot := range limitSlots {
			rest, found := strings.CutSuffix(lower, "-"+slot+"-used-percent")
			if !found {
				continue
			}
			if fam, found := strings.CutPrefix(rest, "x-"); found && fam != "" && normLimit(fam) != defaultLimit {
				families = append(families, fam)
			}
		}
	}
	sort.Strings(families[1:]) // a stable order for callers that log the report
	seen := map[string]bool{}
	for _, fam := range families {
		if seen[normLimit(fam)] {
			continue
		}
		seen[normLimit(fam)] = true
		for _, slot := range limitSlots {
			p := "x-" + fam + "-" + slot + "-"
			used, ok := headerFloat(h, p+"used-percent")
			if !ok {
				continue
			}
			w := LimitWindow{Limit: normLimit(fam), UsedPercent: used}
			if m, ok := headerFloat(h, p+"window-minutes"); ok && m > 0 && m < math.MaxInt32 {
				w.Minutes = int(m)
			}
			w.ResetAt = resetTime(h.Get(p+"reset-at"), h.Get(p+"reset-after-seconds"), now)
			l.Windows = append(l.Windows, w)
		}
	}
	return l, len(l.Windows) > 0
}

// ParseLimitsEvent returns the usage windows of a codex.rate_limits event (at time now, which
// turns a reset_after_seconds into a time):
//
//	{"type":"codex.rate_limits","plan_type":"pro","rate_limits":{
//	  "primary":{"used_percent":42,"window_minutes":300,"reset_at":1796000000},"secondary":{...}}}
//
// reset_at may also be spelled resets_at, and reset_after_seconds resets_in_seconds. ok is false
// when data is not such an event or names no window.
func ParseLimitsEvent(data []byte, now time.Time) (l Limits, ok bool) {
	var ev struct {
		Type             string                     `json:"type"`
		PlanType         json.RawMessage            `json:"plan_type"`
		RateLimits       map[string]json.RawMessage `json:"rate_limits"`
		MeteredLimitName json.RawMessage            `json:"metered_limit_name"`
		LimitName        json.RawMessage            `json:"limit_name"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Type != typeRateLimits {
		return Limits{}, false
	}
	limit := defaultLimit
	if n := origintext.Str(ev.MeteredLimitName); n != "" {
		limit = normLimit(n)
	} else if n := origintext.Str(ev.LimitName); n != "" {
		limit = normLimit(n)
	}
	l.PlanType = origintext.Str(ev.PlanType)
	for _, slot := range limitSlots {
		var w struct {
			UsedPercent   json.RawMessage `json:"used_percent"`
			WindowMinutes json.RawMessage `json:"window_minutes"`
			ResetAt       json.RawMessage `json:"reset_at"`
			ResetsAt      json.RawMessage `json:"resets_at"`
			ResetAfter    json.RawMessage `json:"reset_after_seconds"`
			ResetsIn      json.RawMessage `json:"resets_in_seconds"`
		}
		raw := ev.RateLimits[slot]
		if len(raw) == 0 || json.Unmarshal(raw, &w) != nil {
			continue
		}
		used, ok := num(w.UsedPercent)
		if !ok || math.IsNaN(used) || math.IsInf(used, 0) {
			continue
		}
		lw := LimitWindow{Limit: limit, UsedPercent: used}
		if m, ok := num(w.WindowMinutes); ok && m > 0 && m < math.MaxInt32 {
			lw.Minutes = int(m)
		}
		at, after := origintext.Str(w.ResetAt), origintext.Str(w.ResetAfter)
		if at == "" {
			at = origintext.Str(w.ResetsAt)
		}
		if after == "" {
			after = origintext.Str(w.ResetsIn)
		}
		lw.ResetAt = resetTime(at, after, now)
		l.Windows = append(l.Windows, lw)
	}
	return l, len(l.Windows) > 0
}

// normLimit is the canonical name of a limit family: lower case, "_" for "-".
func normLimit(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
}

func headerFloat(h http.Header, name string) (float64, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// resetTime turns a reset-at (unix seconds) or, failing that, a reset-after (seconds from now)
// into a time; the zero Time when neither is a usable number. Both are clamped to maxRetryAfter
// from now, like every retry time taken from the origin.
func resetTime(at, after string, now time.Time) time.Time {
	if f, err := strconv.ParseFloat(strings.TrimSpace(at), 64); err == nil && f > 0 && !math.IsInf(f, 0) {
		if f > float64(now.Add(maxRetryAfter).Unix()) {
			return now.Add(maxRetryAfter)
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9))
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(after), 64); err == nil && f >= 0 {
		return now.Add(duration(f, time.Second))
	}
	return time.Time{}
}

// reportHeaderLimits passes the limits carried by a successful upgrade's response to
// Config.OnLimits.
func (c *Client) reportHeaderLimits(resp *http.Response) {
	if c.cfg.OnLimits == nil || resp == nil {
		return
	}
	if l, ok := ParseLimitHeaders(resp.Header, time.Now()); ok {
		c.cfg.OnLimits(l)
	}
}

// reportEventLimits passes the limits of a codex.rate_limits event to Config.OnLimits.
func (c *Client) reportEventLimits(data []byte) {
	if c.cfg.OnLimits == nil {
		return
	}
	if l, ok := ParseLimitsEvent(data, time.Now()); ok {
		c.cfg.OnLimits(l)
	}
}
