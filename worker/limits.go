package worker

import (
	"cmp"
	"slices"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
)

// limitState is what one account's origin has said about its usage, and the account's cooldown.
// Every method takes the time as a parameter; the state does no I/O and starts nothing. It is not
// safe for concurrent use: the Worker's router lock guards it.
//
// The rules:
//   - A usage window is known by its limit family and its length in minutes, never by the slot
//     (primary, secondary) it was reported in. It holds the last reported used percent and reset
//     time. Once its reset time has passed, the report says nothing any more: the window is
//     forgotten.
//   - Between reports the state projects the usage: the last report plus step for every
//     generation completed since it or running now, where step is the percent one completion
//     was seen to add between two reports (with several workers on one account it also counts
//     theirs, which is what the projection needs).
//   - A report at or above the ceiling (max_used_percent), or a refusal by the origin (limits,
//     credentials), cools the account down: until the window's reset, the refusal's retry time,
//     or else for the fallback. A cooldown only ever grows. Nothing shortens it but the passing
//     of its end: a later report of low usage is older news than the refusal, or a header of a
//     different window, and trusting it would send requests to an exhausted account again.
//   - When the projection says the next generation could reach the ceiling, the account is on
//     its last call: it runs one generation at a time, so a worker discovers an exhausted
//     account with one request, not with every request in flight. So it is while no step is
//     known yet to project by (a window's first generation on this worker): other workers, or
//     this one, may have spent a budget of a few generations already, and the next start's
//     report tells. A report that did not move over completions bounds the step by the
//     report's resolution (1 percent) over their number.
//   - When the projection leaves room for less than one generation after the next (the last
//     two), the account takes one starting generation at a time: each start's report (or
//     refusal) arrives before the next start, so when other workers spent the rest meanwhile,
//     one request finds out, not two started together on a report that was already old.
//   - Until the origin has answered for the account once (a report, or a first event that is
//     not an error), the account is unknown and takes one starting generation at a time: other
//     workers may have used it up already, and a burst sent to it would learn that with every
//     request instead of one.
//   - A record-only state (the one-account shortcut, see policy) keeps the reports and the
//     projection, but never cools down and is never on its last call.
type limitState struct {
	ceiling    float64 // percent, (0, 100]
	recordOnly bool    // reports and refusals are recorded, never enforced

	windows map[windowKey]*usageWindow
	steps   map[windowKey]float64 // percent per completion, remembered across periods

	coolUntil time.Time
	coolCode  string // the origin's code of the refusal that set coolUntil; "" for a report
	coolWhy   string // what set coolUntil, for logs and errors (never a secret)

	inflight int // generations running on the account now

	// heard: the origin has answered for the account (a usage report, or a generation's first
	// event that was not an error). Until then the account is unknown: it may have been used
	// up by other workers already, so it takes one starting generation at a time.
	heard bool
}

// windowKey identifies a usage window: its limit family and its length.
type windowKey struct {
	limit   string
	minutes int
}

// usageWindow is the last report of one window.
type usageWindow struct {
	used    float64   // percent, as reported
	resetAt time.Time // zero = unknown
	since   int       // generations completed on the account since the report
}

// reportResolution is the smallest change of used percent a report is trusted to show.
const reportResolution = 1.0

// epsilon absorbs float noise in percent arithmetic (3 × 33.333… is not always 100).
const epsilon = 1e-6

func newLimitState(ceiling float64) *limitState {
	if ceiling <= 0 || ceiling > 100 {
		ceiling = 100
	}
	return &limitState{ceiling: ceiling, windows: map[windowKey]*usageWindow{}, steps: map[windowKey]float64{}}
}

// observe records a report received at now.
func (s *limitState) observe(l codex.Limits, now time.Time, fallback time.Duration) {
	s.heard = true
	for _, w := range l.Windows {
		if !w.ResetAt.IsZero() && !w.ResetAt.After(now) {
			continue // a report about a period that has already ended
		}
		k := windowKey{w.Limit, w.Minutes}
		old := s.windows[k]
		switch {
		case old != nil && old.since > 0 && w.UsedPercent > old.used:
			s.steps[k] = (w.UsedPercent - old.used) / float64(old.since)
		case old != nil && old.since > 0 && w.UsedPercent == old.used && s.steps[k] == 0:
			// Completions that moved the report less than its resolution (a percent): each
			// used less than 1/since of one, the bound projections use until a report moves.
			s.steps[k] = reportResolution / float64(old.since)
		}
		s.windows[k] = &usageWindow{used: w.UsedPercent, resetAt: w.ResetAt}
		if w.UsedPercent >= s.ceiling-epsilon {
			until := w.ResetAt
			if until.IsZero() {
				until = now.Add(fallback)
			}
			s.coolDown(until, "", windowReason(k, w.UsedPercent, s.ceiling))
		}
	}
}

// windowReason describes a report that reached the ceiling.
func windowReason(k windowKey, used, ceiling float64) string {
	what := "a usage window"
	if k.minutes > 0 {
		what = "its " + formatMinutes(k.minutes) + " usage window"
	}
	if ceiling < 100 {
		return "the origin reported " + formatPercent(used) + " of " + what + " used, at or above max_used_percent " + formatPercent(ceiling)
	}
	return "the origin reported " + formatPercent(used) + " of " + what + " used"
}

// refuse records that the origin refused the account at now (code: its own error code, e.g.
// usage_limit_reached; why: for logs): it cools down for retryAfter, or fallback when the origin
// gave no time.
func (s *limitState) refuse(code, why string, retryAfter time.Duration, now time.Time, fallback time.Duration) {
	if retryAfter <= 0 {
		retryAfter = fallback
	}
	s.coolDown(now.Add(retryAfter), code, why)
}

// coolDown extends the cooldown to until; an earlier until changes nothing.
func (s *limitState) coolDown(until time.Time, code, why string) {
	if until.After(s.coolUntil) && !s.recordOnly {
		s.coolUntil, s.coolCode, s.coolWhy = until, code, why
	}
}

// answered records that a generation on the account got a first event other than an error.
func (s *limitState) answered() { s.heard = true }

// unknown reports whether the origin has not yet answered for the account (see heard); never
// for a record-only state.
func (s *limitState) unknown() bool { return !s.heard && !s.recordOnly }

// started counts a generation starting on the account.
func (s *limitState) started() { s.inflight++ }

// finished counts a generation that ended; completed ones count towards the projection.
func (s *limitState) finished(completed bool) {
	s.inflight--
	if completed {
		for _, w := range s.windows {
			w.since++
		}
	}
}

// availability is what routing needs to know about an account at one instant.
type availability struct {
	cooling  bool      // cooling down until coolUntil
	until    time.Time // the cooldown's end when cooling
	lastCall bool      // the next generation could reach the ceiling: one at a time
	final    bool      // the next two could: one starting at a time (lastCall implies it)
	// headroom is the projected unused share of the tightest window below the ceiling, in
	// [0, 1]; 1 when nothing is known.
	headroom float64
}

// available returns the account's availability at now, forgetting windows whose reset passed.
func (s *limitState) available(now time.Time) availability {
	if now.Before(s.coolUntil) {
		return availability{cooling: true, until: s.coolUntil}
	}
	a := availability{headroom: 1}
	for k, w := range s.windows {
		if !w.resetAt.IsZero() && !w.resetAt.After(now) {
			delete(s.windows, k)
			continue
		}
		step := s.steps[k]
		projected := w.used + float64(w.since+s.inflight)*step
		if projected >= s.ceiling-epsilon || (step > 0 && projected+step > s.ceiling+epsilon) {
			a.lastCall = true
		}
		if step > 0 && projected+2*step > s.ceiling+epsilon {
			a.final = true
		}
		if step == 0 && w.since+s.inflight > 0 {
			// Generations completed since the report or running, and no step to project them
			// by: what they use is unknown until the next report (which the next start
			// brings), and a small window may be spent already, by this worker or others.
			a.lastCall = true
		}
		a.headroom = min(a.headroom, max(0, (s.ceiling-projected)/s.ceiling))
	}
	a.lastCall = a.lastCall && !s.recordOnly
	a.final = (a.final || a.lastCall) && !s.recordOnly
	return a
}

// oneStarting reports whether the account takes one starting generation at a time at now: while
// it is unknown, and on its final stretch (see availability.final).
func (s *limitState) oneStarting(now time.Time) bool {
	return s.unknown() || s.available(now).final
}

// usage returns the known windows at now, ordered by family and length.
func (s *limitState) usage(now time.Time) []schemas.WindowUsage {
	var out []schemas.WindowUsage
	for k, w := range s.windows {
		if !w.resetAt.IsZero() && !w.resetAt.After(now) {
			continue
		}
		out = append(out, schemas.WindowUsage{Limit: k.limit, Minutes: k.minutes, UsedPercent: w.used, ResetAt: w.resetAt,
			Projected: w.used + float64(w.since+s.inflight)*s.steps[k]})
	}
	slices.SortFunc(out, func(a, b schemas.WindowUsage) int {
		return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Minutes, b.Minutes))
	})
	return out
}
